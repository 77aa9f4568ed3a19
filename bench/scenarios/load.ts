/**
 * The load scenario: N agent jobs in flight at once, polled at a fixed cadence, by one of four
 * implementations — this worker, baseline (a) the plain Node loop, baseline (b) the
 * poll-by-activity-retry workflow, baseline (c) the floor of this design (a timer and a
 * local-activity poll, nothing else) — each in a fresh process on its own task queue and simulator
 * project. One run has three phases:
 *
 * 1. ramp: start N workflows (or create N jobs, for the plain loop) whose agent jobs stay active;
 * 2. steady: with all N open, measure CPU per poll and memory over a window of whole cadences;
 * 3. release: end every agent job at a random moment within one cadence (the simulator archives
 *    it, a terminal status) and wait for every workflow to close.
 *
 * Holding the jobs until all N are open is what makes "N concurrent jobs" true: creating
 * thousands of workflows takes tens of seconds here, longer than a job of a few cadences lasts.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { startAgentJob } from '../../src/client/index.js';
import { SearchAttributes, type AgentJobRecord } from '../../src/contract.js';
import { FLOOR_WORKFLOW, type floorWorkflow } from '../baselines/floor-workflow.js';
import { POLL_BY_RETRY_WORKFLOW, type pollByRetryWorkflow } from '../baselines/retry-workflow.js';
import { BENCH_API_KEY, spawnWorker, type BenchEnvironment } from '../environment.js';
import { DETECTION_SAMPLE, detectionSplit, firstRunId, perPart, workflowCost } from '../history.js';
import { mapLimit } from '../../src/client/map-limit.js';
import { spawnMeasured, writeStdin, type MeasuredProcess } from '../processes.js';
import { ResourceWatch, sampleProcess, type ProcessSample } from '../resources.js';
import { mean, percentile } from '../stats.js';
import { waitUntil } from '../wait.js';
import type { CpuSplit, Implementation, LoadRun } from '../catalogue.js';

/** What to run. */
export interface LoadParams {
  impl: Implementation;
  jobs: number;
  /** Poll interval in force (fixed: initial = max, coefficient 1). */
  cadenceMs: number;
  /** Length of the steady window, in whole cadences. */
  steadyCadences: number;
  /** Give up on a phase (and call the run broken) after this long. */
  phaseTimeoutMs: number;
  /** Histories fetched to count events and actions per job (Temporal implementations only). */
  historySample: number;
  /** Extra worker settings (cache size, concurrency), as environment variables. */
  workerEnv?: Record<string, string>;
  /** Label of a design-choice variant; empty for the defaults. */
  variant?: string;
}

/** Something the benchmark needs went wrong (a workflow failed, a process died): not a measurement. */
export class BenchmarkBroken extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BenchmarkBroken';
  }
}

/** Workflow starts in flight at once: enough to start thousands quickly, few enough not to flood. */
const START_CONCURRENCY = 64;
const PROMPT = 'Benchmark agent job: add a changelog entry.';
/** Jobs stay active until released; this only bounds a run that lost its release. */
const HELD_JOB_MS = 6 * 60 * 60_000;

/** Runs one load scenario. */
export async function runLoad(env: BenchEnvironment, params: LoadParams): Promise<LoadRun> {
  const project = `load-${params.impl}-${params.jobs}-${randomUUID().slice(0, 8)}`;
  env.simulator.setScenario(project, { durationMs: HELD_JOB_MS, outcome: 'pr' });
  const proc = await spawnImplementation(env, params, project);
  try {
    await proc.waitForLine(params.impl === 'plain-loop' ? 'ready' : 'worker running', 60_000);
    return await drive(env, params, project, proc);
  } finally {
    await proc.stop();
  }
}

async function spawnImplementation(
  env: BenchEnvironment,
  params: LoadParams,
  project: string,
): Promise<MeasuredProcess> {
  if (params.impl !== 'plain-loop') {
    return spawnWorker(env, params.impl === 'worker' ? 'worker' : 'baselines', project, params.workerEnv);
  }
  return spawnMeasured(
    [
      env.build.plainLoopEntry,
      ...['--base-url', env.simulator.url, '--project', project],
      ...['--jobs', String(params.jobs), '--interval-ms', String(params.cadenceMs)],
    ],
    { AGENT_API_KEY: BENCH_API_KEY },
    { stdin: 'pipe' },
  );
}

