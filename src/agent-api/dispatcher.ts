/**
 * The process-wide HTTP connection pool. One undici dispatcher for the whole worker, so that the
 * many concurrent polls of many workflows share keep-alive connections instead of each paying a TCP
 * and TLS handshake. This is the one piece of module-level mutable state the house style allows.
 *
 * It honours `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` for the agent API, through undici's
 * EnvHttpProxyAgent, and never installs a global dispatcher: nothing else in the process (the
 * Temporal connection is gRPC in the SDK's core, not undici) is proxied by it.
 */
import { Agent, Dispatcher, EnvHttpProxyAgent, Pool } from 'undici';

/** The timeouts of a dispatcher made by {@link createDispatcher}, in milliseconds. */
export interface DispatcherTimeouts {
  /**
   * TCP plus TLS handshake. A failure here is surely not applied, so it can be short: a healthy
   * public API connects in well under a second, and 10 s still covers a slow network while failing
   * fast on a black-holed address.
   */
  connectTimeoutMs: number;
  /**
   * From the request sent to the response headers. Create, get and message answer at once (the
   * agent works in the background), so 30 s is generous for a slow server and still lets several
   * attempts fit in an activity's start-to-close timeout.
   */
  headersTimeoutMs: number;
  /** Longest pause between body chunks. Records are a few hundred bytes: 15 s only means a stalled peer. */
  bodyTimeoutMs: number;
  /**
   * How long an idle connection is kept. Polls come every 5 to 60 s; 30 s reuses a connection between
   * most of them, and stays under the 60 s idle timeout common at load balancers (a server's
   * `Keep-Alive: timeout=` hint, when sent, shortens it further).
   */
  keepAliveTimeoutMs: number;
}

/** The production values, each explained on {@link DispatcherTimeouts}. */
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
 * `example.com` also covers its subdomains; `*` is every host) and loopback hosts (`localhost`,
 * 127.0.0.0/8, `[::1]`), whatever `NO_PROXY` says, are reached directly. The timeouts apply to both
 * kinds of connection. Without a proxy in `env`, this is a plain undici Agent.
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
  const direct = new Agent({ ...pool, connect });
  if (proxy === null) return direct;
  // undici builds some of a proxy's pools from a connector alone (the pools to the proxy, the pool
  // that sends absolute-form requests, the TLS through the tunnel); without these factories and TLS
  // options they would wait 300 s for headers and keep no timeouts of ours.
  const withTimeouts = (origin: string | URL, options: object): Dispatcher =>
    new Pool(origin, { ...pool, ...options });
  const proxied = new EnvHttpProxyAgent({
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
  return new LoopbackDirect(direct, proxied);
}

/** What EnvHttpProxyAgent is given, read from `env` once. */
interface ProxySettings {
  httpProxy: string;
  httpsProxy: string;
  noProxy: string;
}

/**
 * The proxy variables of `env`, or null when no proxy is set. Each value is passed on explicitly,
 * an unset one as `''`, so that EnvHttpProxyAgent never falls back to reading `process.env` itself.
 */
function proxySettings(env: NodeJS.ProcessEnv): ProxySettings | null {
  const httpProxy = proxyUrl(env, 'http_proxy', 'HTTP_PROXY');
  const httpsProxy = proxyUrl(env, 'https_proxy', 'HTTPS_PROXY');
  if (httpProxy === '' && httpsProxy === '') return null;
  return { httpProxy, httpsProxy, noProxy: env.no_proxy ?? env.NO_PROXY ?? '' };
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

/** Whether an origin's host is loopback ({@link isLoopbackHost}). */
function isLoopback(origin: string | URL | undefined): boolean {
  const text = origin === undefined ? '' : String(origin);
  return URL.canParse(text) && isLoopbackHost(new URL(text).hostname);
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

/**
 * Sends loopback requests to `direct` and the others to `proxied`. The simulator and the tests run on
 * loopback, and a proxy in front of the machine cannot reach its loopback anyway, so no `NO_PROXY`
 * setting should be needed for them.
 */
class LoopbackDirect extends Dispatcher {
  readonly #direct: Dispatcher;
  readonly #proxied: Dispatcher;

  constructor(direct: Dispatcher, proxied: Dispatcher) {
    super();
    this.#direct = direct;
    this.#proxied = proxied;
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    return (isLoopback(options.origin) ? this.#direct : this.#proxied).dispatch(options, handler);
  }

  override close(callback?: () => void): Promise<void> {
    return settled(Promise.all([this.#direct.close(), this.#proxied.close()]), callback);
  }

  override destroy(errOrCallback?: Error | null | (() => void), callback?: () => void): Promise<void> {
    const err = typeof errOrCallback === 'function' ? null : (errOrCallback ?? null);
    const done = typeof errOrCallback === 'function' ? errOrCallback : callback;
    return settled(Promise.all([this.#direct.destroy(err), this.#proxied.destroy(err)]), done);
  }
}

/** Both undici forms of close and destroy: a promise, and the callback when one is given. */
function settled(both: Promise<unknown>, callback: (() => void) | undefined): Promise<void> {
  const done = both.then(() => undefined);
  if (callback) void done.then(callback, callback);
  return done;
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
