/**
 * The load scenario: N agent jobs started at once, polled at a fixed cadence until they end, by
 * one of three implementations — this worker, baseline (a) the plain Node loop, baseline (b) the
 * poll-by-activity-retry workflow — each in a fresh process on its own task queue and simulator
 * project. One run yields throughput, detection latency, CPU per poll and memory per open workflow.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { startAgentJob } from '../../src/client/index.js';
import { SearchAttributes } from '../../src/contract.js';
import type { AgentJobRecord } from '../../src/contract.js';
import { POLL_BY_RETRY_WORKFLOW, type pollByRetryWorkflow } from '../baselines/retry-workflow.js';
import { BENCH_API_KEY, type BenchEnvironment } from '../environment.js';
import { workflowCost } from '../history.js';
import { mapLimit } from '../pool.js';
import { spawnMeasured, writeStdin, type MeasuredProcess } from '../processes.js';
import { ResourceWatch, sampleProcess, type ProcessSample } from '../resources.js';
import { percentile } from '../stats.js';

/** The three implementations compared. */
export const IMPLEMENTATIONS = ['worker', 'plain-loop', 'poll-by-retry'] as const;
/** One of {@link IMPLEMENTATIONS}. */
export type Implementation = (typeof IMPLEMENTATIONS)[number];

/** What to run. */
export interface LoadParams {
  impl: Implementation;
  jobs: number;
  /** Poll interval in force (fixed: initial = max, coefficient 1). */
  cadenceMs: number;
  /** How long each agent job stays active at the simulator. */
  jobMs: number;
  /** Give up (and call the run broken) when not every job has ended by then. */
  deadlineMs: number;
  /** Histories fetched to count events and actions per job (Temporal implementations only). */
  historySample: number;
  /** Extra worker settings (cache size, concurrency), as environment variables. */
  workerEnv?: Record<string, string>;
}

/** What one run measured. Times in ms unless named otherwise. */
export interface LoadRun {
  impl: Implementation;
  jobs: number;
  cadenceMs: number;
  jobMs: number;
  workerEnv: Record<string, string>;
  completed: number;
  /** Seconds from the first start to the last close. */
  wallSeconds: number;
  /** Seconds to submit every start (or create, for the plain loop). */
  submitSeconds: number;
  /** Agent jobs completed per second, end to end. */
  throughput: number;
  /** Most workflows (jobs) open at the same moment. */
  peakOpen: number;
  latency: { p50: number; p95: number; p99: number; max: number } | null;
  polls: number;
  apiRequestsPerJob: number;
  cpuSeconds: number;
  cpuSecondsPer1000Polls: number;
  idleRssMiB: number;
  peakRssMiB: number;
  /** (Peak − idle resident memory) per 1,000 open workflows. */
  rssMiBPer1000Open: number;
  /** From sampled histories; null for the plain loop. */
  history: { sampled: number; eventsPerJob: number; actionsPerJob: number; maxRunEvents: number } | null;
  /** Why the run did not complete, or null. */
  broke: string | null;
}

/** A workflow the benchmark failed to see through, which means the benchmark itself broke. */
export class BenchmarkBroken extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BenchmarkBroken';
  }
}

/** Workflow starts in flight at once: enough to start thousands in seconds, few enough not to flood. */
const START_CONCURRENCY = 64;
const PROMPT = 'Benchmark agent job: add a changelog entry.';

/** Runs one load scenario. */
export async function runLoad(env: BenchEnvironment, params: LoadParams): Promise<LoadRun> {
  const project = `bench-${params.impl}-${params.jobs}-${randomUUID().slice(0, 8)}`;
  env.simulator.setScenario(project, { durationMs: params.jobMs, outcome: 'pr' });
  if (params.impl === 'plain-loop') return runPlainLoop(env, params, project);
  return runTemporal(env, params, project);
}

interface Started {
  workflowId: string;
  runId: string;
  startedAt: number;
}

