/**
 * A keyed worker refuses an input that arrived unsealed (decision 0021), over the real server: a
 * worker process with TEMPORAL_PAYLOAD_KEYS_FILE and the project quota on fails the workflow a
 * starter without the ring started, with `UnsealedInput` (exit code 2), before any agent job or
 * quota use; a starter with the ring runs its job on the same worker to its prLink. A run started
 * unsealed before the ring was configured finishes on the worker restarted with it. The refused
 * run's history replays on a keyed worker; on one without the ring it does not (Core meets a patch
 * marker the code did not ask for).
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { FailureType, WORKFLOW_TYPE, type AgentJobResult } from '../../src/contract.js';
import { payloadDataConverter } from '../../src/payload-codec/index.js';
import { projectQuotaWorkflowId } from '../../src/quota/messages.js';
import {
  FAST_POLL,
  runStarter,
  starterProcessEnv,
  startSimulatedWorld,
  startWorkerProcess,
  uniqueId,
  waitFor,
  workflowFailure,
} from '../harness.js';
import { SecretVolume } from '../secret-volume.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const root = mkdtempSync(join(tmpdir(), 'unsealed-input-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));
const secret = new SecretVolume(root, `e2e-1 ${randomBytes(32).toString('base64')}\n`);

const world = await startSimulatedWorld('unsealed', { durationMs: 200 });
const workerEnv = await world.workerEnv({
  TEMPORAL_PAYLOAD_KEYS_FILE: secret.path,
  AGENT_API_PROJECT_QUOTA: '100/1h',
});
const plainStarter = starterProcessEnv(world.env, workerEnv.taskQueue);
const sealingStarter = { ...plainStarter, TEMPORAL_PAYLOAD_KEYS_FILE: secret.path };
const worker = await startWorkerProcess(workerEnv);
after(async () => {
  worker.child.kill('SIGTERM');
  await worker.exited;
});

/** The workflow ID of the job refused by the first test, for the replay test. */
let refusedId: string | undefined;

test('a starter without the ring: the keyed worker fails the workflow UnsealedInput, exit 2, no agent job and no quota use', async () => {
  const projectId = world.project({ outcome: 'pr' });
  const marker = `secret-${randomUUID()}`;
  const run = await runStarter(
    ['--project', projectId, '--prompt', `Document ${marker}`, '--wait', '--json'],
    plainStarter,
  );
  assert.equal(run.code, 2, run.stderr);
  const out = JSON.parse(run.stdout) as { workflowId: string; error: { type: string; message: string } };
  assert.equal(out.error.type, FailureType.UnsealedInput);
  assert.match(out.error.message, /arrived in plain text/);
  assert.match(out.error.message, /TEMPORAL_PAYLOAD_KEYS_FILE/);
  refusedId = out.workflowId;

  const failure = await workflowFailure(world.env.client.workflow.getHandle(out.workflowId));
  assert.equal(failure.type, FailureType.UnsealedInput);
  assert.equal(failure.nonRetryable, true);
  assert.equal(createdJobs(world.sim, projectId), 0, 'no agent job');
  assert.equal(requestsTo(world.sim, projectId, 'create'), 0, 'no create request');
  await assert.rejects(
    world.env.client.workflow.getHandle(projectQuotaWorkflowId(projectId)).describe(),
    WorkflowNotFoundError,
    'no quota workflow: no quota use',
  );
  assert.ok(!worker.stdout().includes(marker) && !worker.stderr().includes(marker), 'no worker output line');
});

test('a starter with the ring: the same worker runs the job to its prLink', async () => {
  const projectId = world.project({ outcome: 'pr' });
  const run = await runStarter(
    [
      '--project',
      projectId,
      '--prompt',
      'Document the export',
      '--wait',
      '--json',
      '--poll-interval',
      '50ms',
    ],
    sealingStarter,
  );
  assert.equal(run.code, 0, run.stderr);
  assert.match((JSON.parse(run.stdout) as AgentJobResult).prLink ?? '', /^https:\/\/github\.com\//);
  assert.equal(createdJobs(world.sim, projectId), 1);
});

test("the refused run's history replays on a keyed worker, not on one without the ring", async () => {
  assert.ok(refusedId, 'the first test refused a run');
  const history = await world.env.client.workflow.getHandle(refusedId).fetchHistory();
  const { workflowBundle } = world.env;
  await Worker.runReplayHistory(
    { workflowBundle, dataConverter: payloadDataConverter(secret.path) },
    history,
    refusedId,
  );
  // Without the ring the input is not marked, the code does not ask for the patch, and Core fails
  // the replay on its marker (it skips only deprecated ones). Such a worker cannot open the
  // deployment's sealed payloads either.
  await assert.rejects(
    Worker.runReplayHistory({ workflowBundle }, history, refusedId),
    (err: Error) => err.name === 'DeterminismViolationError' && /patch marker/i.test(err.message),
  );
});

test('a run started unsealed before the ring was configured finishes on the worker restarted with it', async () => {
  const taskQueue = uniqueId('tq-restart');
  const plainWorker = await startWorkerProcess(await world.workerEnv({ TEMPORAL_TASK_QUEUE: taskQueue }), {
    what: 'the worker without the ring',
  });
  const projectId = world.project({ outcome: 'pr', durationMs: 3_000 });
  const handle = await world.env.client.workflow.start(WORKFLOW_TYPE, {
    taskQueue,
    workflowId: uniqueId('unsealed-before-ring'),
    args: [{ projectId, prompt: 'Document the export', poll: FAST_POLL }],
  });
  await waitFor(() => createdJobs(world.sim, projectId) === 1, { what: 'the agent job to be created' });
  plainWorker.child.kill('SIGTERM');
  assert.equal(await plainWorker.exited, 0);
  const keyed = await startWorkerProcess(
    await world.workerEnv({ TEMPORAL_TASK_QUEUE: taskQueue, TEMPORAL_PAYLOAD_KEYS_FILE: secret.path }),
    { what: 'the worker with the ring' },
  );
  try {
    // The result is sealed by the keyed worker: a client with the ring reads it.
    const sealing = new Client({
      connection: world.env.client.connection,
      namespace: world.env.namespace,
      dataConverter: payloadDataConverter(secret.path),
    });
    const result = (await sealing.workflow.getHandle(handle.workflowId).result()) as AgentJobResult;
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\//);
    assert.equal(createdJobs(world.sim, projectId), 1);
    // The keyed worker ran workflow tasks of this run: it replayed the unsealed input.
    const events = (await handle.fetchHistory()).events ?? [];
    const identities = new Set(
      events.flatMap((e) => e.workflowTaskCompletedEventAttributes?.identity ?? []).filter(Boolean),
    );
    assert.ok(
      identities.size >= 2,
      `workflow tasks completed by both workers: ${[...identities].join(', ')}`,
    );
    assert.equal(
      events.some((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch'),
      false,
      'no patch marker: the run was not refused',
    );
  } finally {
    keyed.child.kill('SIGTERM');
    await keyed.exited;
  }
});
