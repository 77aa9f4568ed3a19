/**
 * The load scenario: N agent jobs in flight at once, polled at a fixed cadence, by one of four
 * implementations (this worker, (a) the plain Node loop, (b) the poll-by-activity-retry workflow,
 * (c) the floor of this design), each in a fresh process on its own task queue and simulator
 * project. One run ramps up N jobs that the simulator holds active, measures a steady window with
 * all N open, then releases every job and drains (docs/PERFORMANCE.md, "Load runs"). Holding the
 * jobs until all N are open is what makes "N concurrent jobs" true: creating thousands of
 * workflows takes tens of seconds here, longer than a job of a few cadences lasts.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { startAgentJob } from '../../src/client/index.js';
import { SearchAttributes, type AgentJobRecord } from '../../src/contract.js';
import { FLOOR_WORKFLOW, type floorWorkflow } from '../baselines/floor-workflow.js';
import { POLL_BY_RETRY_WORKFLOW, type pollByRetryWorkflow } from '../baselines/retry-workflow.js';
import type { BenchEnvironment } from '../environment.js';
import type { Endpoint } from '../../src/simulator/index.js';
import { DETECTION_SAMPLE, detectionSplit, firstRunId, perPart, workflowCost } from '../history.js';
import { mapLimit } from '../../src/client/map-limit.js';
import { runPlainLoop, type MeasuredProcess } from '../processes.js';
import { sampleProcess, watchPeakRss } from '../resources.js';
import { fixedSchedule, type Schedule } from '../schedule.js';
import { mean, percentile } from '../stats.js';
import { waitUntil } from '../wait.js';
import type { ChoiceSide, Implementation, WorkerImplementation } from '../catalogue.js';

/** What to run: one implementation at one load point, and for this worker a side of a design choice. */
export type LoadParams = ChoiceSide & {
  impl: Implementation;
  jobs: number;
  /** Poll interval in force (fixed: initial = max, coefficient 1). */
  cadenceMs: number;
  /** Length of the steady window, in whole cadences. */
  steadyCadences: number;
};

/**
 * How long a phase of a run at N jobs may take before the run is called broken: long enough for
 * the slowest seen at N on this machine when shared (starting 1,000 workflows took from 60 to
 * 250 s), with room to spare.
 */
export function phaseTimeoutMs(jobs: number, cadenceMs: number): number {
  return Math.max(90_000, jobs * 400 + 10 * cadenceMs);
}

/** Histories fetched to count events and actions per job (Temporal implementations only). */
const HISTORY_SAMPLE = 20;
/** Workflow starts in flight at once: enough to start thousands quickly, few enough not to flood. */
const START_CONCURRENCY = 64;
const PROMPT = 'Benchmark agent job: add a changelog entry.';

/** What one load run measured. Times in ms unless named otherwise. */
export type LoadRun = Awaited<ReturnType<typeof runLoad>>;