/** A clock over the three processes, read at phase boundaries. */
interface Reading {
  at: number;
  proc: ProcessSample;
  server: number;
  bench: number;
  polls: number;
}

function read(env: BenchEnvironment, pid: number, project: string): Reading {
  const bench = process.cpuUsage();
  return {
    at: Date.now(),
    proc: sampleProcess(pid),
    server: env.serverPid === null ? Number.NaN : sampleProcess(env.serverPid).cpuSeconds,
    bench: (bench.user + bench.system) / 1e6,
    polls: env.simulator.stats().requestsPerProjectEndpoint[project]?.get ?? 0,
  };
}

function cpuBetween(a: Reading, b: Reading, per: number): CpuSplit {
  return {
    measured: (b.proc.cpuSeconds - a.proc.cpuSeconds) / per,
    server: (b.server - a.server) / per,
    bench: (b.bench - a.bench) / per,
  };
}

interface Started {
  workflowId: string;
  runId: string;
  startedAt: number;
}

async function drive(
  env: BenchEnvironment,
  params: LoadParams,
  project: string,
  proc: MeasuredProcess,
): Promise<LoadRun> {
  await sleep(500);
  const idle = read(env, proc.pid, project);
  const t0 = Date.now();
  let broke: string | null = null;
  let started: Started[] = [];
  let loopResult: Promise<{ line: Record<string, unknown> } | { error: unknown }> | null = null;

  // 1. Ramp.
  if (params.impl === 'plain-loop') {
    await writeStdin(proc, 'go\n');
    // The result only comes after the release; until it is awaited there, a failure is kept as a value.
    loopResult = proc.waitForLine('result', params.phaseTimeoutMs * 3).then(
      (hit) => ({ line: hit.line }),
      (error: unknown) => ({ error }),
    );
  } else {
    try {
      started = await startLoadJobs(env.client, params, project, params.jobs);
    } catch (err) {
      broke = `starting workflows failed: ${(err as Error).message}`;
    }
  }
  if (broke === null)
    broke = await waitForJobs(env, project, params.jobs, Date.now() + params.phaseTimeoutMs, proc);
  const rampEnd = read(env, proc.pid, project);
  const jobs = env.simulator.stats().jobs.filter((j) => j.projectId === project);

  // 2. Steady: every job open, nothing starting or ending. It starts once every job has been polled
  // (this worker's first poll comes after a first wait on a workflow timer, whose workflow task
  // would otherwise fall in the window for the jobs created last, where (b) polls at once), and
  // half a cadence later, so that those jobs are in their polling rhythm too.
  const watch = new ResourceWatch(proc.pid);
  let steadyStart = rampEnd;
  if (broke === null)
    broke = await waitForFirstPolls(env, project, params.jobs, Date.now() + params.phaseTimeoutMs, proc);
  if (broke === null) {
    await sleep(params.cadenceMs / 2);
    steadyStart = read(env, proc.pid, project);
    await sleep(params.steadyCadences * params.cadenceMs);
  }
  watch.stop();
  const steadyEnd = read(env, proc.pid, project);
  checkAlive(proc);

  // 3. Release, each job at a random moment of one cadence, and drain.
  const releaseAt = Date.now();
  const timers = releaseWithinCadence(
    env,
    project,
    jobs.map((job) => job.id),
    params.cadenceMs,
  );
  let closes: Close[] = [];
  try {
    if (params.impl === 'plain-loop') {
      const outcome = broke === null ? await loopResult : null;
      if (outcome && 'line' in outcome) {
        closes = (outcome.line.outcomes as Array<{ jobId: string; detectedAt: number }>).map((o) => ({
          jobId: o.jobId,
          closedAt: o.detectedAt,
        }));
      } else if (outcome) {
        checkAlive(proc);
        broke = `the plain loop did not finish: ${String((outcome.error as Error).message).split('\n')[0]}`;
      }
    } else {
      if (broke === null)
        broke = await waitForClose(env.client, project, params.jobs, Date.now() + params.phaseTimeoutMs);
      if (broke !== null) await terminateLeftovers(env, project);
      closes =
        params.impl === 'worker'
          ? await closesFromVisibility(env.client, project)
          : await closesFromHistories(env.client, started);
    }
  } finally {
    for (const timer of timers) clearTimeout(timer);
  }

  const terminalAt = terminalTimes(env, project);
  const latencies = closes.flatMap((c) => {
    const at = c.jobId === null ? undefined : terminalAt.get(c.jobId);
    return at === undefined ? [] : [c.closedAt - at];
  });
  const sample = started.slice(0, params.historySample);
  const costs = await mapLimit(sample, 16, (s) => workflowCost(env.client, s.workflowId, s.runId));
  const detection =
    broke === null && started.length > 0 ? await splitDetection(env, started, terminalAt) : null;
  const counts = env.simulator.stats().requestsPerProjectEndpoint[project] ?? {};
  const requests = (counts.create ?? 0) + (counts.get ?? 0) + (counts.message ?? 0);
  const lastClose = closes.length > 0 ? Math.max(...closes.map((c) => c.closedAt)) : Date.now();
  const rampSeconds = (rampEnd.at - t0) / 1000;
  const drainSeconds = (lastClose - releaseAt) / 1000;
  const steadyPolls = steadyEnd.polls - steadyStart.polls;
  const steadySeconds = (steadyEnd.at - steadyStart.at) / 1000;
  const peakOpen = peakConcurrency(
    params.impl === 'plain-loop' ? jobs.map((j) => j.createdAt) : started.map((s) => s.startedAt),
    closes.map((c) => c.closedAt),
  );
  const peakRssMiB = Math.max(watch.peakRssMiB, steadyEnd.proc.rssMiB);
  return {
    impl: params.impl,
    variant: params.variant ?? '',
    jobs: params.jobs,
    cadenceMs: params.cadenceMs,
    workerEnv: params.workerEnv ?? {},
    completed: closes.length,
    rampSeconds,
    drainSeconds,
    throughput: closes.length / (rampSeconds + drainSeconds),
    peakOpen,
    latency:
      latencies.length === 0
        ? null
        : {
            p50: percentile(latencies, 50),
            p95: percentile(latencies, 95),
            p99: percentile(latencies, 99),
            max: Math.max(...latencies),
          },
    detection,
    steadyPolls,
    steadyPollsPerSecond: steadyPolls / steadySeconds,
    cpuPer1000Polls: cpuBetween(steadyStart, steadyEnd, steadyPolls / 1000),
    cpuPerStart: cpuBetween(idle, rampEnd, params.jobs),
    apiRequestsPerJob: requests / params.jobs,
    idleRssMiB: idle.proc.rssMiB,
    peakRssMiB,
    rssMiBPer1000Open: ((peakRssMiB - idle.proc.rssMiB) / params.jobs) * 1000,
    history:
      costs.length === 0
        ? null
        : {
            sampled: costs.length,
            eventsPerJob: mean(costs.map((c) => c.events)),
            actionsPerJob: mean(costs.map((c) => c.actions.total)),
            maxRunEvents: Math.max(...costs.map((c) => c.maxRunEvents)),
          },
    broke,
  };
}

