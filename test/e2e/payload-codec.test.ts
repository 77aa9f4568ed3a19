/**
 * The payload codec end to end: a worker process and starter processes with
 * TEMPORAL_PAYLOAD_KEYS_FILE (a Kubernetes-style Secret volume) run jobs whose prompts hold a secret
 * marker to their prLink, and the marker is nowhere in the workflows' histories, nor in the
 * worker's or the starters' output; a client with the same ring reads the results and the
 * summaries. Key 2 made current in the Secret while the worker runs seals the next job, and the
 * first job's payloads, sealed with key 1, still open: no restart. The same history check finds
 * the marker in a history written without the codec, so it can fail.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { after, test } from 'node:test';
import { promisify } from 'node:util';
import { Client, type WorkflowHandle } from '@temporalio/client';
import { resolveTemporalCli } from '../../dev/temporal-cli.js';
import { WORKFLOW_TYPE } from '../../src/contract.js';
import { KEY_ID_METADATA_KEY, payloadDataConverter, SEALED_ENCODING } from '../../src/payload-codec/index.js';
import {
  runStarter,
  spawnTs,
  starterProcessEnv,
  startSimulatedWorld,
  startWorkerProcess,
  uniqueId,
  waitFor,
} from '../harness.js';
import { historyBytes } from '../history-bytes.js';
import { SecretVolume } from '../secret-volume.js';

const root = mkdtempSync(join(tmpdir(), 'payload-codec-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));
const [KEY_1, KEY_2] = [randomBytes(32).toString('base64'), randomBytes(32).toString('base64')];
const secret = new SecretVolume(root, `e2e-1 ${KEY_1}\n`);

const world = await startSimulatedWorld('codec', { durationMs: 200 });
const workerEnv = await world.workerEnv({ TEMPORAL_PAYLOAD_KEYS_FILE: secret.path });
const starterEnv = {
  ...starterProcessEnv(world.env, workerEnv.taskQueue),
  TEMPORAL_PAYLOAD_KEYS_FILE: secret.path,
};
/** The worker process, started by the first test and used by the second. */
let worker: Awaited<ReturnType<typeof startWorkerProcess>> | undefined;
/** The first test's job, which the CLI test reads through the codec server. */
let firstJob: { workflowId: string; marker: string } | undefined;

/** A prompt whose first 80 characters (the static summary) hold the marker too. */
function secretPrompt(marker: string): string {
  return `Document the ${marker} module: it handles the billing export.`;
}

/** The encoding and key ID of each payload of the workflow's input. */
async function inputSeals(handle: WorkflowHandle): Promise<string[]> {
  const [first] = (await handle.fetchHistory()).events ?? [];
  const payloads = first?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  const text = (bytes: Uint8Array | null | undefined) =>
    Buffer.from(bytes ?? new Uint8Array()).toString('utf8');
  return payloads.map((p) =>
    `${text(p.metadata?.encoding)} ${text(p.metadata?.[KEY_ID_METADATA_KEY])}`.trim(),
  );
}