/** Runs one load scenario; its process runs on until the environment stops the scenario's processes. */
export async function runLoad(env: BenchEnvironment, params: LoadParams) {
  const { impl, jobs, cadenceMs } = params;
  const project = env.newProject(`load-${impl}-${jobs}`);
  const schedule = fixedSchedule(cadenceMs);
  const proc =
    impl === 'plain-loop'
      ? await env.startPlainLoop(env.simulator.url, project, jobs, schedule)
      : await env.startWorker(impl, project, { overrides: params.workerEnv, sealed: params.sealed });
  const timeoutMs = phaseTimeoutMs(jobs, cadenceMs);
  const deadline = () => Date.now() + timeoutMs;
  /** A clock over the three busy processes and the polls so far, read at phase boundaries. */
  const read = () => {
    const bench = process.cpuUsage();
    return {
      at: Date.now(),
      proc: sampleProcess(proc.pid),
      server: env.temporal.pid === null ? Number.NaN : sampleProcess(env.temporal.pid).cpuSeconds,
      bench: (bench.user + bench.system) / 1e6,
      polls: env.requestsOf(project).get ?? 0,
    };
  };
  await sleep(500);
  const idle = read();
  let broke: string | null = null;
  let started: Started[] = [];
  let loopResult: Promise<{ outcomes: Close[] } | { error: unknown }> | null = null;

  // 1. Ramp.
  if (impl === 'plain-loop') {
    // The result only comes after the release; until it is awaited there, a failure is kept as a value.
    loopResult = runPlainLoop(proc, timeoutMs * 3).then(
      (line) => ({ outcomes: line.outcomes as Close[] }),
      (error: unknown) => ({ error }),
    );
  } else {
    try {
      started = await startJobs(
        env.clientOf(params.sealed ?? false),
        { impl, taskQueue: project, schedule },
        project,
        jobs,
      );
    } catch (err) {
      broke = `starting workflows failed: ${(err as Error).message}`;
    }
  }
  const created = () => env.simulator.stats().jobsPerProject[project] ?? 0;
  broke ??= await waitForCount(created, jobs, 'created', deadline(), proc);
  const rampEnd = read();
  const agentJobs = env.jobsOf(project);

  // 2. Steady: every job open, nothing starting or ending, from half a cadence after every job's
  // first poll, so that no first wait or first workflow task falls in it.
  const watch = watchPeakRss(proc.pid);
  let steadyStart = rampEnd;
  const polled = () => env.jobsOf(project).filter((j) => j.requests.get.count > 0).length;
  broke ??= await waitForCount(polled, jobs, 'polled', deadline(), proc);
  if (broke === null) {
    await sleep(cadenceMs / 2);
    steadyStart = read();
    await sleep(params.steadyCadences * cadenceMs);
  }
  const watchedPeakMiB = watch.stop();
  const steadyEnd = read();
  checkAlive(proc);

  // 3. Release and drain: each job ends at a random moment of a cadence, to cover every point of a poll interval.
  const releaseAt = Date.now();
  const timers = agentJobs.map((job) =>
    setTimeout(() => env.simulator.archiveJob(project, job.id), Math.random() * cadenceMs),
  );
  let closes: Close[] = [];
  try {
    if (impl === 'plain-loop') {
      const outcome = broke === null ? await loopResult : null;
      if (outcome && 'outcomes' in outcome) closes = outcome.outcomes;
      else if (outcome) {
        checkAlive(proc);
        broke = `the plain loop did not finish: ${String((outcome.error as Error).message).split('\n')[0]}`;
      }
    } else {
      broke ??= await waitForClose(env.client, project, jobs, deadline());
      if (broke !== null) await terminateLeftovers(env, project);
      closes =
        impl === 'worker'
          ? await closesFromVisibility(env.client, project)
          : await closesFromHistories(env.client, started);
    }
  } finally {
    for (const timer of timers) clearTimeout(timer);
  }

  // When the simulator made each job terminal.
  const terminalAt = new Map(
    env.jobsOf(project).flatMap((j) => (j.terminalAt === null ? [] : [[j.id, j.terminalAt] as const])),
  );
  const latencies = closes.flatMap((c) => {
    const at = c.jobId === null ? undefined : terminalAt.get(c.jobId);
    return at === undefined ? [] : [c.closedAt - at];
  });
  const sample = started.slice(0, HISTORY_SAMPLE);
  const costs = await mapLimit(sample, 16, (s) => workflowCost(env.client, s.workflowId, s.runId));
  const lastClose = closes.length > 0 ? Math.max(...closes.map((c) => c.closedAt)) : Date.now();
  const rampSeconds = (rampEnd.at - idle.at) / 1000;
  const drainSeconds = (lastClose - releaseAt) / 1000;
  const steadyPolls = steadyEnd.polls - steadyStart.polls;
  const peakRssMiB = Math.max(watchedPeakMiB, steadyEnd.proc.rssMiB);
  /** CPU seconds per `per` of the measured process, the Temporal server and this process (simulator, client). */
  const cpuBetween = (a: typeof idle, b: typeof idle, per: number) => ({
    measured: (b.proc.cpuSeconds - a.proc.cpuSeconds) / per,
    server: (b.server - a.server) / per,
    bench: (b.bench - a.bench) / per,
  });
  const at = (p: number) => percentile(latencies, p);
  return {
    impl,
    variant: params.variant ?? '',
    jobs,
    cadenceMs,
    workerEnv: params.workerEnv ?? {},
    completed: closes.length,
    /** From the first start until every agent job existed, and from the release until the last close. */
    rampSeconds,
    drainSeconds,
    /** Agent jobs completed per second end to end, the hold left out. */
    throughput: closes.length / (rampSeconds + drainSeconds),
    /** From the simulator's terminal moment to the workflow's close (or the loop's detection). */
    latency:
      latencies.length === 0 ? null : { p50: at(50), p95: at(95), p99: at(99), max: Math.max(...latencies) },
    /** From the histories of a sample of the closed workflows; absent in older runs. */
    detection: broke === null && started.length > 0 ? await splitDetection(env, started, terminalAt) : null,
    steadyPolls,
    steadyPollsPerSecond: steadyPolls / ((steadyEnd.at - steadyStart.at) / 1000),
    cpuPer1000Polls: cpuBetween(steadyStart, steadyEnd, steadyPolls / 1000),
    cpuPerStart: cpuBetween(idle, rampEnd, jobs),
    apiRequestsPerJob: apiRequests(env.requestsOf(project)) / jobs,
    idleRssMiB: idle.proc.rssMiB,
    peakRssMiB,
    /** (Peak − idle resident memory) per 1,000 open workflows. */
    rssMiBPer1000Open: ((peakRssMiB - idle.proc.rssMiB) / jobs) * 1000,
    /** From sampled histories; null for the plain loop. */
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

/** A started workflow: its ID and first run. */
type Started = Awaited<ReturnType<typeof startJob>>;

/** How a run starts its jobs: the implementation, on its task queue, every job on one schedule. */
export interface JobStart {
  impl: WorkerImplementation;
  taskQueue: string;
  schedule: Schedule;
}

/** Starts `jobs` jobs of `project`, from index `from` on, {@link START_CONCURRENCY} at a time. */
export function startJobs(
  client: Client,
  how: JobStart,
  project: string,
  jobs: number,
  from = 0,
): Promise<Started[]> {
  const indexes = Array.from({ length: jobs }, (_, i) => from + i);
  return mapLimit(indexes, START_CONCURRENCY, (i) => startJob(client, how, project, i));
}

/** Starts job `index` of `project` with a Temporal implementation. */
export async function startJob(client: Client, how: JobStart, project: string, index: number) {
  const { impl, taskQueue, schedule } = how;
  const handle =
    impl === 'worker'
      ? await startAgentJob(
          client,
          {
            projectId: project,
            prompt: PROMPT,
            poll: {
              initialInterval: schedule.initialIntervalMs,
              maxInterval: schedule.maxIntervalMs,
              backoffCoefficient: schedule.backoffCoefficient,
            },
          },
          { key: String(index), taskQueue },
        )
      : // (b) polls on the whole schedule, its retry policy; (c) waits its first interval each time.
        await client.workflow.start<typeof floorWorkflow | typeof pollByRetryWorkflow>(
          impl === 'floor' ? FLOOR_WORKFLOW : POLL_BY_RETRY_WORKFLOW,
          {
            taskQueue,
            workflowId: `${impl}/${project}/${index}`,
            args: [{ projectId: project, prompt: PROMPT, schedule }],
          },
        );
  return { workflowId: handle.workflowId, runId: await firstRunId(handle) };
}

/** Waits until `count()` reaches `expected` while the measured process lives; null, or what fell short. */
export function waitForCount(
  count: () => number,
  expected: number,
  what: string,
  deadline: number,
  proc: MeasuredProcess,
): Promise<string | null> {
  return waitUntil<string | null>({
    check: () => {
      if (count() >= expected) return null;
      checkAlive(proc);
      return undefined;
    },
    deadline,
    everyMs: 250,
    late: () => `only ${count()} of ${expected} agent jobs were ${what} in time`,
  });
}

function checkAlive(proc: MeasuredProcess): void {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) {
    throw new Error(
      `the measured process exited (${proc.child.exitCode ?? proc.child.signalCode}):\n${proc.tail()}`,
    );
  }
  if (proc.failures() > 0) {
    throw new Error(`the measured process reported failed workflow tasks:\n${proc.tail()}`);
  }
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
        throw new Error(
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
    namespace: env.temporal.namespace,
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
      throw new Error(
        `workflows on ${taskQueue} still running ${LEFTOVERS_TIMEOUT_MS / 1000} s after their termination`,
      );
    },
  });
}

