import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FollowUps, type FollowUp } from '../../../src/workflows/agent-job/follow-ups.js';

/** A queued follow-up named `name` (its prompt), from update `updateId`. */
function item(name: string, updateId: string | null = `u-${name}`): FollowUp {
  return { prompt: name, key: `k-${name}`, updateId, answered: () => undefined, failed: () => undefined };
}

const prompt = (followUp: FollowUp | null) => followUp?.prompt ?? null;

test('follow-ups wait for the turn to end and go one at a time, in order', () => {
  const followUps = new FollowUps();
  followUps.add(item('a'), 'after-turn');
  followUps.add(item('b'), 'after-turn');
  assert.equal(followUps.next(false), null, 'the turn is still running');
  assert.equal(prompt(followUps.next(true)), 'a');
  assert.equal(followUps.sending, true);
  assert.equal(followUps.next(true), null, 'one message on its way at a time');
  followUps.sent();
  assert.equal(prompt(followUps.next(true)), 'b');
  assert.equal(followUps.queued, 0);
});

test('a message sent now goes ahead of the queue and does not wait for the turn', () => {
  const followUps = new FollowUps();
  followUps.add(item('later'), 'after-turn');
  void followUps.send('now', 'k-now', 'now');
  assert.equal(followUps.busy, true);
  assert.equal(followUps.ready(false), true);
  assert.equal(prompt(followUps.next(false)), 'now');
  followUps.sent();
  assert.equal(followUps.busy, false);
  assert.equal(followUps.ready(false), false);
  assert.equal(prompt(followUps.next(true)), 'later');
});

test('queued follow-ups the next run can take do not hold the run; a message on its way does', () => {
  const followUps = new FollowUps();
  assert.equal(followUps.holdsRun, false);
  for (const updateId of ['a', 'b']) {
    followUps.track({
      updateId,
      prompt: updateId,
      key: `k-${updateId}`,
      turn: null,
      ended: null,
      failed: null,
    });
  }
  assert.equal(followUps.holdsRun, false, 'both wait for the turn: the next run takes them');
  assert.deepEqual(
    followUps.carried().map((f) => [f.updateId, f.prompt]),
    [
      ['a', 'a'],
      ['b', 'b'],
    ],
    'in the order they go, with their prompts',
  );
  assert.equal(prompt(followUps.next(true)), 'a');
  assert.equal(followUps.holdsRun, true, 'a message on its way: its answer comes to this run');
  followUps.sent();
  assert.equal(followUps.holdsRun, false);
  assert.deepEqual(
    followUps.carried().map((f) => [f.updateId, f.prompt]),
    [
      ['a', ''],
      ['b', 'b'],
    ],
    'the one sent first, without its prompt (it went out already)',
  );
  followUps.add(item('start', null), 'after-turn');
  assert.equal(followUps.holdsRun, true, 'one the next run cannot take');
});

test('a sendMessage waiting holds the run', () => {
  const followUps = new FollowUps();
  void followUps.send('now', 'k', 'now');
  assert.equal(followUps.holdsRun, true);
});

test('a sent follow-up keeps the record its turn ended with; one answered is not carried', () => {
  const followUps = new FollowUps();
  const record = { id: 'job', status: 'completed', prLink: null } as never;
  followUps.track({ updateId: 'a', prompt: 'a', key: 'k', turn: 2, ended: null, failed: null });
  followUps.track({ updateId: 'b', prompt: 'b', key: 'k', turn: 3, ended: null, failed: null });
  assert.equal(followUps.queued, 0, 'sent already: not queued again');
  followUps.turnEnded(2, record);
  assert.equal(followUps.get('a')?.ended, record);
  assert.equal(followUps.get('b')?.ended, null, 'its turn has not ended');
  followUps.answered('a');
  assert.deepEqual(
    followUps.carried().map((f) => f.updateId),
    ['b'],
  );
});
