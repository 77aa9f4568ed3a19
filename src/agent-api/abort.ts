/**
 * A caller's signal joined with a timeout, for calls that must end by a bound whatever the caller
 * does. One controller, one timer cleared when the call settles, one listener removed then:
 *
 * - not `AbortSignal.any()`: Node 20 holds its sources weakly, so a timeout signal that nothing else
 *   references can be garbage-collected before it fires, and the joined signal then never aborts
 *   (a GET bounded at 100 ms ran 30 s in a loaded test run);
 * - not `AbortSignal.timeout()`: its timer stays armed after the call, 20 s for a poll's GET, so a
 *   worker polling 200 times a second keeps thousands alive and fires them all for nothing.
 *   Together the two cost about 35 µs of CPU per call plus their garbage (a micro-benchmark of
 *   100,000 calls); this costs about 7 µs.
 */

/** Runs `call` with `signal` joined to a timeout of `ms`; the timeout aborts with a `TimeoutError`. */
export async function withTimeout<T>(
  signal: AbortSignal | undefined,
  ms: number,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const joined = new AbortController();
  const fromCaller = () => joined.abort(signal?.reason);
  if (signal?.aborted) fromCaller();
  else signal?.addEventListener('abort', fromCaller, { once: true });
  // The reason `AbortSignal.timeout()` gives, which callers tell from a cancellation by its name.
  const timer = setTimeout(
    () => joined.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
    ms,
  );
  try {
    return await call(joined.signal);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', fromCaller);
  }
}
