/**
 * The process-wide HTTP connection pool. One undici dispatcher for the whole worker, so that the
 * many concurrent polls of many workflows share keep-alive connections instead of each paying a TCP
 * and TLS handshake. This is the one piece of module-level mutable state the house style allows.
 *
 * It honours `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` for the agent API, through undici's
 * EnvHttpProxyAgent, and never installs a global dispatcher: nothing else in the process (the
 * Temporal connection is gRPC in the SDK's core, not undici) is proxied by it.
 */
import { Agent, EnvHttpProxyAgent, Pool, type Dispatcher } from 'undici';

/**
 * The timeouts of a dispatcher made by {@link createDispatcher}, in milliseconds: TCP plus TLS
 * handshake, request sent to response headers, longest pause between body chunks, and how long an
 * idle connection is kept.
 */
export interface DispatcherTimeouts {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

/** The production values; why each, in docs/agent-api.md ("Timeouts"). */
export const DEFAULT_TIMEOUTS: Readonly<DispatcherTimeouts> = {
  connectTimeoutMs: 10_000,
  headersTimeoutMs: 30_000,
  bodyTimeoutMs: 15_000,
  keepAliveTimeoutMs: 30_000,
};

/**
 * A new keep-alive dispatcher. The worker uses the shared one from {@link getDispatcher}; tests and
 * tools pass their own (short timeouts, say) through `AgentApiClientOptions.dispatcher`.
 *
 * When `env` names a proxy (`https_proxy` or `HTTPS_PROXY` for https:// targets, `http_proxy` or
 * `HTTP_PROXY` for http:// ones and for https:// ones without an https proxy; lowercase first, as
 * undici reads them), requests go through it: https:// ones through a CONNECT tunnel, http:// ones
 * in absolute form. Hosts that `no_proxy` or `NO_PROXY` lists (commas or spaces; `.example.com` or
 * `example.com` also covers its subdomains; `*` is every host) and the loopback names
 * ({@link LOOPBACK_NAMES}), whatever `NO_PROXY` says, are reached directly. The timeouts apply to
 * both kinds of connection. Without a proxy in `env`, or with `NO_PROXY=*`, this is a plain undici
 * Agent.
 *
 * @throws TypeError when a proxy variable is not an http:// or https:// URL; the message names the
 *   variable, never its value (which may carry credentials).
 */
export function createDispatcher(
  timeouts: Partial<DispatcherTimeouts> = {},
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
 * Loopback by name, always reached directly: the simulator and the tests run there, and a proxy in
 * front of the machine cannot reach its loopback anyway, so no `NO_PROXY` setting should be needed
 * for them. undici's `noProxy` matches names, not address ranges: another 127.x address is proxied
 * unless `NO_PROXY` names it.
 */
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];

/** What EnvHttpProxyAgent is given, read from `env` once. */
interface ProxySettings {
  httpProxy: string;
  httpsProxy: string;
  noProxy: string;
}

/**
 * The proxy variables of `env`, or null when no host is proxied. Each value is passed on
 * explicitly, an unset one as `''`, so that EnvHttpProxyAgent never falls back to reading
 * `process.env` itself.
 */
function proxySettings(env: NodeJS.ProcessEnv): ProxySettings | null {
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

/**
 * Checks the proxy variables of `env` the way {@link createDispatcher} reads them, so that a bad
 * one is refused when the worker starts rather than at its first API call.
 *
 * @throws TypeError naming the variable, never its value
 */
export function checkProxyEnv(env: NodeJS.ProcessEnv): void {
  proxySettings(env);
}

let shared: Dispatcher | null = null;

/**
 * The process-wide dispatcher, created on first use with {@link DEFAULT_TIMEOUTS} and the proxy
 * variables of `process.env` at that moment.
 */
export function getDispatcher(): Dispatcher {
  shared ??= createDispatcher();
  return shared;
}

/**
 * Closes the process-wide dispatcher (waiting for requests in flight) so the process can exit.
 * A later {@link getDispatcher} makes a new one.
 */
export async function closeDispatcher(): Promise<void> {
  const closing = shared;
  shared = null;
  await closing?.close();
}
