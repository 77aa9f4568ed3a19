/**
 * The payload codec end to end: a worker process and a starter process with
 * TEMPORAL_PAYLOAD_KEYS_FILE run a job whose prompt holds a secret marker to its prLink, and the
 * marker is nowhere in the workflow's history, nor in the worker's or the starter's output; a
 * client with the same ring reads the result and the summary. The same check finds the marker in
 * a history written without the codec, so it can fail.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Client, type WorkflowHandle } from '@temporalio/client';
import proto from '@temporalio/proto';
import { WORKFLOW_TYPE } from '../../src/contract.js';
import { payloadDataConverter, SEALED_ENCODING } from '../../src/payload-codec/index.js';
import {
  runStarter,
  starterProcessEnv,
  startSimulatedWorld,
  startWorkerProcess,
  uniqueId,
} from '../harness.js';

const root = mkdtempSync(join(tmpdir(), 'payload-codec-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));
const keysFile = join(root, 'payload-keys');
writeFileSync(keysFile, `e2e-1 ${randomBytes(32).toString('base64')}\n`);

const world = await startSimulatedWorld('codec', { durationMs: 200 });

/** A prompt whose first 80 characters (the static summary) hold the marker too. */
function secretPrompt(marker: string): string {
  return `Document the ${marker} module: it handles the billing export.`;
}

/**
 * Every byte of the history as the server stores it: the protobuf encoding holds every string and
 * bytes field raw, so a payload's data (base64 in the JSON form) is searched decoded.
 */
async function historyBytes(handle: WorkflowHandle): Promise<Buffer> {
  const history = await handle.fetchHistory();
  return Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
}

/** The encodings of every payload of the workflow's first event's input. */
async function inputEncodings(handle: WorkflowHandle): Promise<string[]> {
  const [first] = (await handle.fetchHistory()).events ?? [];
  const payloads = first?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  return payloads.map((p) => Buffer.from(p.metadata?.encoding ?? new Uint8Array()).toString('utf8'));
}

test('with the codec on, a job runs to its prLink and its secret marker is in no history event and no output line', async () => {
  const marker = `secret-${randomUUID()}`;
  const projectId = world.project({ outcome: 'pr' });
  const workerEnv = await world.workerEnv({ TEMPORAL_PAYLOAD_KEYS_FILE: keysFile });
  const worker = await startWorkerProcess(workerEnv);
  assert.match(worker.stdout() + worker.stderr(), /"payloadCodec":"aes-256-gcm"/);
  const key = uniqueId('codec-key');
  const run = await runStarter(
    [
      '--project',
      projectId,
      '--prompt',
      secretPrompt(marker),
      '--key',
      key,
      '--wait',
      '--json',
      '--poll-interval',
      '50ms',
    ],
    { ...starterProcessEnv(world.env, workerEnv.taskQueue), TEMPORAL_PAYLOAD_KEYS_FILE: keysFile },
  );
  assert.equal(run.code, 0, run.stderr);
  const out = JSON.parse(run.stdout) as { workflowId: string; prLink: string };
  assert.match(out.prLink, /^https:\/\/github\.com\//);

  const plain = world.env.client.workflow.getHandle(out.workflowId);
  const bytes = await historyBytes(plain);
  assert.ok(bytes.length > 1_000, 'a history was read');
  assert.equal(bytes.indexOf(marker), -1, 'the marker is in no history event');
  assert.deepEqual(await inputEncodings(plain), [SEALED_ENCODING]);
  for (const output of [worker.stdout(), worker.stderr(), run.stderr])
    assert.ok(!output.includes(marker), 'the marker is in no output line');

  // A client with the ring opens what the worker sealed: the result and the static summary.
  const sealed = new Client({
    connection: world.env.client.connection,
    namespace: world.env.namespace,
    dataConverter: payloadDataConverter(keysFile),
  });
  const handle = sealed.workflow.getHandle(out.workflowId);
  const result = (await handle.result()) as { prLink: string };
  assert.equal(result.prLink, out.prLink);
  assert.match((await (await handle.describe()).staticSummary()) ?? '', new RegExp(marker));
  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
});

test('with the codec off, the same check finds the marker in the history', async () => {
  const marker = `secret-${randomUUID()}`;
  const worker = await world.startWorker();
  const handle = await world.env.client.workflow.start(WORKFLOW_TYPE, {
    taskQueue: worker.taskQueue,
    workflowId: uniqueId('codec-off'),
    args: [{ projectId: world.project({ outcome: 'pr' }), prompt: secretPrompt(marker) }],
  });
  await handle.result();
  assert.notEqual((await historyBytes(handle)).indexOf(marker), -1, 'the marker is in the history');
  assert.deepEqual(await inputEncodings(handle), ['json/plain']);
});
