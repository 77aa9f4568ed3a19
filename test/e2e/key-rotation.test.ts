/**
 * Key rotation on a running worker process: the worker reads its key from a Kubernetes-style
 * Secret volume (AGENT_API_KEY_FILE); mid-run the Secret is updated and, at the same moment, the
 * simulator stops accepting the old key (no overlap, the hardest case). Every workflow must read
 * its job with the new key after the rotation and still complete with exactly one agent job, and
 * no key may appear in the worker's output. The same for the Temporal key
 * (TEMPORAL_API_KEY_FILE): the dev server checks no key, so the worker reaches it through a gRPC
 * proxy that sees which key each request carries.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import {
  onCleanup,
  startSimulatedWorld,
  startTestSimulator,
  startWorkerProcess,
  uniqueId,
  waitFor,
  workerProcessEnv,
} from '../harness.js';
import { startGrpcRecordingProxy } from '../grpc-recording-proxy.js';
import { SecretVolume } from '../secret-volume.js';
import { createdJobs } from '../simulator-stats.js';

const JOBS = 30;
const NEW_KEY = `rotation-new-${randomUUID()}`;
const root = mkdtempSync(join(tmpdir(), 'agent-rotation-'));
const {
  env,
  sim,
  apiKey: OLD_KEY,
  workerEnv,
} = await startSimulatedWorld('rotation-old', {
  simulator: { createsPerProjectPerHour: 0, defaultScenario: { durationMs: 1_000, outcome: 'pr' } },
});
/** Waits for what 30 workflows on one worker process do, on a busy two-core machine: generous. */
const PATIENCE_MS = 120_000;
after(() => rmSync(root, { recursive: true, force: true }));

test(`${JOBS} workflows complete across a key rotation with no overlap, without a restart`, async () => {
  const volume = new SecretVolume(root, `${OLD_KEY}\n`);
  // The key comes from the file only.
  const fromFile = await workerEnv({ AGENT_API_KEY: '', AGENT_API_KEY_FILE: volume.path });
  const { vars } = fromFile;
  const worker = await startWorkerProcess(fromFile);
  // Every workflow polls across the rotation because its job reads `active` until the test has
  // seen each one read with the new key (each GET answered with the status set to `active` and no
  // prLink), not because the jobs last longer than the starts and the rotation take: 12 s jobs
  // made that a race a loaded machine could lose (30 starts and creates before the first ended).
  const projectId = uniqueId('docs-rotation');
  sim.setScenario(projectId, {
    faults: { rules: [{ endpoint: 'get', kind: 'altered', set: { status: 'active', prLink: null } }] },
  });
  const handles: AgentJobHandle[] = [];
  for (let i = 0; i < JOBS; i++) {
    handles.push(
      await startAgentJob(
        env.client,
        { projectId, prompt: `Rotation job ${i}`, poll: { initialInterval: '1s', backoffCoefficient: 1 } },
        { taskQueue: vars.TEMPORAL_TASK_QUEUE, key: `job-${i}` },
      ),
    );
  }
  await waitFor(() => createdJobs(sim, projectId) === JOBS, {
    what: 'every agent job created',
    timeoutMs: PATIENCE_MS,
  });

  volume.swap(`${NEW_KEY}\n`);
  const rotated = await fetch(`${sim.url}/_sim/keys`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiKeys: [NEW_KEY] }),
  });
  assert.equal(rotated.status, 200);
  const rotatedAt = Date.now();
  const refusedBefore = sim.stats().requestsPerStatus['401'] ?? 0;
  assert.equal(refusedBefore, 0, 'no refusal before the rotation');

  // The simulator counts a read only once it has taken its key, and takes only the new one now.
  const readWithNewKey = () =>
    sim
      .stats()
      .jobs.filter((job) => job.projectId === projectId)
      .filter((job) => (job.requests.get.lastAt ?? 0) > rotatedAt).length;
  await waitFor(() => readWithNewKey() === JOBS, {
    what: 'every workflow to read its agent job with the new key',
    timeoutMs: PATIENCE_MS,
    intervalMs: 200,
  });
  // The jobs read as they are from now on: ended, with their prLink.
  sim.setScenario(projectId, {});

  const results = await Promise.all(handles.map((handle) => handle.result()));
  for (const result of results) {
    assert.equal(result.status, 'completed');
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\//);
  }
  const refused = sim.stats().requestsPerStatus['401'] ?? 0;
  assert.equal(createdJobs(sim, projectId), JOBS, 'exactly one agent job per workflow');
  const oldKeyAnswer = await fetch(`${sim.url}/v2/agent/${projectId}/job/${results[0]?.job.id ?? ''}`, {
    headers: { authorization: `Bearer ${OLD_KEY}` },
  });
  assert.equal(oldKeyAnswer.status, 401, 'the old key is refused after the rotation');

  await worker.waitForOutput(/agent API key reloaded from AGENT_API_KEY_FILE/, 'the reload log line');
  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
  const output = worker.stdout() + worker.stderr();
  assert.ok(!output.includes(OLD_KEY) && !output.includes(NEW_KEY), 'no key in the worker output');
  process.stdout.write(
    `# key rotation: ${JOBS} workflows completed; ${refused} requests refused with the old key were sent again with the new one (the rest picked the new key up on the 1s check)\n`,
  );
});

