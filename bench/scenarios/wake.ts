/**
 * The wake scenario: how fast a poll that waits on the server wakes. Since 1.1 each wait of this
 * worker is one poll activity whose attempts the Temporal server retries (src/activities/
 * poll-by-retry.ts), so nothing runs on the worker between polls. Three figures, on one set of N
 * agent jobs held active and polled at a fixed cadence (as the load scenario polls them):
 *
 * 1. pollNow: a signal to a sample of jobs, spread over time; from the moment the client sends it
 *    to the moment the simulator receives that job's next GET (the workflow cancels the waiting
 *    poll activity with TRY_CANCEL and a new one reads at once).
 * 2. A follow-up message (the `sendMessage` update) to another sample: from the update sent to the
 *    message's POST at the simulator.
 * 3. A worker SIGKILLed with every job waiting, and a new one started: from the kill to each job's
 *    first GET after it. An attempt that was running on the dead worker is retried by the server
 *    only after its start-to-close timeout (30 s; the baselines' 75 s); an attempt waiting for its retry is dispatched to
 *    the new worker when its wait ends.
 *
 * Request times come from the simulator (`stats().jobs[].requests`), in this process, on the same
 * clock as the moments the benchmark notes. So do the poll counts: a poll activity cancelled while
 * it waits between attempts leaves no ActivityTaskStarted event, so its attempts (each one GET and
 * one billable action) are in no history; the scenario counts both to show the gap.
 */
import { randomUUID } from 'node:crypto';
import { POLL_ATTEMPT_TIMEOUT_MS } from '../../src/poll-schedule.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { SearchAttributes, pollNowSignal, sendMessageUpdate } from '../../src/contract.js';
import { mapLimit } from '../../src/client/map-limit.js';
import type { JobStats } from '../../src/simulator/index.js';
import { spawnWorker, type BenchEnvironment } from '../environment.js';
import { workflowCost } from '../history.js';
import type { MeasuredProcess } from '../processes.js';
import { GET_BACKOFF } from '../../src/agent-api/failure-policy.js';
import { percentile, sum } from '../stats.js';
import { waitUntil } from '../wait.js';
import type { Delays, Implementation, WakeRun } from '../catalogue.js';
import { BenchmarkBroken, startLoadJobs, terminateLeftovers } from './load.js';

/** What to run. */
export interface WakeParams {
  /**
   * This worker, or a baseline for the restart alone: the baselines have no pollNow or follow-ups,
   * and (c) polls as 1.0 did, on a timer and a local activity.
   */
  impl: Exclude<Implementation, 'plain-loop'>;
  jobs: number;
  /** The fixed poll interval of every job (initial = max, coefficient 1). */
  cadenceMs: number;
  /** Jobs sent a pollNow signal. */
  pollNowSamples: number;
  /** Other jobs sent a follow-up message. */
  followUpSamples: number;
  /** The signals and messages are spread evenly over this long. */
  spreadMs: number;
  /** Give up on a phase after this long. */
  phaseTimeoutMs: number;
  /**
   * How long to wait for every job's first GET after the new worker runs; null: until an attempt
   * lost with the killed worker has timed out and been retried (start-to-close, two cadences and
   * 30 s more). Jobs later than that count as missing.
   */
  restartWaitMs: number | null;
  log: (line: string) => void;
}

/** The poll activity's start-to-close timeout: this worker's (src/poll-schedule.ts), the baselines' 75 s. */
const startToCloseMs = (impl: string) => (impl === 'worker' ? POLL_ATTEMPT_TIMEOUT_MS : 75_000);
/** Jobs stay active until the scenario ends; this only bounds a run that lost its end. */
const HELD_JOB_MS = 6 * 60 * 60_000;
/** How often the scenario reads the simulator's per-job request times: well under a cadence. */
const WATCH_EVERY_MS = 100;
const FOLLOW_UP_PROMPT = 'Benchmark follow-up: add a sentence.';

/** Runs the wake scenario on a worker of this project. */
export async function runWake(env: BenchEnvironment, params: WakeParams): Promise<WakeRun> {
  const project = `wake-${params.impl}-${params.jobs}-${randomUUID().slice(0, 8)}`;
  env.simulator.setScenario(project, { durationMs: HELD_JOB_MS, outcome: 'pr' });
  const workers: MeasuredProcess[] = [];
  const spawn = async () => {
    const worker = await spawnWorker(env, params.impl === 'worker' ? 'worker' : 'baselines', project);
    workers.push(worker);
    return worker;
  };
  try {
    const first = await spawn();
    await first.waitForLine('worker running', 60_000);
    return await drive(env, params, project, first, spawn);
  } finally {
    await terminateLeftovers(env, project);
    for (const worker of workers) await worker.stop();
  }
}