/** How long terminating a run's leftovers may take: thousands of workflows, on a busy machine. */
const LEFTOVERS_TIMEOUT_MS = 5 * 60_000;

/** When a job's end was seen: its workflow's close, or the plain loop's read of the terminal record. */
type Close = Awaited<ReturnType<typeof closesFromHistories>>[number];

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
async function closesFromHistories(client: Client, started: Started[]) {
  const costs = await mapLimit(started, 16, (s) => workflowCost(client, s.workflowId, s.runId));
  return costs
    .filter((c) => c.closedAt !== null)
    .map((c) => ({
      jobId: (c.result as AgentJobRecord | undefined)?.id ?? null,
      closedAt: c.closedAt as number,
    }));
}

/** The detection split (./history.ts) of {@link DETECTION_SAMPLE} of the run's workflows, p50 and p99 of each part. */
async function splitDetection(env: BenchEnvironment, started: Started[], terminalAt: Map<string, number>) {
  const every = Math.max(1, Math.floor(started.length / DETECTION_SAMPLE));
  const sample = started.filter((_, i) => i % every === 0).slice(0, DETECTION_SAMPLE);
  const split = await detectionSplit(env.client, sample, terminalAt);
  const at = (p: number) => perPart((part) => percentile(split[part], p));
  return split.wait.length === 0 ? null : { sampled: split.wait.length, p50: at(50), p99: at(99) };
}

/** A project's API requests at the simulator (its counts by endpoint): its creates, GETs and messages. */
export function apiRequests(counts: Partial<Record<Endpoint, number>>): number {
  return (counts.create ?? 0) + (counts.get ?? 0) + (counts.message ?? 0);
}
