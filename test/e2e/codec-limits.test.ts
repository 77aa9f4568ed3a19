/**
 * The limits the project guards still hold with the payload codec on (issue 46 item 5, decision
 * 0021), over the real server: a worker process with the ring runs a job whose prompt is at
 * MAX_PROMPT_LENGTH in 3-byte characters (the most bytes a prompt can be), whose records sit at the
 * record budget (RECORD_BUDGET_BYTES), with ten follow-ups at the same maximum queued, so that its
 * continue-as-new carries them close to MAX_CARRIED_BYTES (1 MiB, half of the server's 2 MB
 * payload limit). Every run continues as new after one poll. Sealed, each payload is about 91
 * bytes larger: the job still ends with its prLink after its eleven turns.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Client, WorkflowUpdateStage } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import { RECORD_BUDGET_BYTES } from '../../src/agent-api/index.js';
import { followUpUpdate, MAX_PROMPT_LENGTH, WORKFLOW_TYPE, type AgentJobResult } from '../../src/contract.js';
import { payloadDataConverter, SEALED_ENCODING } from '../../src/payload-codec/index.js';
import { FAST_POLL, startSimulatedWorld, startWorkerProcess, uniqueId } from '../harness.js';
import { SecretVolume } from '../secret-volume.js';

const root = mkdtempSync(join(tmpdir(), 'codec-limits-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));
const secret = new SecretVolume(root, `e2e-1 ${randomBytes(32).toString('base64')}\n`);

const FOLLOW_UPS = 10;
/** The longest prompt, in characters of 3 UTF-8 bytes: 96,000 bytes. */
const maxPrompt = (tag: string) => `${tag} ${'€'.repeat(MAX_PROMPT_LENGTH - tag.length - 1)}`;

const world = await startSimulatedWorld('limits', { durationMs: 2_000 });
const workerEnv = await world.workerEnv({ TEMPORAL_PAYLOAD_KEYS_FILE: secret.path });
const worker = await startWorkerProcess(workerEnv);
after(async () => {
  worker.child.kill('SIGTERM');
  await worker.exited;
});
const dataConverter = payloadDataConverter(secret.path);
const client = new Client({
  connection: world.env.client.connection,
  namespace: world.env.namespace,
  dataConverter,
});

const size = (payloads: Payload[]) => payloads.reduce((sum, p) => sum + (p.data?.length ?? 0), 0);
const encodingOf = (p: Payload) => Buffer.from(p.metadata?.encoding ?? new Uint8Array()).toString('utf8');

test('a prompt at the maximum, records at the budget and follow-ups carried up to the guard run sealed to their prLink', async (t) => {
  // Every answer (create, reads, messages) carries an unknown field that brings the record just
  // under its budget: kept whole, not trimmed.
  const padding = 'p'.repeat(RECORD_BUDGET_BYTES - 600);
  const projectId = world.project({
    outcome: 'pr',
    faults: { rules: [{ endpoint: 'any', kind: 'altered', set: { padding } }] },
  });
  const handle = await client.workflow.start(WORKFLOW_TYPE, {
    taskQueue: workerEnv.taskQueue,
    workflowId: uniqueId('codec-limits'),
    args: [{ projectId, prompt: maxPrompt('start'), poll: FAST_POLL, continueAsNewAfterPolls: 1 }],
  });
  // Queued during the first turn: the first continue-as-new carries all of them.
  await Promise.all(
    Array.from({ length: FOLLOW_UPS }, (_, i) =>
      handle.startUpdate(followUpUpdate, {
        args: [maxPrompt(`follow-up ${i}`)],
        updateId: `follow-up-${i}`,
        waitForStage: WorkflowUpdateStage.ACCEPTED,
      }),
    ),
  );
  const result = (await client.workflow.getHandle(handle.workflowId).result()) as AgentJobResult;
  assert.match(result.prLink ?? '', /^https:\/\/github\.com\//);
  assert.equal(result.turns, FOLLOW_UPS + 1);
  assert.equal((result.job as { padding?: string }).padding, padding, 'the record kept whole');

  const history = await world.env.client.workflow
    .getHandle(handle.workflowId, handle.firstExecutionRunId)
    .fetchHistory();
  const events = history.events ?? [];
  const input = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  assert.deepEqual(input.map(encodingOf), [SEALED_ENCODING]);
  assert.ok(size(input) > 96_000, `the start input is sealed whole: ${size(input)} bytes`);
  const carried = events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.input?.payloads ?? [];
  assert.deepEqual(carried.map(encodingOf), [SEALED_ENCODING, SEALED_ENCODING]);
  // What the first run carried, opened: the ten follow-ups, their prompts whole.
  const [, continuation] = (await dataConverter!.payloadCodecs![0]!.decode(carried)).map((p) =>
    defaultPayloadConverter.fromPayload<{ followUps?: Array<{ prompt: string }> }>(p),
  );
  const queued = (continuation?.followUps ?? []).filter((f) => f.prompt.length === MAX_PROMPT_LENGTH);
  assert.ok(queued.length >= 8, `the first run carried ${queued.length} follow-ups at the maximum`);
  assert.ok(size(carried) > queued.length * 96_000, `continue-as-new carried ${size(carried)} bytes sealed`);
  t.diagnostic(
    `sealed: start input ${size(input)} B, first continue-as-new ${size(carried)} B carrying ${queued.length} follow-ups`,
  );
});
