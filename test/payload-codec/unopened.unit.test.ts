/**
 * What a caller following a workflow reads from describe() and the history to tell that the
 * workers cannot open its payloads (src/payload-codec/unopened.ts), on fake handles: the pending
 * task's attempt, the last failed task's type, whether any task completed, the input's key ID.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { PayloadUnopenedError, unopenedPayload } from '../../src/payload-codec/index.js';

type Event = Record<string, unknown>;

function handle(attempt: number | undefined, events: Event[]): WorkflowHandle {
  return {
    workflowId: 'agent-job/docs/k',
    describe: () =>
      Promise.resolve({ raw: { pendingWorkflowTask: attempt === undefined ? null : { attempt } } }),
    fetchHistory: () => Promise.resolve({ events }),
  } as unknown as WorkflowHandle;
}

const started = (keyId: string): Event => ({
  workflowExecutionStartedEventAttributes: {
    input: { payloads: [{ metadata: { 'encryption-key-id': Buffer.from(keyId) } }] },
  },
});
const failed = (type: string): Event => ({
  workflowTaskFailedEventAttributes: {
    failure: { message: 'Encoded failure', applicationFailureInfo: { type } },
  },
});
const completed: Event = { workflowTaskCompletedEventAttributes: {} };

test('a first task failing on a payload that does not open is reported, naming the input key ID and the reason', async () => {
  const wrongKey = await unopenedPayload(handle(3, [started('k1'), failed('SealedPayloadError')]));
  assert.ok(wrongKey instanceof PayloadUnopenedError);
  assert.equal(wrongKey.failureType, 'SealedPayloadError');
  assert.match(wrongKey.message, /workflow agent-job\/docs\/k cannot run/);
  assert.match(wrongKey.message, /key of ID k1: sealed with another key of that ID/);
  const missing = await unopenedPayload(handle(2, [started('k9'), failed('UnknownPayloadKeyError')]));
  assert.match(missing?.message ?? '', /lacks the key k9, which sealed its input/);
  // A key ID that is not one is not named: it is the sender's text.
  const odd = await unopenedPayload(handle(2, [started('x'.repeat(500)), failed('UnknownPayloadKeyError')]));
  assert.ok(odd && !odd.message.includes('xxxx'));
});

test('nothing is reported for a first attempt, another failure, or a failure a later task got past', async () => {
  assert.equal(await unopenedPayload(handle(undefined, [started('k1')])), null);
  assert.equal(await unopenedPayload(handle(1, [started('k1'), failed('SealedPayloadError')])), null);
  assert.equal(await unopenedPayload(handle(4, [started('k1'), failed('DeterminismViolationError')])), null);
  assert.equal(
    await unopenedPayload(handle(2, [started('k1'), failed('SealedPayloadError'), completed])),
    null,
  );
  // Stuck later (a follow-up sealed elsewhere): reported, without naming the start's key.
  const later = await unopenedPayload(handle(2, [started('k1'), completed, failed('SealedPayloadError')]));
  assert.ok(later && !later.message.includes('k1'));
});
