import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  afterRecord,
  afterTransientError,
  intervalAfterAttempt,
  pollRetryCapMs,
  scheduleAfter,
} from '../src/poll-schedule.js';

const DEFAULT = { intervalMs: 5_000, maxIntervalMs: 60_000, backoffCoefficient: 1.5 };
const MIDDLE = () => 0.5; // no jitter: pollJitterFactor(0.5) is 1

describe('polling by server-side retry', () => {
  test('the interval grows by the coefficient per attempt up to the maximum', () => {
    assert.deepEqual(
      [1, 2, 3, 8, 50].map((attempt) => intervalAfterAttempt(DEFAULT, attempt)),
      [5_000, 7_500, 11_250, 60_000, 60_000],
    );
    assert.equal(intervalAfterAttempt({ ...DEFAULT, backoffCoefficient: 1 }, 400), 5_000);
  });

  test('an active record polls again after the jittered interval; any other returns', () => {
    assert.deepEqual(afterRecord('active', DEFAULT, 2, 3_600_000, MIDDLE), {
      kind: 'poll-again',
      delayMs: 7_500,
    });
    const jittered = afterRecord('active', DEFAULT, 2, 3_600_000, () => 0);
    assert.deepEqual(jittered, { kind: 'poll-again', delayMs: 7_125 }); // 7.5 s less 5%
    for (const status of ['completed', 'archived', 'failed', 'paused']) {
      assert.deepEqual(afterRecord(status, DEFAULT, 2, 3_600_000, MIDDLE), { kind: 'return' });
    }
  });

  test('an active record returns when the next poll would come at or after the deadline', () => {
    assert.deepEqual(afterRecord('active', DEFAULT, 1, 5_000, MIDDLE), { kind: 'return' });
    assert.deepEqual(afterRecord('active', DEFAULT, 1, 5_001, MIDDLE), {
      kind: 'poll-again',
      delayMs: 5_000,
    });
  });

  test('a transient error waits the schedule, raised to Retry-After up to the longest poll wait', () => {
    assert.deepEqual(
      afterTransientError(null, DEFAULT, 1, () => 0),
      { kind: 'retry', delayMs: 5_000 },
    );
    assert.deepEqual(
      afterTransientError(30_000, DEFAULT, 1, () => 0),
      { kind: 'retry', delayMs: 30_000 },
    );
    // Retry-After 0 never goes below the schedule.
    assert.deepEqual(
      afterTransientError(0, DEFAULT, 3, () => 0),
      { kind: 'retry', delayMs: 11_250 },
    );
    assert.deepEqual(
      afterTransientError(60_001, DEFAULT, 1, () => 0),
      { kind: 'hand-back' },
    );
  });

  test('where a cancelled poll activity left the schedule: polls made and the next interval', () => {
    // Attempts at 0, 5, 12.5, 23.75 s ...
    assert.deepEqual(scheduleAfter(DEFAULT, 0), { polls: 1, intervalMs: 7_500 });
    assert.deepEqual(scheduleAfter(DEFAULT, 4_999), { polls: 1, intervalMs: 7_500 });
    assert.deepEqual(scheduleAfter(DEFAULT, 5_000), { polls: 2, intervalMs: 11_250 });
    assert.deepEqual(scheduleAfter(DEFAULT, 13_000), { polls: 3, intervalMs: 16_875 });
    // After an hour: 7 attempts reach the maximum at 160.9 s, then one a minute.
    const hour = scheduleAfter(DEFAULT, 3_600_000);
    assert.equal(hour.intervalMs, 60_000);
    assert.ok(hour.polls >= 63 && hour.polls <= 66, `${hour.polls} polls in an hour`);
    assert.deepEqual(scheduleAfter({ ...DEFAULT, backoffCoefficient: 1 }, 12_000), {
      polls: 3,
      intervalMs: 5_000,
    });
  });
});

test('the poll activity may wait its longest poll with either jitter: the server caps retries there', () => {
  assert.equal(pollRetryCapMs(60_000), 72_000);
  // A Retry-After at the longest wait, with its jitter, still fits.
  const worst = afterTransientError(60_000, DEFAULT, 1, () => 0.999_999);
  assert.ok(worst.kind === 'retry' && worst.delayMs <= pollRetryCapMs(DEFAULT.maxIntervalMs));
});