test('a worker with TEMPORAL_API_KEY_FILE takes a rotated Temporal key without a restart and goes on working', async () => {
  const [firstKey, secondKey] = [`temporal-first-${randomUUID()}`, `temporal-second-${randomUUID()}`];
  const volume = new SecretVolume(root, `${firstKey}\n`);
  // A simulator of its own: the test above rotates the world's agent API key.
  const apiKey = `temporal-key-test-${randomUUID()}`;
  const ownSim = await startTestSimulator({ apiKeys: [apiKey], defaultScenario: { durationMs: 200 } });
  // The dev server ignores the key it is sent: the proxy in front of it tells which one came, and
  // records only that, so no key reaches a failure message.
  const keys = new Map([
    [`Bearer ${firstKey}`, 'first'],
    [`Bearer ${secondKey}`, 'second'],
  ]);
  const proxy = await startGrpcRecordingProxy(env.address, (authorization) =>
    authorization === undefined ? 'none' : (keys.get(authorization) ?? 'another'),
  );
  onCleanup(() => proxy.close());
  // A key turns TLS on; the dev server speaks plain text.
  const fromFile = await workerProcessEnv(
    env,
    { url: ownSim.url, apiKey },
    { TEMPORAL_ADDRESS: proxy.address, TEMPORAL_API_KEY_FILE: volume.path, TEMPORAL_TLS: 'false' },
  );
  const worker = await startWorkerProcess(fromFile);
  const projectId = uniqueId('docs-temporal-key');
  const run = async (i: number) => {
    const handle = await startAgentJob(
      env.client,
      { projectId, prompt: `Temporal key job ${i}`, poll: { initialInterval: 50 } },
      { taskQueue: fromFile.taskQueue },
    );
    assert.equal((await handle.result()).status, 'completed');
  };
  await run(1);
  const beforeRotation = proxy.requests.map((r) => r.authorization);
  assert.ok(beforeRotation.length > 0, 'the worker reaches the server through the proxy');
  assert.deepEqual(new Set(beforeRotation), new Set(['first']), 'the first key on every request');
  volume.swap(`${secondKey}\n`);
  await worker.waitForOutput(/Temporal API key reloaded from TEMPORAL_API_KEY_FILE/, 'the reload log line');
  // The worker's pollers and the next job's activities run on the connection given the new key.
  const beforeSecondJob = proxy.requests.length;
  await run(2);
  const labels = proxy.requests.map((r) => r.authorization);
  const firstWithNewKey = labels.indexOf('second');
  assert.ok(
    firstWithNewKey >= beforeRotation.length,
    `none of ${labels.length} requests carried the new key`,
  );
  // Requests opened before the key was given (long polls) carry the first key; none opened after.
  assert.deepEqual(
    labels.slice(firstWithNewKey).filter((label) => label !== 'second'),
    [],
    'only the new key once it was first sent',
  );
  assert.ok(
    proxy.requests
      .slice(beforeSecondJob)
      .some((r) => r.path.endsWith('/RespondWorkflowTaskCompleted') && r.authorization === 'second'),
    "the second job's workflow tasks completed with the new key",
  );
  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
  const output = worker.stdout() + worker.stderr();
  assert.doesNotMatch(output, /could not give the Temporal connection the new key/);
  assert.ok(!output.includes(firstKey) && !output.includes(secondKey), 'no key in the worker output');
  assert.equal(createdJobs(ownSim, projectId), 2);
});
