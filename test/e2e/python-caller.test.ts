/**
 * The Python caller (examples/python-caller/, temporalio from PyPI) against the TypeScript worker,
 * over the real server, with the payload codec on both sides: `python -m agent_job_caller`, given
 * the ring, starts a job whose prompt holds a secret marker under a caller's key; the worker
 * process (the same ring) runs it to its prLink; Python reads the result decoded. The marker is in
 * no byte of the history and in no output line; a TypeScript client with the ring reads the input
 * Python sealed; the workflow ID is the one the TypeScript library builds for that key (a long key:
 * the bounded form), and the library's `startAgentJob` with the key attaches to that workflow, as
 * Python does again, without a second agent job. A key whose run failed after its create starts
 * again from Python on the agent job that run made, not on a second one.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import proto from '@temporalio/proto';
import { agentJobWorkflowId } from '../../src/ids.js';
import { startAgentJob } from '../../src/client/index.js';
import { SearchAttributes, type AgentJobInput } from '../../src/contract.js';
import {
  AesGcmPayloadCodec,
  FileKeyRing,
  KEY_ID_METADATA_KEY,
  payloadDataConverter,
  SEALED_ENCODING,
} from '../../src/payload-codec/index.js';
import { startSimulatedWorld, startWorkerProcess } from '../harness.js';
import { runPython, type PythonRun } from '../python-caller/python.js';

const root = mkdtempSync(join(tmpdir(), 'python-caller-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));
const KEY = randomBytes(32).toString('base64');
const keysFile = join(root, 'payload-keys');
writeFileSync(keysFile, `# the worker's and the Python caller's ring\npy-e2e-1 ${KEY}\n`);

const world = await startSimulatedWorld('py-caller', { durationMs: 200 });
const workerEnv = await world.workerEnv({ TEMPORAL_PAYLOAD_KEYS_FILE: keysFile });
/** The keyed worker process, for both tests; the harness kills it after the file. */
const worker = await startWorkerProcess(workerEnv);

/** `python -m agent_job_caller <args>` with the ring, on the worker's task queue, to its exit. */
function pythonCaller(args: string[]): Promise<PythonRun> {
  return runPython(['-m', 'agent_job_caller', ...args], {
    env: {
      TEMPORAL_ADDRESS: world.env.address,
      TEMPORAL_NAMESPACE: world.env.namespace,
      TEMPORAL_TASK_QUEUE: workerEnv.taskQueue,
      TEMPORAL_PAYLOAD_KEYS_FILE: keysFile,
    },
  });
}

/** A client with the ring, as a TypeScript service beside the Python caller would have. */
function sealingClient(): Client {
  return new Client({
    connection: world.env.client.connection,
    namespace: world.env.namespace,
    dataConverter: payloadDataConverter(keysFile),
  });
}

