import assert from 'node:assert/strict';
import { test } from 'node:test';
import { POLL_JITTER } from '../src/poll-schedule.js';
import { PollSchedule } from '../src/poll-schedule.js';

const settings = { initialIntervalMs: 5_000, maxIntervalMs: 60_000, backoffCoefficient: 1.5 };
const now = Date.parse('2026-11-24T00:00:00Z');
const far = now + 3_600_000;

test('the interval grows by the coefficient up to the maximum, and restarts after a message', () => {
  const schedule = new PollSchedule(settings);
  const seen = [];
  for (let i = 0; i < 8; i++) {
    seen.push(schedule.intervalMs);
    schedule.grow();
  }
  assert.deepEqual(seen, [5_000, 7_500, 11_250, 16_875, 25_312.5, 37_968.75, 56_953.125, 60_000]);
  schedule.restart();
  assert.equal(schedule.intervalMs, 5_000);
});

test('the wait is jittered within the bounds, in whole milliseconds', () => {
  const schedule = new PollSchedule(settings);
  assert.equal(
    schedule.waitMs(now, far, () => 0.5),
    5_000,
  );
  assert.equal(
    schedule.waitMs(now, far, () => 0),
    5_000 * (1 - POLL_JITTER),
  );
  assert.ok(schedule.waitMs(now, far, () => 0.999_999) <= 5_000 * (1 + POLL_JITTER));
});

test('a retry wait replaces the interval, and no wait runs past the deadline or below 1 ms', () => {
  const schedule = new PollSchedule(settings);
  assert.equal(
    schedule.waitMs(now, far, () => 0.5, 12_345),
    12_345,
  );
  assert.equal(
    schedule.waitMs(now, now + 2_000, () => 0.5),
    2_000,
  );
  assert.equal(
    schedule.waitMs(now, now - 10, () => 0.5),
    1,
  );
});

test('a carried interval goes on where the previous run stopped', () => {
  const schedule = new PollSchedule(settings, 40_000);
  schedule.grow();
  assert.equal(schedule.intervalMs, 60_000);
});
