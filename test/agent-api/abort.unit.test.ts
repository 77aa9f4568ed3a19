/**
 * A timeout joined to a caller's signal fires while the garbage collector runs: Node 20's
 * `AbortSignal.any()` holds its sources weakly, and a timeout nothing references is collected
 * before it fires (a GET bounded at 100 ms once ran 30 s in a loaded test run).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { withTimeout } from '../../src/agent-api/abort.js';

test('the timeout ends the call however often the garbage collector runs meanwhile', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const collecting = setInterval(gc, 10);
  try {
    const started = Date.now();
    const outcome = await withTimeout(
      new AbortController().signal,
      100,
      (signal) =>
        new Promise<string>((resolve) => {
          signal.addEventListener('abort', () => resolve('aborted'));
          setTimeout(() => resolve('never aborted'), 3_000);
        }),
    );
    assert.equal(outcome, 'aborted');
    assert.ok(Date.now() - started < 2_000, `aborted after ${Date.now() - started} ms`);
  } finally {
    clearInterval(collecting);
  }
});

test('the caller signal still aborts the call first', async () => {
  const caller = new AbortController();
  const outcome = withTimeout(
    caller.signal,
    60_000,
    (signal) =>
      new Promise<unknown>((resolve) => signal.addEventListener('abort', () => resolve(signal.reason))),
  );
  caller.abort(new Error('cancelled'));
  assert.equal(((await outcome) as Error).message, 'cancelled');
});