async function runTemporal(env: BenchEnvironment, params: LoadParams, project: string): Promise<LoadRun> {
  const taskQueue = project;
  const workerEnv = await env.workerEnv(taskQueue, params.workerEnv);
  const proc =
    params.impl === 'worker'
      ? spawnMeasured([env.build.workerEntry], workerEnv)
      : spawnMeasured([env.build.retryWorkerEntry], {
          ...workerEnv,
          BENCH_WORKFLOW_BUNDLE: env.build.retryBundlePath,
        });
  try {
    await proc.waitForLine('worker running', 60_000);
    const idle = await settledSample(proc.pid);
    const watch = new ResourceWatch(proc.pid);
    const t0 = Date.now();
    const deadline = t0 + params.deadlineMs;
    let broke: string | null = null;
    let started: Started[] = [];
    try {
      started = await mapLimit(range(params.jobs), START_CONCURRENCY, (i) => start(env.client, params, project, i));
    } catch (err) {
      broke = `starting workflows failed: ${(err as Error).message}`;
    }
    const submitSeconds = (Date.now() - t0) / 1000;
    if (broke === null) broke = await waitForClose(env.client, taskQueue, params.jobs, deadline);
    watch.stop();
    const end = sampleProcess(proc.pid);
    await proc.stop();
    if (broke !== null) await terminateLeftovers(env, taskQueue);

    const terminalAt = terminalTimes(env, project);
    const closes =
      params.impl === 'worker'
        ? await closesFromVisibility(env.client, taskQueue)
        : await closesFromHistories(env.client, started);
    const latencies: number[] = [];
    for (const close of closes) {
      const at = close.jobId === null ? undefined : terminalAt.get(close.jobId);
      if (at !== undefined) latencies.push(close.closedAt - at);
    }
    const sample = started.slice(0, params.historySample);
    const costs = await mapLimit(sample, 16, (s) => workflowCost(env.client, s.workflowId, s.runId));
    return summarize(env, params, project, {
      t0,
      submitSeconds,
      starts: started.map((s) => s.startedAt),
      closes: closes.map((c) => c.closedAt),
      latencies,
      idle,
      end,
      peakRssMiB: watch.peakRssMiB,
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
    });
  } finally {
    await proc.stop();
  }
}

async function start(client: Client, params: LoadParams, project: string, index: number): Promise<Started> {
  if (params.impl === 'worker') {
    const handle = await startAgentJob(
      client,
      {
        projectId: project,
        prompt: PROMPT,
        poll: { initialInterval: params.cadenceMs, maxInterval: params.cadenceMs, backoffCoefficient: 1 },
      },
      { key: String(index), taskQueue: project },
    );
    return { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, startedAt: Date.now() };
  }
  const handle = await client.workflow.start<typeof pollByRetryWorkflow>(POLL_BY_RETRY_WORKFLOW, {
    taskQueue: project,
    workflowId: `poll-by-retry/${project}/${index}`,
    args: [{ projectId: project, prompt: PROMPT, intervalMs: params.cadenceMs }],
  });
  return { workflowId: handle.workflowId, runId: handle.firstExecutionRunId, startedAt: Date.now() };
}

/**
 * Waits until `expected` workflows on the task queue have completed. Returns null then, or why not:
 * the deadline. A failed workflow means the benchmark broke and throws.
 */
async function waitForClose(client: Client, taskQueue: string, expected: number, deadline: number): Promise<string | null> {
  for (;;) {
    const { groups } = await client.workflow.count(`TaskQueue = "${taskQueue}" GROUP BY ExecutionStatus`);
    const byStatus = new Map(groups.map((g) => [String(g.groupValues[0]), g.count]));
    const bad = [...byStatus].filter(([status]) => !['Running', 'Completed', 'ContinuedAsNew'].includes(status));
    if (bad.length > 0) {
      throw new BenchmarkBroken(
        `workflows on ${taskQueue} ended badly: ${bad.map(([s, n]) => `${n} ${s}`).join(', ')}`,
      );
    }
    const completed = byStatus.get('Completed') ?? 0;
    if (completed >= expected) return null;
    if (Date.now() > deadline) {
      return `${expected - completed} of ${expected} jobs still open at the deadline`;
    }
    await sleep(1_000);
  }
}

/** Terminates what a broken run left open, so later scenarios get the server to themselves. */
async function terminateLeftovers(env: BenchEnvironment, taskQueue: string): Promise<void> {
  await env.client.workflowService.startBatchOperation({
    namespace: env.namespace,
    jobId: randomUUID(),
    reason: 'benchmark run over',
    visibilityQuery: `TaskQueue = "${taskQueue}" AND ExecutionStatus = "Running"`,
    terminationOperation: {},
  });
}

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

/** Close times and agent job IDs of the baseline's workflows, from their histories (their result is the record). */
async function closesFromHistories(client: Client, started: Started[]): Promise<Close[]> {
  const costs = await mapLimit(started, 16, (s) => workflowCost(client, s.workflowId, s.runId));
  return costs
    .filter((c) => c.closedAt !== null)
    .map((c) => ({ jobId: (c.result as AgentJobRecord | undefined)?.id ?? null, closedAt: c.closedAt as number }));
}

