import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentJobRecord } from '../../../src/contract.js';
import {
  NEW_TURN_GRACE_MS,
  Turn,
  UNKNOWN_STATUS_LIMIT_MS,
  type TurnState,
} from '../../../src/workflows/agent-job/turn.js';

function record(status: string, prLink: string | null = null): AgentJobRecord {
  return { id: 'job-1', status, prLink, createdAt: '2026-11-24T00:00:00Z' };
}

/** A fake workflow clock: each read 5 s after the one before. */
function clock() {
  let now = 1_000_000;
  return { now: () => now, tick: (ms = 5_000) => (now += ms) };
}

test('an active job keeps the turn going; a terminal one ends it', () => {
  const turn = new Turn();
  assert.deepEqual(turn.read(record('active'), false, 0), { kind: 'working' });
  assert.equal(turn.idle, false);
  assert.deepEqual(turn.read(record('completed', 'https://pr/1'), false, 5_000), {
    kind: 'ended',
    status: 'completed',
  });
  assert.equal(turn.idle, true);
});

test('while a message is on its way, no record ends the turn', () => {
  const turn = new Turn();
  assert.deepEqual(turn.read(record('completed'), true, 0), { kind: 'working' });
  assert.equal(turn.idle, false);
});

test("after a follow-up, the previous turn's record is stale until it has held for the grace", () => {
  const turn = new Turn();
  const t = clock();
  turn.read(record('completed', 'https://pr/1'), false, t.now());
  turn.messageAnswered(record('completed', 'https://pr/1'), record('completed', 'https://pr/1'));
  assert.equal(turn.number, 2);
  assert.equal(turn.idle, false);
  const first = t.tick();
  while (t.now() - first < NEW_TURN_GRACE_MS) {
    assert.deepEqual(turn.read(record('completed', 'https://pr/1'), false, t.now()), { kind: 'stale' });
    t.tick();
  }
  assert.deepEqual(turn.read(record('completed', 'https://pr/1'), false, t.now()), {
    kind: 'ended',
    status: 'completed',
  });
  assert.equal(turn.state.ended, 2);
});

test("a message answered active: a read of the previous turn's end right after is stale, not the end", () => {
  const turn = new Turn();
  const t = clock();
  turn.read(record('completed', 'https://pr/1'), false, t.now());
  const before = record('completed', 'https://pr/1');
  turn.messageAnswered(record('active'), before);
  assert.deepEqual(turn.read(record('active'), false, t.tick()), { kind: 'working' });
  // A lagging replica still answers the previous turn's end, even after an active read.
  assert.deepEqual(turn.read(before, false, t.tick()), { kind: 'stale' });
  assert.deepEqual(turn.read(record('completed', 'https://pr/2'), false, t.tick()), {
    kind: 'ended',
    status: 'completed',
  });
});

test('after a follow-up, a different terminal record ends the new turn at once', () => {
  const turn = new Turn();
  turn.messageAnswered(record('completed', 'https://pr/1'), null);
  assert.deepEqual(turn.read(record('completed', 'https://pr/2'), false, 0), {
    kind: 'ended',
    status: 'completed',
  });
});

test('an active read between stale reads makes the previous end hold afresh', () => {
  const turn = new Turn();
  const t = clock();
  const before = record('completed', 'https://pr/1');
  turn.messageAnswered(record('active'), before);
  assert.deepEqual(turn.read(before, false, t.tick(NEW_TURN_GRACE_MS - 1_000)), { kind: 'stale' });
  turn.read(record('active'), false, t.tick());
  assert.deepEqual(turn.read(before, false, t.tick()), { kind: 'stale' });
  assert.deepEqual(turn.read(before, false, t.tick(NEW_TURN_GRACE_MS)), {
    kind: 'ended',
    status: 'completed',
  });
});

test('a message answered active after an active turn starts no grace', () => {
  const turn = new Turn();
  turn.messageAnswered(record('active'), record('active'));
  assert.equal(turn.state.recordBeforeMessage, null);
  assert.deepEqual(turn.read(record('failed'), false, 0), { kind: 'ended', status: 'failed' });
});

test('undocumented statuses give up once they went on for the limit, however fast the polls; a documented one resets', () => {
  const turn = new Turn();
  const t = clock();
  for (let i = 1; i <= 100; i++) {
    assert.deepEqual(turn.read(record('paused'), false, t.tick(1_000)), {
      kind: 'unknown-status',
      inARow: i,
      giveUp: false,
    });
  }
  turn.read(record('active'), false, t.tick());
  assert.equal(turn.state.unknownStatusPolls, 0);
  const start = t.tick();
  assert.equal(turn.read(record('paused'), false, start).kind, 'unknown-status');
  let last = turn.read(record('paused'), false, start + UNKNOWN_STATUS_LIMIT_MS - 1);
  assert.deepEqual(last, { kind: 'unknown-status', inARow: 2, giveUp: false });
  last = turn.read(record('paused'), false, start + UNKNOWN_STATUS_LIMIT_MS);
  assert.deepEqual(last, { kind: 'unknown-status', inARow: 3, giveUp: true });
});

test('the state survives a JSON round trip (continue-as-new)', () => {
  const turn = new Turn();
  turn.messageAnswered(record('completed'), null);
  turn.read(record('completed'), false, 0);
  const carried = new Turn(JSON.parse(JSON.stringify(turn.state)) as TurnState);
  assert.deepEqual(carried.state, turn.state);
  assert.equal(carried.number, 2);
});
