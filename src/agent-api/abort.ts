/**
 * A caller's signal joined with a timeout, for calls that must end by a bound whatever the caller
 * does. Node 20's `AbortSignal.any()` holds its sources weakly: a timeout signal that nothing else
 * references can be garbage-collected before it fires, and the joined signal then never aborts
 * (a GET bounded at 100 ms ran 30 s in a loaded test run). {@link withTimeout} keeps the timeout
 * referenced until the call settles.
 */

/** Runs `call` with `signal` joined to a timeout of `ms`, the timeout kept alive until it settles. */
export async function withTimeout<T>(
  signal: AbortSignal | undefined,
  ms: number,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const timeout = AbortSignal.timeout(ms);
  try {
    return await call(signal === undefined ? timeout : AbortSignal.any([signal, timeout]));
  } finally {
    keepReferenced(timeout);
  }
}

/** Uses `value`, so that it stays referenced (and not collected) until this runs. */
function keepReferenced(value: AbortSignal): void {
  void value;
}