test('a job started from Python with the codec runs on the TypeScript worker to its prLink, and its marker is in no history byte', async () => {
  const marker = `secret-${randomUUID()}`;
  const projectId = world.project({ outcome: 'pr' });
  const prompt = `Document the ${marker} module: it handles the billing export.`;
  // Over 255 bytes, with a `/` and a `%`: the workflow ID is the bounded form.
  const key = `release/${'notes%'.repeat(50)}${randomUUID()}`;
  const args = ['--project', projectId, '--prompt', prompt, '--key', key];
  const run = await pythonCaller([...args, '--wait', '--json', '--poll-interval', '50ms']);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  const out = JSON.parse(run.stdout) as { workflowId: string; status: string; prLink: string };
  assert.equal(out.workflowId, agentJobWorkflowId(projectId, key));
  assert.match(out.workflowId, /%~[0-9a-f]{16}$/);
  assert.equal(out.status, 'completed');
  assert.match(out.prLink, /^https:\/\/github\.com\//);

  const events = (await world.env.client.workflow.getHandle(out.workflowId).fetchHistory()).events ?? [];
  const history = Buffer.from(proto.temporal.api.history.v1.History.encode({ events }).finish());
  assert.ok(history.length > 1_000, 'a history was read');
  assert.equal(history.indexOf(marker), -1, 'the marker is in no history event');
  const [input] = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  assert.ok(input, 'the workflow has an input');
  const metadata = (name: string) => Buffer.from(input.metadata?.[name] ?? []).toString();
  assert.deepEqual([metadata('encoding'), metadata(KEY_ID_METADATA_KEY)], [SEALED_ENCODING, 'py-e2e-1']);
  for (const output of [run.stdout, run.stderr, worker.stdout(), worker.stderr()])
    assert.ok(!output.includes(marker), 'the marker is in no output line');

  // A TypeScript process with the ring reads what Python sealed: the input, summary and result.
  const [opened] = await new AesGcmPayloadCodec(new FileKeyRing(keysFile)).decode([input]);
  assert.deepEqual(defaultPayloadConverter.fromPayload<AgentJobInput>(opened!), {
    projectId,
    prompt,
    poll: { initialInterval: '50ms', maxInterval: '50ms' },
  });
  const handle = sealingClient().workflow.getHandle(out.workflowId);
  assert.equal(((await handle.result()) as { prLink: string }).prLink, out.prLink);
  const described = await handle.describe();
  assert.match((await described.staticSummary()) ?? '', new RegExp(marker));
  assert.equal(described.typedSearchAttributes.get(SearchAttributes.projectId), projectId);

  // The same key reaches the same workflow from either language: its result, no second agent job.
  const again = await pythonCaller([...args, '--wait', '--json']);
  assert.equal(again.code, 0, again.stdout + again.stderr);
  assert.deepEqual(JSON.parse(again.stdout), out);
  const fromTs = await startAgentJob(
    sealingClient(),
    { projectId, prompt },
    { key, taskQueue: workerEnv.taskQueue },
  );
  assert.equal(fromTs.workflowId, out.workflowId);
  assert.equal((await fromTs.result()).prLink, out.prLink);
  assert.equal(world.sim.stats().jobsPerProject[projectId], 1);
});

test('a key whose run failed starts again from Python on the agent job that run made, and the failure type is printed', async () => {
  const projectId = world.project({ outcome: 'failed' });
  const args = [
    '--project',
    projectId,
    '--prompt',
    'Add a Quickstart page',
    '--key',
    `retry-${randomUUID()}`,
  ];
  const first = await pythonCaller([...args, '--wait', '--json', '--poll-interval', '50ms']);
  assert.equal(first.code, 1, first.stdout + first.stderr);
  const failed = JSON.parse(first.stdout) as { workflowId: string; error: { type: string } };
  assert.equal(failed.error.type, 'AgentJobFailed');
  const handle = sealingClient().workflow.getHandle(failed.workflowId);
  const failedRun = await handle.describe();
  const jobId = failedRun.typedSearchAttributes.get(SearchAttributes.jobId);
  assert.ok(jobId, 'the failed run recorded its agent job');

  const again = await pythonCaller([...args, '--wait', '--json', '--poll-interval', '50ms']);
  assert.equal(again.code, 1, again.stdout + again.stderr);
  assert.deepEqual(JSON.parse(again.stdout), failed, 'the same workflow, failed again with the job');
  // The new run (the latest under the ID) was started on the job, without the prompt.
  const [started] = (await handle.fetchHistory()).events ?? [];
  const [input] = started?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
  const [opened] = await new AesGcmPayloadCodec(new FileKeyRing(keysFile)).decode([input!]);
  const restarted = defaultPayloadConverter.fromPayload<AgentJobInput>(opened!);
  assert.equal(restarted.jobId, jobId);
  assert.equal(restarted.prompt, undefined);
  assert.notEqual((await handle.describe()).runId, failedRun.runId, 'a new run under the ID');
  assert.equal(world.sim.stats().jobsPerProject[projectId], 1, 'one agent job, not a second create');
});