/** Starts jobs 0 to `jobs` − 1 of a run, {@link START_CONCURRENCY} at a time. */
export function startLoadJobs(
  client: Client,
  params: Pick<LoadParams, 'impl' | 'cadenceMs'>,
  project: string,
  jobs: number,
): Promise<Started[]> {
  const indexes = Array.from({ length: jobs }, (_, i) => i);
  return mapLimit(indexes, START_CONCURRENCY, (i) => startLoadJob(client, params, project, i));
}

/** Starts job `index` of a run of `params.impl` (a Temporal implementation) on the project's task queue. */
export async function startLoadJob(
  client: Client,
  params: Pick<LoadParams, 'impl' | 'cadenceMs'>,
  project: string,
  index: number,
): Promise<Started> {
  if (params.impl === 'worker') {
    const handle = await startAgentJob(
      client,
      {
        projectId: project,
        prompt: PROMPT,
        poll: {
          initialInterval: params.cadenceMs,
          maxInterval: params.cadenceMs,
          backoffCoefficient: 1,
        },
      },
      { key: String(index), taskQueue: project },
    );
    return { workflowId: handle.workflowId, runId: await firstRunId(handle), startedAt: Date.now() };
  }
  // Both baseline workflows take the same input: the cadence as a fixed interval.
  const workflowType = params.impl === 'floor' ? FLOOR_WORKFLOW : POLL_BY_RETRY_WORKFLOW;
  const handle = await client.workflow.start<typeof floorWorkflow | typeof pollByRetryWorkflow>(
    workflowType,
    {
      taskQueue: project,
      workflowId: `${params.impl}/${project}/${index}`,
      args: [{ projectId: project, prompt: PROMPT, intervalMs: params.cadenceMs }],
    },
  );
  return { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, startedAt: Date.now() };
}

