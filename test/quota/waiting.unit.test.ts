import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AskSchedule, placeOf, QUOTA_REASK_MS, useNameOf } from '../../src/quota/waiting.js';
import { RETRY_JITTER } from '../../src/agent-api/failure-policy.js';

const T0 = Date.parse('2026-11-25T12:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

test('without a word, a request asks again after QUOTA_REASK_MS; asking starts both clocks over', () => {
  const schedule = new AskSchedule(T0, undefined);
  assert.equal(schedule.dueToAsk(T0 + QUOTA_REASK_MS - 1), false);
  assert.equal(schedule.dueToAsk(T0 + QUOTA_REASK_MS), true);
  assert.equal(schedule.wakeInMs(T0, Infinity), QUOTA_REASK_MS);
  schedule.asked(T0 + QUOTA_REASK_MS);
  assert.equal(schedule.dueToAsk(T0 + QUOTA_REASK_MS + 1), false);
  assert.equal(schedule.wakeInMs(T0 + QUOTA_REASK_MS, Infinity), QUOTA_REASK_MS);
});

test('the check that the quota workflow runs comes once a lease, never when an ask is due anyway', () => {
  const schedule = new AskSchedule(T0, 10_000);
  // A place heard: the next ask is far off (its estimated start an hour away, plus QUOTA_REASK_MS).
  schedule.placeHeard({ position: 3, queueLength: 3, earliestStartAt: iso(T0 + 3_600_000), asOf: iso(T0) });
  assert.equal(schedule.wakeInMs(T0, Infinity), 10_000, 'woken for the check, not at the ask');
  assert.equal(schedule.dueToCheck(T0 + 9_999), false);
  assert.equal(schedule.dueToCheck(T0 + 10_000), true);
  assert.equal(schedule.dueToCheck(T0 + 10_001), false, 'the next check is a lease away');
  assert.equal(schedule.dueToCheck(T0 + 20_000), true);
  // The quota workflow is gone, or a new run never heard of the request: ask now, not an hour
  // later; no check while the ask is due.
  schedule.notHeld(T0 + 20_000);
  assert.equal(schedule.dueToAsk(T0 + 20_000), true);
  assert.equal(schedule.dueToCheck(T0 + 30_000), false);
});

test('a lease longer than QUOTA_REASK_MS checks every QUOTA_REASK_MS; the deadline can wake sooner', () => {
  const schedule = new AskSchedule(T0, 10 * QUOTA_REASK_MS);
  schedule.placeHeard({ position: 1, queueLength: 1, earliestStartAt: iso(T0 + 3_600_000), asOf: iso(T0) });
  assert.equal(schedule.wakeInMs(T0, Infinity), QUOTA_REASK_MS);
  assert.equal(schedule.wakeInMs(T0, T0 + 5_000), 5_000);
  assert.equal(schedule.wakeInMs(T0, T0), 1, 'never a zero wait');
});

test('a place never brings the next ask forward', () => {
  const schedule = new AskSchedule(T0, undefined);
  schedule.placeHeard({
    position: 1,
    queueLength: 1,
    earliestStartAt: iso(T0 - 600_000),
    asOf: iso(T0 - 600_000),
  });
  assert.equal(schedule.dueToAsk(T0 + QUOTA_REASK_MS - 1), false);
  schedule.placeHeard(undefined);
  assert.equal(schedule.dueToAsk(T0 + QUOTA_REASK_MS), true);
});

test('a full queue: ask again at the time it names, jittered up to RETRY_JITTER, at least 1 s away', () => {
  const declined = {
    requestId: 'wf/create-1-1',
    reason: 'queue-full' as const,
    queueLength: 1000,
    retryAt: iso(T0 + 30_000),
  };
  assert.equal(
    new AskSchedule(T0, undefined).declined(declined, T0, () => 0),
    T0 + 30_000,
  );
  const late = new AskSchedule(T0, undefined).declined(declined, T0, () => 0.999);
  assert.ok(late > T0 + 30_000 && late <= T0 + 30_000 * (1 + RETRY_JITTER), `${late - T0} ms`);
  const past = { ...declined, retryAt: iso(T0 - 5_000) };
  const schedule = new AskSchedule(T0, undefined);
  assert.equal(
    schedule.declined(past, T0, () => 0),
    T0 + 1_000,
  );
  assert.equal(schedule.dueToAsk(T0 + 1_000), true);
});

test('no check while a full queue keeps the request out: no run holds it, and its ask comes at the time named', () => {
  const schedule = new AskSchedule(T0, 10_000);
  const declined = { requestId: 'wf/create-1-1', reason: 'queue-full' as const, queueLength: 1000 };
  schedule.declined({ ...declined, retryAt: iso(T0 + 60_000) }, T0, () => 0);
  assert.equal(
    schedule.dueToCheck(T0 + 10_000),
    false,
    'a check would be answered not-queued, and undo the wait',
  );
  assert.equal(schedule.dueToCheck(T0 + 50_000), false);
  assert.equal(schedule.dueToAsk(T0 + 60_000), true);
  schedule.asked(T0 + 60_000);
  assert.equal(schedule.dueToCheck(T0 + 70_000), true, 'queued again: checked again');
});

test('signals are read defensively: a use name after the last slash, a place only when whole', () => {
  assert.equal(useNameOf({ requestId: 'agent-job/p/k/create-0-1.2' }), 'create-0-1.2');
  assert.equal(useNameOf({ requestId: 42 }), null);
  assert.equal(useNameOf(null), null);
  const place = { position: 2, queueLength: 5, earliestStartAt: iso(T0), asOf: iso(T0) };
  assert.deepEqual(placeOf({ ...place, extra: true }), place);
  assert.equal(placeOf({ ...place, position: '2' }), null);
  assert.equal(placeOf(undefined), null);
});