async function drive(
  env: BenchEnvironment,
  params: WakeParams,
  project: string,
  first: MeasuredProcess,
  spawn: () => Promise<MeasuredProcess>,
): Promise<WakeRun> {
  const t0 = Date.now();
  const started = await startLoadJobs(env.client, params, project, params.jobs);
  const jobsOf = () => env.simulator.stats().jobs.filter((j) => j.projectId === project);
  const ramped = await waitUntil<string | null>({
    check: () => (jobsOf().length >= params.jobs ? null : undefined),
    deadline: Date.now() + params.phaseTimeoutMs,
    everyMs: 250,
    late: () => `only ${jobsOf().length} of ${params.jobs} agent jobs were created in time`,
  });
  const rampSeconds = (Date.now() - t0) / 1000;
  const empty: WakeRun = {
    impl: params.impl,
    jobs: params.jobs,
    cadenceMs: params.cadenceMs,
    rampSeconds,
    pollNow: null,
    followUp: null,
    restart: null,
    pollCounts: null,
    broke: ramped,
  };
  if (ramped !== null) return empty;
  // A cadence and a half: every job has had its first wait on a timer and now waits in its poll
  // activity, between attempts on the server.
  await sleep(params.cadenceMs * 1.5);
  if (params.impl !== 'worker') {
    return { ...empty, restart: await killAndRestart(env, params, project, first, spawn, jobsOf) };
  }

  // Distinct jobs for each probe, picked at random, their agent job IDs from visibility.
  const picked = shuffle(started).slice(0, params.pollNowSamples + params.followUpSamples);
  const jobIds = await mapLimit(picked, 16, (s) => agentJobIdOf(env.client, s.workflowId));
  const probes: Probe[] = picked.map((s, i) => ({
    workflowId: s.workflowId,
    runId: s.runId,
    jobId: jobIds[i] as string,
    // Interleaved, so that both kinds meet the same moments of the run.
    kind: isFollowUp(i, params) ? 'message' : 'get',
    sentAt: null,
    arrivedAt: null,
    error: null,
  }));
  params.log(`  wake: ${probes.length} probes over ${params.spreadMs / 1000} s`);
  await probe(env, project, probes, params);
  const latencies = (kind: Probe['kind']) => {
    const own = probes.filter((p) => p.kind === kind);
    return delays(
      own.length,
      own.flatMap((p) => (p.sentAt !== null && p.arrivedAt !== null ? [p.arrivedAt - p.sentAt] : [])),
    );
  };
  const errors = probes.filter((p) => p.error !== null);
  if (errors.length > 0) {
    throw new BenchmarkBroken(`${errors.length} probes failed; the first: ${errors[0]?.error ?? ''}`);
  }

  const restart = await killAndRestart(env, params, project, first, spawn, jobsOf);
  const pollCounts = await countPolls(
    env,
    project,
    probes.filter((p) => p.kind === 'get').slice(0, 20),
    jobsOf,
  );
  return {
    ...empty,
    pollNow: latencies('get'),
    followUp: latencies('message'),
    restart,
    pollCounts,
    broke: null,
  };
}

/** One signal or message sent to one job, and when its request reached the simulator. */
interface Probe {
  workflowId: string;
  runId: string;
  jobId: string;
  kind: 'get' | 'message';
  sentAt: number | null;
  arrivedAt: number | null;
  error: string | null;
}

function isFollowUp(index: number, params: WakeParams): boolean {
  const total = params.pollNowSamples + params.followUpSamples;
  // Exactly `followUpSamples` of the probes, spread evenly among the pollNow signals.
  const before = Math.floor((index * params.followUpSamples) / total);
  return Math.floor(((index + 1) * params.followUpSamples) / total) > before;
}

/**
 * Sends every probe at its moment of the spread and watches the simulator for its request: the
 * first GET (or message POST) of that job that arrived at or after the moment it was sent.
 */
async function probe(env: BenchEnvironment, project: string, probes: Probe[], params: WakeParams) {
  const stepMs = params.spreadMs / Math.max(1, probes.length);
  const start = Date.now();
  const sends = probes.map(async (p, i) => {
    await sleep(Math.max(0, start + i * stepMs - Date.now()));
    const handle = env.client.workflow.getHandle(p.workflowId);
    p.sentAt = Date.now();
    try {
      if (p.kind === 'get') await handle.signal(pollNowSignal);
      else await handle.executeUpdate(sendMessageUpdate, { args: [FOLLOW_UP_PROMPT] });
    } catch (err) {
      p.error = err instanceof Error ? err.message : String(err);
    }
  });
  const byJob = new Map(probes.map((p) => [p.jobId, p]));
  const deadline = start + params.spreadMs + params.phaseTimeoutMs;
  const watching = waitUntil<null>({
    check: () => {
      for (const job of env.simulator.stats().jobs) {
        const p = job.projectId === project ? byJob.get(job.id) : undefined;
        if (p === undefined || p.sentAt === null || p.arrivedAt !== null) continue;
        const lastAt = job.requests[p.kind].lastAt;
        // A natural poll between the signal and its own GET would be taken for it: at a cadence of
        // seconds and a wake-up of milliseconds, rarely, and only ever shortening the figure by
        // less than the wake-up itself.
        if (lastAt !== null && lastAt >= p.sentAt) p.arrivedAt = lastAt;
      }
      return probes.every((p) => p.arrivedAt !== null || p.error !== null) ? null : undefined;
    },
    deadline,
    everyMs: WATCH_EVERY_MS,
    late: () => null,
  });
  await Promise.all([...sends, watching]);
}