/** Waits until the simulator holds `expected` agent jobs of the project; null then, else why not. */
function waitForJobs(
  env: BenchEnvironment,
  project: string,
  expected: number,
  deadline: number,
  proc: MeasuredProcess,
): Promise<string | null> {
  const created = () => env.simulator.stats().jobsPerProject[project] ?? 0;
  return waitForCount(created, { expected, what: 'created', deadline, everyMs: 200, proc });
}

/** Waits until every one of the project's `expected` jobs has had a GET; null then, else why not. */
function waitForFirstPolls(
  env: BenchEnvironment,
  project: string,
  expected: number,
  deadline: number,
  proc: MeasuredProcess,
): Promise<string | null> {
  const polled = () =>
    env.simulator.stats().jobs.filter((j) => j.projectId === project && j.requests.get.count > 0).length;
  return waitForCount(polled, { expected, what: 'polled', deadline, everyMs: 500, proc });
}

/** Waits until `count()` reaches `expected` while the measured process lives; null, or what fell short. */
function waitForCount(
  count: () => number,
  options: { expected: number; what: string; deadline: number; everyMs: number; proc: MeasuredProcess },
): Promise<string | null> {
  const { expected, what, deadline, everyMs, proc } = options;
  return waitUntil<string | null>({
    check: () => {
      if (count() >= expected) return null;
      checkAlive(proc);
      return undefined;
    },
    deadline,
    everyMs,
    late: () => `only ${count()} of ${expected} agent jobs were ${what} in time`,
  });
}

function checkAlive(proc: MeasuredProcess): void {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
    throw new BenchmarkBroken(
      `the measured process exited (${proc.child.exitCode ?? proc.child.signalCode}):\n${proc.tail()}`,
    );
  }
  if (proc.failures() > 0) {
    throw new BenchmarkBroken(`the measured process reported failed workflow tasks:\n${proc.tail()}`);
  }
}

/**
 * Ends each agent job at a random moment of one cadence, so that detection latency covers every
 * point of a poll interval. Returns the timers, to clear if the release is abandoned.
 */
export function releaseWithinCadence(
  env: BenchEnvironment,
  project: string,
  jobIds: string[],
  cadenceMs: number,
): NodeJS.Timeout[] {
  return jobIds.map((id) =>
    setTimeout(() => env.simulator.archiveJob(project, id), Math.random() * cadenceMs),
  );
}

/**
 * Waits until `expected` workflows on the task queue have completed. Returns null then, or why not:
 * the deadline. A workflow that ended otherwise means the benchmark broke, and throws.
 */
export async function waitForClose(
  client: Client,
  taskQueue: string,
  expected: number,
  deadline: number,
): Promise<string | null> {
  let completed = 0;
  return waitUntil<string | null>({
    check: async () => {
      const { groups } = await client.workflow.count(`TaskQueue = "${taskQueue}" GROUP BY ExecutionStatus`);
      const byStatus = new Map(groups.map((g) => [String(g.groupValues[0]), g.count]));
      const bad = [...byStatus].filter(
        ([status]) => !['Running', 'Completed', 'ContinuedAsNew'].includes(status),
      );
      if (bad.length > 0) {
        throw new BenchmarkBroken(
          `workflows on ${taskQueue} ended badly: ${bad.map(([s, n]) => `${n} ${s}`).join(', ')}`,
        );
      }
      completed = byStatus.get('Completed') ?? 0;
      return completed >= expected ? null : undefined;
    },
    deadline,
    everyMs: 1_000,
    late: () => `${expected - completed} of ${expected} workflows still open at the deadline`,
  });
}

