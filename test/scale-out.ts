/**
 * The scale-out proof, shared by test/e2e/scale-out.test.ts (on the dev server) and
 * test/cluster/scale-out.ts (on Temporal Server with PostgreSQL): three worker processes share one
 * task queue; one is killed with SIGKILL while agent jobs are in flight and a replacement starts,
 * and more jobs arrive once it runs. Every workflow must still complete with its prLink, the
 * simulator must have seen exactly one agent job per workflow, every create it accepted beyond a
 * workflow's first must be one that workflow counts in `resent`, and every worker must have done
 * part of the work. Temporal is the only coordination.
 */
import assert from 'node:assert/strict';
import { startAgentJob, type AgentJobHandle } from '../src/client/index.js';
import type { RunningSimulator } from '../src/simulator/index.js';
import {
  startWorkerProcess,
  uniqueId,
  waitFor,
  workerProcessEnv,
  type TemporalTestEnv,
  type TestProcess,
} from './harness.js';
import { assertResendsCounted, createdJobs, requestsTo } from './simulator-stats.js';

/** What {@link runScaleOut} needs. */
export interface ScaleOutOptions {
  env: TemporalTestEnv;
  sim: RunningSimulator;
  /** A key the simulator accepts. */
  apiKey: string;
  /** Jobs started before the kill. */
  jobs: number;
  /**
   * Jobs started once the replacement runs. Workflows stay with the worker that caches them, and
   * the killed worker's come back within seconds, maybe before the replacement polls: new
   * workflows are the work a joining worker is sure to compete for.
   */
  lateJobs: number;
  /**
   * Runs right after the worker is killed, before the replacement starts, while agent jobs are
   * in flight (e.g. to kill and restart the Temporal Server); its figures join the summary.
   */
  afterWorkerKill?: (projectId: string) => Promise<Record<string, number | string>>;
}

/** The figures a run reports, asserted and printed by the callers. */
export interface ScaleOutFigures {
  jobs: number;
  completed: number;
  agentJobsCreated: number;
  seconds: number;
  activeAtWorkerKill: number;
  activitiesPerWorker: Record<string, number>;
  requestsPerEndpoint: Record<string, number>;
  /** POSTs to create the simulator saw for the project, whatever it answered. */
  createPosts: number;
  /** The creates the workflows sent again after an attempt whose outcome was unknown (their `resent`). */
  resent: number;
  extra: Record<string, number | string>;
}

interface WorkerProcess {
  name: string;
  process: TestProcess;
  metricsPort: number;
}

async function startWorker(
  options: ScaleOutOptions,
  name: string,
  taskQueue: string,
): Promise<WorkerProcess> {
  const workerEnv = await workerProcessEnv(
    options.env,
    { url: options.sim.url, apiKey: options.apiKey },
    { TEMPORAL_TASK_QUEUE: taskQueue },
  );
  const worker = await startWorkerProcess(workerEnv, { what: name });
  return { name, process: worker, metricsPort: workerEnv.metricsPort };
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

/** Agent jobs of `projectId` the simulator has not finished yet. */
export function activeJobs(sim: RunningSimulator, projectId: string): number {
  return sim.stats().jobs.filter((job) => job.projectId === projectId && job.terminalAt === null).length;
}

/**
 * Runs the proof and asserts what a user would see; returns the figures for the summary line.
 * Stops its workers (SIGTERM, exit 0) at the end; on failure the harness kills them.
 */
export async function runScaleOut(options: ScaleOutOptions): Promise<ScaleOutFigures> {
  const { env, sim, jobs, lateJobs } = options;
  const total = jobs + lateJobs;
  const taskQueue = uniqueId('tq-scale');
  const projectId = uniqueId('docs-scale');
  const startedAt = Date.now();
  const workers = await Promise.all(
    ['worker-1', 'worker-2', 'worker-3'].map((name) => startWorker(options, name, taskQueue)),
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
  await startJobs(jobs);
  // Kill once the agent jobs are being worked on: most created, none finished yet.
  await waitFor(() => createdJobs(sim, projectId) >= jobs / 2, {
    what: 'half of the agent jobs to be created',
    timeoutMs: 60_000,
  });
  const victim = workers[0] as WorkerProcess;
  const victimWork = await activitiesDone(victim);
  victim.process.child.kill('SIGKILL');
  assert.equal(await victim.process.exited, 'SIGKILL');
  const activeAtWorkerKill = activeJobs(sim, projectId);
  const extra = (await options.afterWorkerKill?.(projectId)) ?? {};
  const replacement = await startWorker(options, 'worker-4', taskQueue);
  await startJobs(lateJobs);

  const results = await Promise.all(handles.map((handle) => handle.result()));
  const seconds = (Date.now() - startedAt) / 1000;

  assert.equal(results.length, total);
  for (const result of results) {
    assert.equal(result.status, 'completed');
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+$/);
  }
  const stats = sim.stats();
  assert.equal(createdJobs(sim, projectId), total, 'exactly one agent job per workflow');
  const jobIds = new Set(results.map((result) => result.job.id));
  assert.equal(jobIds.size, total, 'no two workflows share an agent job');
  // Every create sent again (a worker killed mid-request) is counted in `resent`.
  const resent = results.reduce((sum, result) => sum + result.resent, 0);
  assertResendsCounted(
    sim,
    handles.map((handle) => handle.workflowId),
    results,
  );
  const createPosts = requestsTo(sim, projectId, 'create');
  assert.ok(
    createPosts <= total + resent,
    `${createPosts} POSTs to create for ${total} workflows and ${resent} creates sent again`,
  );

  const work: Record<string, number> = { [victim.name]: victimWork };
  for (const worker of [...workers.slice(1), replacement]) work[worker.name] = await activitiesDone(worker);
  for (const [name, count] of Object.entries(work)) assert.ok(count > 0, `${name} did part of the work`);

  for (const worker of [...workers.slice(1), replacement]) {
    worker.process.child.kill('SIGTERM');
    assert.equal(await worker.process.exited, 0);
  }
  return {
    jobs: total,
    completed: results.filter((result) => result.status === 'completed').length,
    agentJobsCreated: createdJobs(sim, projectId),
    seconds,
    activeAtWorkerKill,
    activitiesPerWorker: work,
    requestsPerEndpoint: stats.requestsPerEndpoint,
    createPosts,
    resent,
    extra,
  };
}
