import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FollowUpQueue } from '../../../src/workflows/agent-job/follow-ups.js';

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
  assert.equal(queue.open, 2, 'open until their turns end');
  queue.close();
  queue.close();
  assert.equal(queue.open, 0);
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

test('close never counts below zero', () => {
  const queue = new FollowUpQueue<string>();
  queue.close();
  assert.equal(queue.open, 0);
});
