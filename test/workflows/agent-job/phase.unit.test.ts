import assert from 'node:assert/strict';
import { test } from 'node:test';
import { phaseOf, statusOf, type RunProgress } from '../../../src/workflows/agent-job/progress.js';

const RUNNING: RunProgress = {
  end: null,
  queued: false,
  waitingForKey: false,
  jobId: 'job_1',
  lastRecord: null,
  polls: 3,
  turns: 1,
  nextPollAt: null,
  lastError: null,
  resent: 0,
  queue: null,
};

test('the phase follows from the facts, an end first, then a wait in the queue', () => {
  assert.equal(phaseOf({ ...RUNNING, jobId: null }, false), 'creating');
  assert.equal(phaseOf({ ...RUNNING, jobId: null, queued: true }, false), 'queued');
  assert.equal(phaseOf(RUNNING, false), 'polling');
  assert.equal(phaseOf(RUNNING, true), 'sending-message');
  // A refused key shows as the wait for a working one, whether polling, sending or creating.
  assert.equal(phaseOf({ ...RUNNING, waitingForKey: true }, false), 'waiting-for-api-key');
  assert.equal(phaseOf({ ...RUNNING, waitingForKey: true }, true), 'waiting-for-api-key');
  assert.equal(phaseOf({ ...RUNNING, jobId: null, waitingForKey: true }, false), 'waiting-for-api-key');
  // A message waiting for the quota shows the wait, not the send.
  assert.equal(phaseOf({ ...RUNNING, queued: true }, true), 'queued');
  // An end stays the phase whatever was under way when it came.
  assert.equal(phaseOf({ ...RUNNING, end: 'timed-out', queued: true }, true), 'timed-out');
});

test('the status query answers the fields and the derived phase, none of the facts behind it', () => {
  const status = statusOf({ ...RUNNING, end: 'completed' }, false);
  assert.equal(status.phase, 'completed');
  assert.equal(status.polls, 3);
  assert.ok(!('end' in status) && !('queued' in status) && !('waitingForKey' in status));
});