/**
 * SIGKILLs the worker with every job waiting in its poll activity, starts a new one at once, and
 * times each job's first GET after the kill.
 */
async function killAndRestart(
  env: BenchEnvironment,
  params: WakeParams,
  project: string,
  first: MeasuredProcess,
  spawn: () => Promise<MeasuredProcess>,
  jobsOf: () => JobStats[],
): Promise<WakeRun['restart']> {
  // A cadence after the probes: the woken jobs wait again like the others.
  await sleep(params.cadenceMs);
  const killedAt = Date.now();
  first.child.kill('SIGKILL');
  await first.exited;
  const second = await spawn();
  const running = await second.waitForLine('worker running', 60_000);
  const resumedAt = new Map<string, number>();
  const jobIds = jobsOf().map((j) => j.id);
  await waitUntil<null>({
    check: () => {
      for (const job of jobsOf()) {
        const lastAt = job.requests.get.lastAt;
        if (!resumedAt.has(job.id) && lastAt !== null && lastAt > killedAt) resumedAt.set(job.id, lastAt);
      }
      return resumedAt.size >= jobIds.length ? null : undefined;
    },
    // An attempt lost with the worker times out, then waits the retry policy's backoff for its
    // attempt number before the server retries it; with polls as attempts that is soon the
    // policy's longest interval.
    deadline:
      running.at +
      (params.restartWaitMs ??
        startToCloseMs(params.impl) + GET_BACKOFF.maximumIntervalMs + 2 * params.cadenceMs + 30_000),
    everyMs: 500,
    late: () => null,
  });
  const waits = [...resumedAt.values()].map((at) => at - killedAt);
  return {
    newWorkerRunningMs: running.at - killedAt,
    resumed: delays(jobIds.length, waits),
    late: [...resumedAt.values()].filter((at) => at > running.at + params.cadenceMs).length,
    waitedMs: Date.now() - running.at,
    pastTimeoutMs: waits
      .filter((ms) => ms > startToCloseMs(params.impl))
      .sort((a, b) => a - b)
      .slice(0, 50),
    startToCloseMs: startToCloseMs(params.impl),
  };
}

/**
 * Ends the agent jobs of `woken` and, once their workflows have completed, counts their polls
 * twice: the GETs the simulator received, and the poll activity's attempts in their histories.
 */
async function countPolls(
  env: BenchEnvironment,
  project: string,
  woken: Probe[],
  jobsOf: () => JobStats[],
): Promise<WakeRun['pollCounts']> {
  for (const p of woken) env.simulator.archiveJob(project, p.jobId);
  const costs = await mapLimit(woken, 8, async (p) => {
    await env.client.workflow.getHandle(p.workflowId).result();
    return workflowCost(env.client, p.workflowId, p.runId);
  });
  const getsOf = new Map(jobsOf().map((j) => [j.id, j.requests.get.count]));
  return {
    sampled: woken.length,
    simulatorGets: sum(woken.map((p) => getsOf.get(p.jobId) ?? 0)),
    historyAttempts: sum(costs.map((c) => c.attemptsByActivity.pollAgentJob ?? 0)),
  };
}

/** The agent job ID a workflow shows as its AgentJobId search attribute, once visibility has it. */
async function agentJobIdOf(client: Client, workflowId: string): Promise<string> {
  const handle = client.workflow.getHandle(workflowId);
  return waitUntil<string>({
    check: async () => (await handle.describe()).typedSearchAttributes.get(SearchAttributes.jobId),
    deadline: Date.now() + 30_000,
    everyMs: 500,
    late: () => {
      throw new BenchmarkBroken(`workflow ${workflowId} shows no AgentJobId after 30 s`);
    },
  });
}

/**
 * Percentiles over everything sent, the missing ones counted as later than any that arrived: a
 * percentile that falls among them is null (not known, beyond the wait), never one of the others.
 */
function delays(sent: number, values: number[]): Delays {
  const padded = [...values, ...Array<number>(Math.max(0, sent - values.length)).fill(Infinity)];
  const known = (p: number) => {
    const value = percentile(padded, p);
    return Number.isFinite(value) ? value : null;
  };
  return {
    sent,
    missing: sent - values.length,
    p50: known(50),
    p99: known(99),
    max: values.length === sent && sent > 0 ? Math.max(...values) : null,
  };
}

function shuffle<T>(items: readonly T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j] as T, copy[i] as T];
  }
  return copy;
}
