import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentJobRecord } from '../../../src/contract.js';
import {
  NEW_TURN_GRACE_POLLS,
  Turn,
  UNKNOWN_STATUS_POLL_LIMIT,
  type TurnState,
} from '../../../src/workflows/agent-job/turn.js';

function record(status: string, prLink: string | null = null): AgentJobRecord {
  return { id: 'job-1', status, prLink, createdAt: '2026-11-24T00:00:00Z' };
}

test('an active job keeps the turn going; a terminal one ends it', () => {
  const turn = new Turn();
  assert.deepEqual(turn.read(record('active'), false), { kind: 'working' });
  assert.equal(turn.idle, false);
  assert.deepEqual(turn.read(record('completed', 'https://pr/1'), false), {
    kind: 'ended',
    status: 'completed',
  });
  assert.equal(turn.idle, true);
});

test('while a message is on its way, no record ends the turn', () => {
  const turn = new Turn();
  assert.deepEqual(turn.read(record('completed'), true), { kind: 'working' });
  assert.equal(turn.idle, false);
});

test("after a follow-up, the previous turn's record is stale until the grace runs out", () => {
  const turn = new Turn();
  turn.read(record('completed', 'https://pr/1'), false);
  turn.messageAnswered(record('completed', 'https://pr/1'));
  assert.equal(turn.number, 2);
  assert.equal(turn.idle, false);
  for (let i = 1; i < NEW_TURN_GRACE_POLLS; i++) {
    assert.deepEqual(turn.read(record('completed', 'https://pr/1'), false), { kind: 'stale' }, `read ${i}`);
  }
  assert.deepEqual(turn.read(record('completed', 'https://pr/1'), false), {
    kind: 'ended',
    status: 'completed',
  });
  assert.equal(turn.state.ended, 2);
});

test('after a follow-up, a different terminal record ends the new turn at once', () => {
  const turn = new Turn();
  turn.messageAnswered(record('completed', 'https://pr/1'));
  assert.deepEqual(turn.read(record('completed', 'https://pr/2'), false), {
    kind: 'ended',
    status: 'completed',
  });
});

test('after a follow-up, an active read means the new turn started: its next terminal read ends it', () => {
  const turn = new Turn();
  turn.messageAnswered(record('completed', 'https://pr/1'));
  assert.deepEqual(turn.read(record('active'), false), { kind: 'working' });
  assert.deepEqual(turn.read(record('completed', 'https://pr/1'), false), {
    kind: 'ended',
    status: 'completed',
  });
});

test('a message answered with an active record starts no grace', () => {
  const turn = new Turn();
  turn.messageAnswered(record('active'));
  assert.equal(turn.state.recordBeforeMessage, null);
  assert.deepEqual(turn.read(record('failed'), false), { kind: 'ended', status: 'failed' });
});

test('undocumented statuses in a row give up at the limit; a documented one resets the count', () => {
  const turn = new Turn();
  for (let i = 1; i < UNKNOWN_STATUS_POLL_LIMIT; i++) {
    assert.deepEqual(turn.read(record('paused'), false), {
      kind: 'unknown-status',
      inARow: i,
      giveUp: false,
    });
  }
  turn.read(record('active'), false);
  assert.equal(turn.state.unknownStatusPolls, 0);
  let last;
  for (let i = 1; i <= UNKNOWN_STATUS_POLL_LIMIT; i++) last = turn.read(record('paused'), false);
  assert.deepEqual(last, { kind: 'unknown-status', inARow: UNKNOWN_STATUS_POLL_LIMIT, giveUp: true });
});

test('the state survives a JSON round trip (continue-as-new)', () => {
  const turn = new Turn();
  turn.messageAnswered(record('completed'));
  turn.read(record('completed'), false);
  const carried = new Turn(JSON.parse(JSON.stringify(turn.state)) as TurnState);
  assert.deepEqual(carried.state, turn.state);
  assert.equal(carried.number, 2);
});
