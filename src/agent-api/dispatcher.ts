/**
 * The process-wide HTTP connection pool. One undici Agent for the whole worker, so that the many
 * concurrent polls of many workflows share keep-alive connections instead of each paying a TCP and
 * TLS handshake. This is the one piece of module-level mutable state the house style allows.
 */
import { Agent, type Dispatcher } from 'undici';

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
 * A new keep-alive undici Agent. The worker uses the shared one from {@link getDispatcher}; tests and
 * tools pass their own (short timeouts, say) through `AgentApiClientOptions.dispatcher`.
 */
export function createDispatcher(timeouts: Partial<DispatcherTimeouts> = {}): Agent {
  const t = { ...DEFAULT_TIMEOUTS, ...timeouts };
  return new Agent({
    connect: { timeout: t.connectTimeoutMs },
    headersTimeout: t.headersTimeoutMs,
    bodyTimeout: t.bodyTimeoutMs,
    keepAliveTimeout: t.keepAliveTimeoutMs,
    // A server hint longer than ours must not keep a connection idle for more than 10 minutes.
    keepAliveMaxTimeout: 10 * 60_000,
  });
}

let shared: Agent | null = null;

/** The process-wide dispatcher, created on first use with {@link DEFAULT_TIMEOUTS}. */
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