/**
 * Terminates what a run left open and waits until none of it runs, so later scenarios get the server
 * to themselves: the batch operation only starts the terminations, which the server works through
 * after the call returns (the wake scenario leaves 1,000 workflows to it).
 */
export async function terminateLeftovers(env: BenchEnvironment, taskQueue: string): Promise<void> {
  const running = `TaskQueue = "${taskQueue}" AND ExecutionStatus = "Running"`;
  await env.client.workflowService.startBatchOperation({
    namespace: env.namespace,
    jobId: randomUUID(),
    reason: 'benchmark run over',
    visibilityQuery: running,
    terminationOperation: {},
  });
  await waitUntil({
    check: async () => ((await env.client.workflow.count(running)).count === 0 ? true : undefined),
    deadline: Date.now() + LEFTOVERS_TIMEOUT_MS,
    everyMs: 1_000,
    late: () => {
      throw new BenchmarkBroken(
        `workflows on ${taskQueue} still running ${LEFTOVERS_TIMEOUT_MS / 1000} s after their termination`,
      );
    },
  });
}

/** How long terminating a run's leftovers may take: thousands of workflows, on a busy machine. */
const LEFTOVERS_TIMEOUT_MS = 5 * 60_000;

interface Close {
  jobId: string | null;
  closedAt: number;
}

/** Close times and agent job IDs of this worker's workflows, from visibility (AgentJobId is a search attribute). */
async function closesFromVisibility(client: Client, taskQueue: string): Promise<Close[]> {
  const closes: Close[] = [];
  const query = `TaskQueue = "${taskQueue}" AND ExecutionStatus = "Completed"`;
  for await (const info of client.workflow.list({ query, pageSize: 1000 })) {
    if (!info.closeTime) continue;
    closes.push({
      jobId: info.typedSearchAttributes.get(SearchAttributes.jobId) ?? null,
      closedAt: info.closeTime.getTime(),
    });
  }
  return closes;
}

/** Close times and agent job IDs of the baselines' workflows, from their histories (the result is the record). */
async function closesFromHistories(client: Client, started: Started[]): Promise<Close[]> {
  const costs = await mapLimit(started, 16, (s) => workflowCost(client, s.workflowId, s.runId));
  return costs
    .filter((c) => c.closedAt !== null)
    .map((c) => ({
      jobId: (c.result as AgentJobRecord | undefined)?.id ?? null,
      closedAt: c.closedAt as number,
    }));
}

/** The detection split (./history.ts) of {@link DETECTION_SAMPLE} of the run's workflows, p50 and p99 of each part. */
async function splitDetection(
  env: BenchEnvironment,
  started: Started[],
  terminalAt: Map<string, number>,
): Promise<LoadRun['detection']> {
  const every = Math.max(1, Math.floor(started.length / DETECTION_SAMPLE));
  const sample = started.filter((_, i) => i % every === 0).slice(0, DETECTION_SAMPLE);
  const split = await detectionSplit(env.client, sample, terminalAt);
  const at = (p: number) => perPart((part) => percentile(split[part], p));
  return split.wait.length === 0 ? null : { sampled: split.wait.length, p50: at(50), p99: at(99) };
}

/** Epoch ms at which the simulator made each job of `project` terminal. */
export function terminalTimes(env: BenchEnvironment, project: string): Map<string, number> {
  const times = new Map<string, number>();
  for (const job of env.simulator.stats().jobs) {
    if (job.projectId === project && job.terminalAt !== null) times.set(job.id, job.terminalAt);
  }
  return times;
}

/** The most intervals [start, close) open at one moment; a start with no close stays open. */
function peakConcurrency(starts: number[], closes: number[]): number {
  const events = [...starts.map((t) => [t, 1] as const), ...closes.map((t) => [t, -1] as const)];
  // Closes before starts at the same instant: a job that ended is no longer open.
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let peak = 0;
  for (const [, delta] of events) {
    open += delta;
    peak = Math.max(peak, open);
  }
  return peak;
}