/** Starts a job with the starter process and waits for its prLink; the marker is in no output. */
async function runSecretJob(marker: string): Promise<{ workflowId: string; prLink: string }> {
  const args = ['--project', world.project({ outcome: 'pr' }), '--prompt', secretPrompt(marker)];
  const run = await runStarter([...args, '--wait', '--json', '--poll-interval', '50ms'], starterEnv);
  assert.equal(run.code, 0, run.stderr);
  assert.ok(
    !run.stdout.includes(marker) && !run.stderr.includes(marker),
    'the marker is in no starter output',
  );
  const out = JSON.parse(run.stdout) as { workflowId: string; prLink: string };
  assert.match(out.prLink, /^https:\/\/github\.com\//);
  return out;
}

/** A client with the ring in the Secret now. */
function sealingClient(): Client {
  return new Client({
    connection: world.env.client.connection,
    namespace: world.env.namespace,
    dataConverter: payloadDataConverter(secret.path),
  });
}

/** The job's history holds no marker, and a client with the ring reads its result and summary. */
async function assertSealed(job: { workflowId: string; prLink: string }, marker: string, keyId: string) {
  const plain = world.env.client.workflow.getHandle(job.workflowId);
  const bytes = await historyBytes(plain);
  assert.ok(bytes.length > 1_000, 'a history was read');
  assert.equal(bytes.indexOf(marker), -1, 'the marker is in no history event');
  assert.deepEqual(await inputSeals(plain), [`${SEALED_ENCODING} ${keyId}`]);
  const handle = sealingClient().workflow.getHandle(job.workflowId);
  assert.equal(((await handle.result()) as { prLink: string }).prLink, job.prLink);
  assert.match((await (await handle.describe()).staticSummary()) ?? '', new RegExp(marker));
}

test('with the codec on, a job runs to its prLink and its secret marker is in no history event and no output line', async () => {
  const marker = `secret-${randomUUID()}`;
  worker = await startWorkerProcess(workerEnv);
  assert.match(worker.stdout(), /"payloadCodec":"aes-256-gcm"/);
  const job = await runSecretJob(marker);
  firstJob = { workflowId: job.workflowId, marker };
  await assertSealed(job, marker, 'e2e-1');
  assert.ok(!worker.stdout().includes(marker) && !worker.stderr().includes(marker), 'no worker output line');
});

/** Every string of a JSON document, and what each one reads as base64 (the CLI's form of bytes). */
function jsonTexts(value: unknown): string[] {
  if (typeof value === 'string') return [value, Buffer.from(value, 'base64').toString('utf8')];
  if (Array.isArray(value)) return value.flatMap(jsonTexts);
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(jsonTexts);
  return [];
}

test('`temporal workflow show --codec-endpoint` through the codec server shows the marker decoded, and without it sealed; `workflow execute` with it seals the input', async () => {
  assert.ok(firstJob, 'the first test ran a sealed job');
  const codecServer = spawnTs('src/codec-server.ts', [], {
    ...process.env,
    TEMPORAL_PAYLOAD_KEYS_FILE: secret.path,
    CODEC_SERVER_ADDRESS: '127.0.0.1:0',
    CODEC_SERVER_LOCAL_TOKEN: 'payload-codec-e2e-token',
  });
  await codecServer.waitForOutput(/codec server running/, 'the codec server to listen');
  const url = /"endpoint":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(codecServer.stdout())?.[1];
  assert.ok(url, codecServer.stdout());
  assert.ok(!codecServer.stdout().includes('payload-codec-e2e-token'), 'the local token is not logged');
  const endpoint = `${url}/payload-codec-e2e-token`;
  const cli = await resolveTemporalCli(process.env, () => {});
  const show = async (...extra: string[]) => {
    const { stdout } = await promisify(execFile)(
      cli.path,
      [
        ...['workflow', 'show', '--address', world.env.address, '--namespace', world.env.namespace],
        ...['--workflow-id', firstJob!.workflowId, '--output', 'json', ...extra],
      ],
      { maxBuffer: 64 * 2 ** 20 },
    );
    return jsonTexts(JSON.parse(stdout)).filter((text) => text.includes(firstJob!.marker)).length;
  };
  assert.ok(
    (await show('--codec-endpoint', endpoint)) > 0,
    'the marker is shown decoded through the codec server',
  );
  assert.equal(await show(), 0, 'without --codec-endpoint the marker is not shown');
  assert.match(codecServer.stdout(), /"msg":"codec request".*"path":"\/decode"/);

  // docs/starting-jobs.md: a start through the CLI with the endpoint seals the input (/encode), and
  // its result opens through it (/decode).
  const marker = `secret-${randomUUID()}`;
  const workflowId = uniqueId('codec-cli');
  const run = await promisify(execFile)(
    cli.path,
    [
      ...['workflow', 'execute', '--address', world.env.address, '--namespace', world.env.namespace],
      ...['--type', WORKFLOW_TYPE, '--task-queue', workerEnv.taskQueue, '--workflow-id', workflowId],
      ...[
        '--input',
        JSON.stringify({ projectId: world.project({ outcome: 'pr' }), prompt: secretPrompt(marker) }),
      ],
      ...['--output', 'json', '--codec-endpoint', endpoint],
    ],
    { timeout: 60_000 },
  );
  const out = JSON.parse(run.stdout) as { result: { prLink: string } };
  assert.match(out.result.prLink, /^https:\/\/github\.com\//);
  const started = world.env.client.workflow.getHandle(workflowId);
  assert.deepEqual(await inputSeals(started), [`${SEALED_ENCODING} e2e-1`], 'the CLI sealed the input');
  assert.equal((await historyBytes(started)).indexOf(marker), -1, 'the marker is in no history event');
  assert.match(codecServer.stdout(), /"msg":"codec request".*"path":"\/encode"/);
  for (const secretText of [firstJob.marker, marker])
    assert.ok(!codecServer.stdout().includes(secretText), 'the codec server logs no payload');
  codecServer.child.kill('SIGTERM');
  assert.equal(await codecServer.exited, 0);
});

test('key 2 made current in the Secret seals the next job, and key 1 payloads still open, without a restart', async () => {
  assert.ok(worker, 'the first test started the worker');
  const marker = `secret-${randomUUID()}`;
  const byKey1 = await runSecretJob(`${marker}-before`);
  secret.swap(`e2e-2 ${KEY_2}\ne2e-1 ${KEY_1}\n`);
  const byKey2 = await runSecretJob(marker);
  await assertSealed(byKey2, marker, 'e2e-2');
  await assertSealed(byKey1, `${marker}-before`, 'e2e-1');
  // The worker sealed its own payloads of the second job (activity inputs) with key 2 too, however
  // recent its last check of the file: the input sealed with e2e-2, unknown to it, made it read the
  // file at once.
  const events = (await world.env.client.workflow.getHandle(byKey2.workflowId).fetchHistory()).events ?? [];
  const activityKeys = events.flatMap((e) =>
    (e.activityTaskScheduledEventAttributes?.input?.payloads ?? []).map((p) =>
      Buffer.from(p.metadata?.[KEY_ID_METADATA_KEY] ?? new Uint8Array()).toString('utf8'),
    ),
  );
  assert.ok(activityKeys.length > 0, 'the job scheduled activities');
  assert.deepEqual([...new Set(activityKeys)], ['e2e-2']);
  await waitFor(() => /payload key ring reloaded from TEMPORAL_PAYLOAD_KEYS_FILE/.test(worker!.stdout()), {
    what: 'the worker to log the new ring',
  });
  assert.ok(
    !worker.stdout().includes(KEY_2) && !worker.stderr().includes(KEY_2),
    'no key in the worker output',
  );
  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
});

test('with the codec off, the same check finds the marker in the history', async () => {
  const marker = `secret-${randomUUID()}`;
  const plainWorker = await world.startWorker();
  const handle = await world.env.client.workflow.start(WORKFLOW_TYPE, {
    taskQueue: plainWorker.taskQueue,
    workflowId: uniqueId('codec-off'),
    args: [{ projectId: world.project({ outcome: 'pr' }), prompt: secretPrompt(marker) }],
  });
  await handle.result();
  assert.notEqual((await historyBytes(handle)).indexOf(marker), -1, 'the marker is in the history');
  assert.deepEqual(await inputSeals(handle), ['json/plain']);
});
