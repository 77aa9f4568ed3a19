import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CONSECUTIVE_ANSWER_BOUNDS,
  GET_BACKOFF,
  MAX_RETRY_AFTER_MS,
  RETRY_JITTER,
} from '../../../src/retries.js';
import { FailureStreak } from '../../../src/workflows/agent-job/failure-streak.js';

const noJitter = () => 0;
const bound = CONSECUTIVE_ANSWER_BOUNDS.JobNotFound as number;

test('the first failure starts a streak; a success ends it and says how long it was', () => {
  const streak = new FailureStreak();
  assert.deepEqual(streak.failed('ServiceUnavailable', 1, 0), { startsStreak: true, boundReached: null });
  assert.deepEqual(streak.failed('ServiceUnavailable', 1, 0), { startsStreak: false, boundReached: null });
  assert.equal(streak.succeeded(), 2);
  assert.deepEqual(streak.state, { failures: 0, type: null, sameType: 0, sameTypeSinceMs: null });
});

test('404s in a row reach their bound; one 503 between them restarts the count', () => {
  const streak = new FailureStreak();
  for (let i = 1; i < bound; i++) assert.equal(streak.failed('JobNotFound', 1, 0).boundReached, null);
  streak.failed('ServiceUnavailable', 1, 0);
  for (let i = 1; i < bound; i++) assert.equal(streak.failed('JobNotFound', 1, 0).boundReached, null);
  assert.equal(streak.failed('JobNotFound', 1, 0).boundReached, `${bound} such answers in a row`);
});

test('for a job the API answered before, 404s and odd bodies are bounded by time, not by count', () => {
  const tolerance = 10 * 60_000;
  const streak = new FailureStreak();
  // A failover: 404s every few seconds for almost the tolerance, far more than the count bound.
  let now = 0;
  for (; now < tolerance; now += 3_000) {
    assert.equal(streak.failed('JobNotFound', 1, now, tolerance).boundReached, null, `at ${now} ms`);
  }
  assert.match(streak.failed('JobNotFound', 1, now, tolerance).boundReached ?? '', /past the blip tolerance/);
  // Another type restarts the clock, and a success clears it.
  streak.failed('UnexpectedResponse', 1, now, tolerance);
  assert.equal(streak.failed('UnexpectedResponse', 1, now + tolerance - 1, tolerance).boundReached, null);
  streak.succeeded();
  assert.equal(streak.failed('UnexpectedResponse', 1, now + tolerance + 1, tolerance).boundReached, null);
});

test('a failure at a later attempt counts every attempt and restarts the run of its type', () => {
  const streak = new FailureStreak();
  streak.failed('JobNotFound', 1, 0);
  const verdict = streak.failed('JobNotFound', 3, 0);
  assert.equal(streak.state.failures, 4);
  assert.equal(streak.state.sameType, 1);
  assert.equal(verdict.startsStreak, false);
  assert.equal(new FailureStreak().failed('JobNotFound', 3, 0).startsStreak, true);
});

test('without Retry-After the wait is the backoff of the streak', () => {
  const streak = new FailureStreak();
  streak.failed('ServiceUnavailable', 1, 0);
  assert.equal(streak.retryInMs(GET_BACKOFF, null, noJitter, Infinity), 1_000);
  streak.failed('ServiceUnavailable', 1, 0);
  streak.failed('ServiceUnavailable', 1, 0);
  assert.equal(streak.retryInMs(GET_BACKOFF, null, noJitter, Infinity), 4_000);
});

test('a 429 Retry-After raises the wait, never lowers it, and is capped', () => {
  const streak = new FailureStreak();
  streak.failed('RateLimited', 1, 0);
  assert.equal(streak.retryInMs(GET_BACKOFF, 0, noJitter, Infinity), 1_000, 'Retry-After: 0 keeps the floor');
  assert.equal(streak.retryInMs(GET_BACKOFF, 30_000, noJitter, Infinity), 30_000);
  assert.equal(streak.retryInMs(GET_BACKOFF, 86_400_000, noJitter, Infinity), MAX_RETRY_AFTER_MS);
  const jittered = streak.retryInMs(GET_BACKOFF, 30_000, () => 0.999, Infinity);
  assert.ok(jittered > 30_000 && jittered <= 30_000 * (1 + RETRY_JITTER));
});

test('no wait runs past the deadline', () => {
  const streak = new FailureStreak();
  streak.failed('ServiceUnavailable', 1, 0);
  assert.equal(streak.retryInMs(GET_BACKOFF, 600_000, noJitter, 2_500), 2_500);
});
