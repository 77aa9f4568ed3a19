import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GET_BACKOFF, MAX_RETRY_AFTER_MS, RETRY_JITTER } from '../../src/failure-policy/backoff.js';
import { ANSWERS_IN_A_ROW, FailureStreak, type CountedFailure } from '../../src/failure-policy/streak.js';
import type { StreakBound } from '../../src/failure-policy/table.js';

const noJitter = () => 0;
const bound = ANSWERS_IN_A_ROW;
/** A job never answered yet: 404s and odd bodies are bounded by a count. */
const unseen = { blipMs: null, credentialMs: 60 * 60_000 };

function failure(type: string, kind: StreakBound = 'deadline', extra: Partial<CountedFailure> = {}) {
  return { type, bound: kind, operation: 'getJob', ...extra } as const satisfies CountedFailure;
}
const unavailable = failure('ServiceUnavailable');
const notFound = failure('JobNotFound', 'blip');

test('the first failure starts a streak; a success ends it and says how long it was', () => {
  const streak = new FailureStreak();
  assert.deepEqual(streak.failed(unavailable, 1, 0, unseen), { startsStreak: true, boundReached: null });
  assert.deepEqual(streak.failed(unavailable, 1, 0, unseen), { startsStreak: false, boundReached: null });
  assert.equal(streak.succeeded(), 2);
  assert.deepEqual(streak.state, { failures: 0, type: null, sameType: 0, sameTypeSinceMs: null });
});

test('404s in a row reach their bound; one 503 between them restarts the count', () => {
  const streak = new FailureStreak();
  for (let i = 1; i < bound; i++) assert.equal(streak.failed(notFound, 1, 0, unseen).boundReached, null);
  streak.failed(unavailable, 1, 0, unseen);
  for (let i = 1; i < bound; i++) assert.equal(streak.failed(notFound, 1, 0, unseen).boundReached, null);
  assert.equal(streak.failed(notFound, 1, 0, unseen).boundReached, `${bound} such answers in a row`);
});

test('for a job the API answered before, 404s and odd bodies are bounded by time, not by count', () => {
  const tolerances = { blipMs: 10 * 60_000, credentialMs: 60 * 60_000 };
  const odd = failure('UnexpectedResponse', 'blip');
  const streak = new FailureStreak();
  // A failover: 404s every few seconds for almost the tolerance, far more than the count bound.
  let now = 0;
  for (; now < tolerances.blipMs; now += 3_000) {
    assert.equal(streak.failed(notFound, 1, now, tolerances).boundReached, null, `at ${now} ms`);
  }
  assert.match(streak.failed(notFound, 1, now, tolerances).boundReached ?? '', /past the blip tolerance/);
  // Another type restarts the clock, and a success clears it.
  streak.failed(odd, 1, now, tolerances);
  assert.equal(streak.failed(odd, 1, now + tolerances.blipMs - 1, tolerances).boundReached, null);
  streak.succeeded();
  assert.equal(streak.failed(odd, 1, now + tolerances.blipMs + 1, tolerances).boundReached, null);
});

test('an answer that will not change is bounded by a count even for a job answered before', () => {
  const tolerances = { blipMs: 30 * 60_000, credentialMs: 60 * 60_000 };
  const invalid = failure('UnexpectedResponse', 'in-a-row');
  const streak = new FailureStreak();
  for (let i = 1; i < bound; i++) assert.equal(streak.failed(invalid, 1, i, tolerances).boundReached, null);
  assert.equal(streak.failed(invalid, 1, bound, tolerances).boundReached, `${bound} such answers in a row`);
});

test('a refused key: polls wait for the credential tolerance, whatever the count', () => {
  const tolerances = { blipMs: null, credentialMs: 2 * 60_000 };
  const refused = failure('Unauthorized', 'credentials');
  const streak = new FailureStreak();
  let now = 0;
  for (; now < tolerances.credentialMs; now += 1_000) {
    assert.equal(streak.failed(refused, 1, now, tolerances).boundReached, null, `at ${now} ms`);
  }
  assert.match(
    streak.failed(refused, 1, now, tolerances).boundReached ?? '',
    /past the credential tolerance of 120s/,
  );
});

test('a refused key on a create waits only when the key answered for the project lately', () => {
  const tolerances = { blipMs: null, credentialMs: 60_000 };
  const create = (keyAnsweredAgoMs: number | null) =>
    new FailureStreak().failed(
      failure('Unauthorized', 'credentials', { operation: 'createJob', keyAnsweredAgoMs }),
      1,
      0,
      tolerances,
    ).boundReached;
  assert.match(create(null) ?? '', /no agent job was created/);
  assert.match(create(60_001) ?? '', /no agent job was created/);
  assert.equal(create(5_000), null);
});

test('a failure at a later attempt counts every attempt and restarts the run of its type', () => {
  const streak = new FailureStreak();
  streak.failed(notFound, 1, 0, unseen);
  const verdict = streak.failed(notFound, 3, 0, unseen);
  assert.equal(streak.state.failures, 4);
  assert.equal(streak.state.sameType, 1);
  assert.equal(verdict.startsStreak, false);
  assert.equal(new FailureStreak().failed(notFound, 3, 0, unseen).startsStreak, true);
});

test('without Retry-After the wait is the backoff of the streak', () => {
  const streak = new FailureStreak();
  streak.failed(unavailable, 1, 0, unseen);
  assert.equal(streak.retryInMs(GET_BACKOFF, null, noJitter, Infinity), 1_000);
  streak.failed(unavailable, 1, 0, unseen);
  assert.equal(streak.retryInMs(GET_BACKOFF, null, noJitter, Infinity), 2_000);
  streak.failed(unavailable, 1, 0, unseen);
  assert.equal(streak.retryInMs(GET_BACKOFF, null, noJitter, Infinity), 4_000);
});

test('a 429 Retry-After raises the wait, never lowers it, and is capped', () => {
  const streak = new FailureStreak();
  streak.failed(failure('RateLimited'), 1, 0, unseen);
  assert.equal(streak.retryInMs(GET_BACKOFF, 0, noJitter, Infinity), 1_000, 'Retry-After: 0 keeps the floor');
  assert.equal(streak.retryInMs(GET_BACKOFF, 30_000, noJitter, Infinity), 30_000);
  assert.equal(streak.retryInMs(GET_BACKOFF, 86_400_000, noJitter, Infinity), MAX_RETRY_AFTER_MS);
  const jittered = streak.retryInMs(GET_BACKOFF, 30_000, () => 0.999, Infinity);
  assert.ok(jittered > 30_000 && jittered <= 30_000 * (1 + RETRY_JITTER));
});

test('no wait runs past the deadline', () => {
  const streak = new FailureStreak();
  streak.failed(unavailable, 1, 0, unseen);
  assert.equal(streak.retryInMs(GET_BACKOFF, 600_000, noJitter, 2_500), 2_500);
});
