/**
 * Scale-out and survival: three worker processes share one task queue; one is killed with SIGKILL
 * while agent jobs are in flight and a replacement starts, and more jobs arrive once it runs. Every
 * workflow must still complete with its prLink, the simulator must have seen exactly one agent job
 * per workflow, and every worker must have done part of the work. Temporal is the only coordination.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, test } from 'node:test';
import { startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import type { RunningSimulator } from '../../src/simulator/index.js';
import {
  spawnTs,
  startTestSimulator,
  temporalEnv,
  uniqueId,
  waitFor,
  workerProcessEnv,
  type TemporalTestEnv,
  type TestProcess,
} from '../harness.js';
import { createdJobs } from '../simulator-stats.js';

const JOBS = 200;
/**
 * Jobs started once the replacement runs. Workflows stay with the worker that caches them, and the
 * killed worker's come back within seconds, maybe before the replacement polls: new workflows are
 * the work a joining worker is sure to compete for (40 tasks over three workers).
 */
const LATE_JOBS = 20;
const API_KEY = `scale-test-key-${randomUUID()}`;
let env: TemporalTestEnv;
let sim: RunningSimulator;

before(async () => {
  env = await temporalEnv();
  sim = await startTestSimulator({
    apiKeys: [API_KEY],
    createsPerProjectPerHour: 0,
    defaultScenario: { durationMs: 6_000, outcome: 'pr' },
  });
});

interface WorkerProcess {
  name: string;
  process: TestProcess;
  metricsPort: number;
}

async function startWorker(name: string, taskQueue: string): Promise<WorkerProcess> {
  const { vars, healthPort, metricsPort } = await workerProcessEnv(
    env,
    { url: sim.url, apiKey: API_KEY },
    { TEMPORAL_TASK_QUEUE: taskQueue },
  );
  const worker = spawnTs('src/worker.ts', [], vars);
  await waitFor(async () => (await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => null))?.ok, {
    what: `${name} to be ready`,
    timeoutMs: 120_000,
    intervalMs: 200,
  });
  return { name, process: worker, metricsPort };
}

/** Activities this worker completed, from its own Prometheus counters. */
async function activitiesDone(worker: WorkerProcess): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${worker.metricsPort}/metrics`)).text();
  let total = 0;
  for (const match of text.matchAll(/^(agent_jobs_created_total|agent_job_polls_total)\{[^}]*\} (\d+)/gm)) {
    total += Number(match[2]);
  }
  return total;
}

test(`${JOBS} agent jobs survive a SIGKILLed worker among three, with no duplicate and none lost`, async () => {
  const taskQueue = uniqueId('tq-scale');
  const projectId = uniqueId('docs-scale');
  const startedAt = Date.now();
  const workers = await Promise.all(
    ['worker-1', 'worker-2', 'worker-3'].map((name) => startWorker(name, taskQueue)),
  );

  const handles: AgentJobHandle[] = [];
  const startJobs = async (count: number) => {
    for (let i = handles.length, end = handles.length + count; i < end; i++) {
      handles.push(
        await startAgentJob(
          env.client,
          { projectId, prompt: `Scale-out job ${i}`, poll: { initialInterval: '2s', backoffCoefficient: 1 } },
          { taskQueue, key: `job-${i}` },
        ),
      );
    }
  };
  await startJobs(JOBS);
  // Kill once the agent jobs are being worked on: most created, none finished yet.
  await waitFor(() => createdJobs(sim, projectId) >= JOBS / 2, {
    what: 'half of the agent jobs to be created',
    timeoutMs: 60_000,
  });
  const victim = workers[0] as WorkerProcess;
  const victimWork = await activitiesDone(victim);
  victim.process.child.kill('SIGKILL');
  assert.equal(await victim.process.exited, 'SIGKILL');
  const inFlightAtKill = sim
    .stats()
    .jobs.filter((job) => job.projectId === projectId && job.terminalAt === null).length;
  const replacement = await startWorker('worker-4', taskQueue);
  await startJobs(LATE_JOBS);

  const results = await Promise.all(handles.map((handle) => handle.result()));
  const seconds = (Date.now() - startedAt) / 1000;

  assert.equal(results.length, JOBS + LATE_JOBS);
  for (const result of results) {
    assert.equal(result.status, 'completed');
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+$/);
  }
  const stats = sim.stats();
  assert.equal(createdJobs(sim, projectId), JOBS + LATE_JOBS, 'exactly one agent job per workflow');
  const jobIds = new Set(results.map((result) => result.job.id));
  assert.equal(jobIds.size, JOBS + LATE_JOBS, 'no two workflows share an agent job');
  const keys = Object.entries(stats.jobsPerIdempotencyKey).filter(([key]) =>
    key.includes(`agent-job/${projectId}/`),
  );
  assert.equal(keys.length, JOBS + LATE_JOBS);
  assert.ok(
    keys.every(([, count]) => count === 1),
    'no idempotency key made two jobs',
  );

  const work: Record<string, number> = { [victim.name]: victimWork };
  for (const worker of [...workers.slice(1), replacement]) work[worker.name] = await activitiesDone(worker);
  for (const [name, count] of Object.entries(work)) assert.ok(count > 0, `${name} did part of the work`);

  process.stdout.write(
    `# scale-out: ${JOBS} + ${LATE_JOBS} jobs in ${seconds.toFixed(1)}s; ${inFlightAtKill} agent jobs active when worker-1 was killed; ` +
      `created ${createdJobs(sim, projectId)}; API requests ${JSON.stringify(stats.requestsPerEndpoint)}; ` +
      `activities per worker ${JSON.stringify(work)}\n`,
  );
  for (const worker of [...workers.slice(1), replacement]) {
    worker.process.child.kill('SIGTERM');
    assert.equal(await worker.process.exited, 0);
  }
});