async function runPlainLoop(env: BenchEnvironment, params: LoadParams, project: string): Promise<LoadRun> {
  const proc = spawnMeasured(
    [
      env.build.plainLoopEntry,
      '--base-url',
      env.simulator.url,
      '--project',
      project,
      '--jobs',
      String(params.jobs),
      '--interval-ms',
      String(params.cadenceMs),
    ],
    { AGENT_API_KEY: BENCH_API_KEY },
    { stdin: 'pipe' },
  );
  try {
    await proc.waitForLine('ready', 60_000);
    const idle = await settledSample(proc.pid);
    const watch = new ResourceWatch(proc.pid);
    const t0 = Date.now();
    await writeStdin(proc, 'go\n');
    let broke: string | null = null;
    let outcomes: Array<{ jobId: string; detectedAt: number }> = [];
    try {
      const { line } = await proc.waitForLine('result', params.deadlineMs);
      outcomes = line.outcomes as typeof outcomes;
    } catch (err) {
      if (proc.child.exitCode !== null) throw new BenchmarkBroken('the plain loop failed', { cause: err });
      broke = `not every job ended within ${params.deadlineMs / 1000}s`;
    }
    watch.stop();
    const end = sampleProcess(proc.pid);
    proc.child.stdin?.end();
    await proc.exited;
    const terminalAt = terminalTimes(env, project);
    const latencies = outcomes.flatMap((o) => {
      const at = terminalAt.get(o.jobId);
      return at === undefined ? [] : [o.detectedAt - at];
    });
    const creates = env.simulator.stats().jobs.filter((j) => j.projectId === project).map((j) => j.createdAt);
    return summarize(env, params, project, {
      t0,
      submitSeconds: creates.length > 0 ? (Math.max(...creates) - t0) / 1000 : 0,
      starts: creates,
      closes: outcomes.map((o) => o.detectedAt),
      latencies,
      idle,
      end,
      peakRssMiB: watch.peakRssMiB,
      history: null,
      broke,
    });
  } finally {
    await proc.stop();
  }
}

/** Epoch ms at which the simulator made each job of `project` terminal. */
function terminalTimes(env: BenchEnvironment, project: string): Map<string, number> {
  const times = new Map<string, number>();
  for (const job of env.simulator.stats().jobs) {
    if (job.projectId === project && job.terminalAt !== null) times.set(job.id, job.terminalAt);
  }
  return times;
}

/** A reading after the process has been idle for a moment, so start-up work is not in the window. */
async function settledSample(pid: number): Promise<ProcessSample> {
  await sleep(500);
  return sampleProcess(pid);
}

interface Measured {
  t0: number;
  submitSeconds: number;
  starts: number[];
  closes: number[];
  latencies: number[];
  idle: ProcessSample;
  end: ProcessSample;
  peakRssMiB: number;
  history: LoadRun['history'];
  broke: string | null;
}

function summarize(env: BenchEnvironment, params: LoadParams, project: string, m: Measured): LoadRun {
  const counts = env.simulator.stats().requestsPerProjectEndpoint[project] ?? {};
  const polls = counts.get ?? 0;
  const requests = (counts.create ?? 0) + polls + (counts.message ?? 0);
  const completed = m.closes.length;
  const lastClose = completed > 0 ? Math.max(...m.closes) : Date.now();
  const wallSeconds = (lastClose - m.t0) / 1000;
  const peakOpen = peakConcurrency(m.starts, m.closes);
  const cpuSeconds = m.end.cpuSeconds - m.idle.cpuSeconds;
  const peakRssMiB = Math.max(m.peakRssMiB, m.end.rssMiB);
  return {
    impl: params.impl,
    jobs: params.jobs,
    cadenceMs: params.cadenceMs,
    jobMs: params.jobMs,
    workerEnv: params.workerEnv ?? {},
    completed,
    wallSeconds,
    submitSeconds: m.submitSeconds,
    throughput: completed / wallSeconds,
    peakOpen,
    latency:
      m.latencies.length === 0
        ? null
        : {
            p50: percentile(m.latencies, 50),
            p95: percentile(m.latencies, 95),
            p99: percentile(m.latencies, 99),
            max: Math.max(...m.latencies),
          },
    polls,
    apiRequestsPerJob: requests / params.jobs,
    cpuSeconds,
    cpuSecondsPer1000Polls: polls > 0 ? (cpuSeconds / polls) * 1000 : Number.NaN,
    idleRssMiB: m.idle.rssMiB,
    peakRssMiB,
    rssMiBPer1000Open: peakOpen > 0 ? ((peakRssMiB - m.idle.rssMiB) / peakOpen) * 1000 : Number.NaN,
    history: m.history,
    broke: m.broke,
  };
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

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

function mean(values: number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}
