/**
 * Runs `call` with `signal` joined to a timeout of `ms`, which aborts with a `TimeoutError`: one
 * controller, one timer and one listener, cleared when the call settles. Not `AbortSignal.any()`:
 * Node 20 holds its sources weakly, so an otherwise unreferenced timeout signal can be collected
 * before it fires. Not `AbortSignal.timeout()`: its timer stays armed after the call, so a worker
 * polling hundreds of times a second keeps thousands alive.
 */
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
