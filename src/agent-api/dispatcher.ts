/**
 * The process-wide HTTP connection pool: one undici dispatcher for the whole worker, so that the
 * polls of many workflows share keep-alive connections (the one module-level mutable state the
 * house style allows). It honours the proxy variables for the agent API (docs/configuration.md,
 * "Proxies") and never installs a global dispatcher: nothing else in the process is proxied by it.
 */
import { Agent, EnvHttpProxyAgent, Pool, type Dispatcher } from 'undici';

/**
 * The timeouts of a dispatcher, in ms: TCP plus TLS handshake, request sent to response headers,
 * longest pause between body chunks, idle keep-alive. Why each: docs/agent-api.md ("Timeouts").
 */
export const DEFAULT_TIMEOUTS = {
  connectTimeoutMs: 10_000,
  headersTimeoutMs: 30_000,
  bodyTimeoutMs: 15_000,
  keepAliveTimeoutMs: 30_000,
};

/**
 * A new keep-alive dispatcher (tests and tools pass their own to the client), through the proxy
 * `env` names for its targets, as docs/configuration.md ("Proxies") says; a plain undici Agent
 * without one.
 *
 * @throws TypeError when a proxy variable is not an http:// or https:// URL; the message names the
 *   variable, never its value (which may carry credentials).
 */
export function createDispatcher(
  timeouts: Partial<typeof DEFAULT_TIMEOUTS> = {},
  env: NodeJS.ProcessEnv = process.env,
): Dispatcher {
  const t = { ...DEFAULT_TIMEOUTS, ...timeouts };
  const pool = {
    headersTimeout: t.headersTimeoutMs,
    bodyTimeout: t.bodyTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    // A server hint longer than ours must not keep a connection idle for more than 10 minutes.
    keepAliveMaxTimeout: 10 * 60_000,
  };
  const connect = { timeout: t.connectTimeoutMs };
  const proxy = proxySettings(env);
  if (proxy === null) return new Agent({ ...pool, connect });
  // undici builds some of a proxy's pools from a connector alone (the pools to the proxy, the pool
  // that sends absolute-form requests, the TLS through the tunnel); without these factories and TLS
  // options they would wait 300 s for headers and keep no timeouts of ours.
  const withTimeouts = (origin: string | URL, options: object): Dispatcher =>
    new Pool(origin, { ...pool, ...options });
  return new EnvHttpProxyAgent({
    ...pool,
    connect,
    ...proxy,
    // http:// targets in absolute form (`GET http://host/path`), as curl sends them and as every
    // forward proxy accepts; https:// targets always go through CONNECT.
    proxyTunnel: false,
    proxyTls: connect,
    requestTls: connect,
    factory: withTimeouts,
    clientFactory: withTimeouts,
  });
}

/**
 * Loopback by name, always reached directly: a proxy in front of the machine cannot reach its
 * loopback anyway (undici matches names, not address ranges).
 */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

/**
 * What EnvHttpProxyAgent is given, or null when no host is proxied (the worker's start checks the
 * variables with it). An unset variable is passed as `''`, so that EnvHttpProxyAgent never falls
 * back to reading `process.env` itself. @throws TypeError as {@link createDispatcher}
 */
export function proxySettings(
  env: NodeJS.ProcessEnv,
): { httpProxy: string; httpsProxy: string; noProxy: string } | null {
  const httpProxy = proxyUrl(env, 'http_proxy', 'HTTP_PROXY');
  const httpsProxy = proxyUrl(env, 'https_proxy', 'HTTPS_PROXY');
  const noProxy = (env.no_proxy ?? env.NO_PROXY ?? '').trim();
  // undici reads `*` as every host only when it stands alone, so it cannot follow the loopback names.
  if ((httpProxy === '' && httpsProxy === '') || noProxy === '*') return null;
  return { httpProxy, httpsProxy, noProxy: [...LOOPBACK_NAMES, noProxy].join(',') };
}

/** One proxy variable as a URL; `host:port` alone is taken as `http://host:port`, as curl does. */
function proxyUrl(env: NodeJS.ProcessEnv, lower: string, upper: string): string {
  const name = env[lower] === undefined ? upper : lower;
  const value = (env[name] ?? '').trim();
  if (value === '') return '';
  const url = /^[a-z][a-z\d+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  // Node's own "Invalid URL" error carries the input, credentials included: test first instead.
  const parsed = URL.canParse(url) ? new URL(url) : null;
  if (parsed?.protocol !== 'http:' && parsed?.protocol !== 'https:') {
    throw new TypeError(
      `${name} must be an http:// or https:// proxy URL (its value is not shown: it may hold credentials)`,
    );
  }
  return url;
}

/** `localhost`, 127.0.0.0/8 or ::1, as a URL's hostname spells it: a host that never leaves the machine. */
export function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || /^127(\.\d{1,3}){3}$/.test(hostname) || hostname === '[::1]';
}

let shared: Dispatcher | null = null;

/** The process-wide dispatcher, created on first use from `process.env` at that moment. */
export function getDispatcher(): Dispatcher {
  shared ??= createDispatcher();
  return shared;
}

/** Closes the process-wide dispatcher (waiting for requests in flight); a later {@link getDispatcher} makes a new one. */
export async function closeDispatcher(): Promise<void> {
  const closing = shared;
  shared = null;
  await closing?.close();
}
