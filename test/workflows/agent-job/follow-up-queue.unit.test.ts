import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FollowUpQueue } from '../../../src/workflows/agent-job/follow-up-queue.js';

test('follow-ups wait for the turn to end and go one at a time, in order', () => {
  const queue = new FollowUpQueue<string>();
  queue.add('a', 'after-turn');
  queue.add('b', 'after-turn');
  assert.equal(queue.next(false), null, 'the turn is still running');
  assert.equal(queue.next(true), 'a');
  assert.equal(queue.sending, true);
  assert.equal(queue.next(true), null, 'one message on its way at a time');
  queue.sent();
  assert.equal(queue.next(true), 'b');
  assert.equal(queue.queued, 0);
});

test('a message sent now goes ahead of the queue and does not wait for the turn', () => {
  const queue = new FollowUpQueue<string>();
  queue.add('later', 'after-turn');
  queue.add('now', 'now');
  assert.equal(queue.busy, true);
  assert.equal(queue.ready(false), true);
  assert.equal(queue.next(false), 'now');
  queue.sent();
  assert.equal(queue.busy, false);
  assert.equal(queue.ready(false), false);
  assert.equal(queue.next(true), 'later');
});

test('queued follow-ups the next run can take do not hold the run; a message on its way does', () => {
  const carriable = (item: string) => item !== 'start';
  const queue = new FollowUpQueue<string>();
  assert.equal(queue.holdsRun(carriable), false);
  queue.add('a', 'after-turn');
  queue.add('b', 'after-turn');
  assert.equal(queue.holdsRun(carriable), false, 'both wait for the turn: the next run takes them');
  assert.deepEqual(queue.waiting, ['a', 'b'], 'in the order they go');
  assert.equal(queue.next(true), 'a');
  assert.equal(queue.holdsRun(carriable), true, 'a message on its way: its answer comes to this run');
  queue.sent();
  assert.equal(queue.holdsRun(carriable), false);
  assert.deepEqual(queue.waiting, ['b']);
  queue.add('start', 'after-turn');
  assert.equal(queue.holdsRun(carriable), true, 'one the next run cannot take');
});

test('a sendMessage waiting holds the run', () => {
  const queue = new FollowUpQueue<string>();
  queue.add('now', 'now');
  assert.equal(
    queue.holdsRun(() => true),
    true,
  );
});
