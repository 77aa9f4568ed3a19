/**
 * Cost per job for jobs that last 1 minute, 10 minutes and 1 hour (and, in full mode, 6 hours, the
 * default timeout, whose ~365 polls span three continue-as-new runs), counted from real histories
 * and the simulator's request counters. How an hour fits in seconds (the schedule replayed, then run
 * with every interval divided by `scale` against a job that ends after the poll before the last),
 * and why the job's length is not scaled too: docs/PERFORMANCE.md, "Cost per job".
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { RunningSimulator } from '../../src/simulator/index.js';
import { startBenchSimulator, type BenchEnvironment } from '../environment.js';
import { workflowCost, type WorkflowCost } from '../history.js';
import { runPlainLoop } from '../processes.js';
import { replay, scaleSchedule } from '../schedule.js';
import { groupBy, mean, spread, sum, type Spread } from '../stats.js';
import { waitUntil } from '../wait.js';
import { POLLS_PER_RUN } from '../../src/workflows/agent-job/run.js';
import type { CostVariant, WorkerImplementation } from '../catalogue.js';
import { apiRequests, startJob } from './load.js';

/** What to run. */
export interface CostParams {
  variants: CostVariant[];
  /** Real-time job lengths. */
  jobLengthsMs: number[];
  /** The schedule runs this many times faster than real time. */
  scale: number;
  /** Jobs per length and variant. */
  samples: number;
  /** Jobs of more polls are extrapolated, not run: each poll takes a second or more, so this bounds the scenario. */
  maxMeasuredPolls: number;
  log: (line: string) => void;
}

/**
 * Time allowed per poll on top of its scaled interval: workflow tasks and an activity take tens of
 * milliseconds, several times that on a busy machine, and a poll by retry waits at least the
 * server's one-second timer. It only bounds a stuck run; it measures nothing.
 */
const POLL_OVERHEAD_ALLOWANCE_MS = 2_500;

/** One job to run: its project at the simulator is its own, so requests count per job. */
interface Cell {
  variant: CostVariant;
  jobLengthMs: number;
  project: string;
  /** The poll after which the job reads terminal. */
  polls: number;
}

/** Runs every variant at every length at once (the load is a few polls per second) and counts. */
export async function runCost(env: BenchEnvironment, params: CostParams): Promise<CostRow[]> {
  const cells: Cell[] = [];
  for (const variant of params.variants) {
    for (const jobLengthMs of params.jobLengthsMs) {
      const polls = realTime(variant, jobLengthMs).polls.median;
      if (polls > params.maxMeasuredPolls) continue;
      for (let i = 0; i < params.samples; i++) {
        cells.push({
          variant,
          jobLengthMs,
          project: `cost-${variant.impl}-${randomUUID().slice(0, 8)}`,
          polls,
        });
      }
    }
  }
  const simulator = await startCountingSimulator(cells);
  try {
    const queues = new Map<WorkerImplementation, string>();
    for (const impl of ['worker', 'poll-by-retry'] as const) {
      const taskQueue = `cost-${impl}-${randomUUID().slice(0, 8)}`;
      await env.startWorker(impl, taskQueue, { overrides: { AGENT_API_BASE_URL: simulator.url } });
      queues.set(impl, taskQueue);
    }
    const slowest = Math.max(
      ...cells.map(
        (c) => c.polls * (c.variant.schedule.maxIntervalMs / params.scale + POLL_OVERHEAD_ALLOWANCE_MS),
      ),
    );
    const deadline = Date.now() + slowest + 60_000;
    // The plain loop's polls, like every variant's, are the GETs the simulator counts.
    const measure = async (cell: Cell): Promise<WorkflowCost | null> => {
      const { impl } = cell.variant;
      const schedule = scaleSchedule(cell.variant.schedule, params.scale);
      if (impl !== 'plain-loop') {
        const how = { impl, taskQueue: queues.get(impl) as string, schedule };
        const { workflowId, runId } = await startJob(env.client, how, cell.project, 0);
        return waitForCost(env.client, workflowId, runId, deadline);
      }
      // A plain-loop process per cell: the loop takes one project.
      const proc = await env.startPlainLoop(simulator.url, cell.project, 1, schedule);
      await runPlainLoop(proc, Math.max(1_000, deadline - Date.now()));
      proc.child.stdin?.end();
      return null;
    };
    const samples = new Map(
      await Promise.all(cells.map(async (cell) => [cell, await measure(cell)] as const)),
    );
    params.log(`  cost: ${cells.length} jobs done`);
    const rows = measuredRows(simulator, cells, samples, params);
    return [...rows, ...extrapolatedRows(rows, params)];
  } finally {
    // The workers poll this simulator: they stop before it does.
    await env.stopProcesses();
    await simulator.stop();
  }
}

/** The polls a variant takes for a job of `jobLengthMs` at real time, and its mean detection delay. */
function realTime(variant: CostVariant, jobLengthMs: number): { polls: Spread; meanDelayMs: number } {
  if (variant.impl !== 'poll-by-retry') return replay(jobLengthMs, variant.schedule);
  // A retry policy has no jitter, and its first attempt runs at once, before the first interval.
  const replayed = replay(jobLengthMs, variant.schedule, { jittered: false });
  const polls = replayed.polls.median + 1;
  return { polls: exact(polls), meanDelayMs: replayed.meanDelayMs };
}

/**
 * A simulator of its own whose request log ends each cell's agent job right after the poll before
 * its last: the log line is written once the response is out, and the next poll comes an interval
 * later, so the last poll always reads the terminal record.
 */
function startCountingSimulator(cells: Cell[]): Promise<RunningSimulator> {
  const byProject = new Map(cells.map((c) => [c.project, { cell: c, gets: 0 }]));
  let simulator: RunningSimulator | null = null;
  const end = (project: string, jobId: string | undefined) => {
    const id = jobId ?? simulator?.stats().jobs.find((j) => j.projectId === project)?.id;
    if (id !== undefined) simulator?.archiveJob(project, id);
  };
  return startBenchSimulator({
    // Held active until the count ends it.
    defaultScenario: { durationMs: 7 * 24 * 60 * 60_000, outcome: 'pr' },
    log: (line) => {
      const { method, path, status } = JSON.parse(line) as {
        method: string;
        path: string;
        status: number | null;
      };
      const match = /^\/v2\/agent\/([^/]+)\/job(?:\/([^/]+))?$/.exec(path);
      const entry = match ? byProject.get(decodeURIComponent(match[1] as string)) : undefined;
      if (!match || !entry || status === null || status >= 300) return;
      if (method === 'GET') entry.gets++;
      if (entry.gets === entry.cell.polls - 1) {
        end(entry.cell.project, match[2] === undefined ? undefined : decodeURIComponent(match[2]));
      }
    },
  }).then((running) => {
    simulator = running;
    return running;
  });
}

/** Waits for the workflow's chain to close and counts it. A failed workflow breaks the benchmark. */
export async function waitForCost(
  client: Client,
  workflowId: string,
  runId: string,
  deadline: number,
): Promise<WorkflowCost> {
  return waitUntil({
    check: async () => {
      const description = await client.workflow.getHandle(workflowId).describe();
      if (description.status.name === 'COMPLETED') return workflowCost(client, workflowId, runId);
      if (description.status.name !== 'RUNNING') {
        throw new Error(`cost workflow ${workflowId} ended ${description.status.name}`);
      }
      return undefined;
    },
    deadline,
    everyMs: 500,
    late: () => {
      throw new Error(`cost workflow ${workflowId} still running at the deadline`);
    },
  });
}

/** Costs of one variant at one job length, over its samples. */
export type CostRow = ReturnType<typeof measuredRows>[number];

function measuredRows(
  simulator: RunningSimulator,
  cells: Cell[],
  samples: Map<Cell, WorkflowCost | null>,
  params: CostParams,
) {
  const requests = simulator.stats().requestsPerProjectEndpoint;
  return groupBy(cells, (c) => `${c.variant.name}|${c.jobLengthMs}`).map((group) => {
    const first = group[0] as Cell;
    const pollActivity = first.variant.impl === 'worker' ? 'pollAgentJob' : 'awaitTerminalStatus';
    const costs = group.flatMap((c) => samples.get(c) ?? []);
    // Polls are the GETs the simulator received: a poll activity cancelled while it waits between
    // attempts leaves no started event, so its attempts are in no history. Those the history misses
    // are billable attempts all the same, and are added to the actions.
    const getsOf = (c: Cell) => requests[c.project]?.get ?? 0;
    const unseen = (c: Cell, cost: WorkflowCost) =>
      Math.max(0, getsOf(c) - (cost.attemptsByActivity[pollActivity] ?? 0));
    const actions = group.flatMap((c) => {
      const s = samples.get(c);
      return s ? [s.actions.total + unseen(c, s)] : [];
    });
    const replayed = realTime(first.variant, first.jobLengthMs);
    return {
      variant: first.variant.name,
      impl: first.variant.impl,
      jobLengthMs: first.jobLengthMs,
      scale: params.scale,
      samples: group.length,
      /** false: not run, but extrapolated ({@link extrapolatedRows}). */
      measured: true,
      /** Polls the schedule makes at real time over the jitter (replayed); the runs make the median. */
      realTimePolls: replayed.polls,
      polls: spread(group.map(getsOf)),
      events: spread(costs.map((c) => c.events)),
      /** Events of the longest single run over every sample. */
      maxRunEvents: costs.length > 0 ? Math.max(...costs.map((c) => c.maxRunEvents)) : null,
      runs: spread(costs.map((c) => c.runs)),
      actions: spread(actions),
      /** The actions of one sample, by kind. */
      actionBreakdown: costs[0]?.actions ?? null,
      apiRequestsPerJob: spread(group.map((c) => apiRequests(requests[c.project] ?? {}))),
      /** Mean wait from the job's end to its detection at real time, by the schedule (replayed). */
      meanDetectionDelayS: replayed.meanDelayMs / 1000,
    };
  });
}

/**
 * What a continue-as-new adds: the ContinuedAsNew event, then the next run's start (an action) and
 * first workflow task; a continued run of this worker upserts nothing (its search attributes are carried).
 */
const PER_CONTINUATION = { events: 5, actions: 1 };

/**
 * The (variant, length) pairs not run, from a straight line through the variant's measured rows:
 * every poll adds the same events and actions, which the measured rows show exactly.
 */
function extrapolatedRows(measured: CostRow[], params: CostParams): CostRow[] {
  const rows: CostRow[] = [];
  for (const variant of params.variants) {
    const own = measured.filter((r) => r.variant === variant.name && r.polls !== null);
    for (const jobLengthMs of params.jobLengthsMs) {
      if (own.some((r) => r.jobLengthMs === jobLengthMs)) continue;
      const replayed = realTime(variant, jobLengthMs);
      const polls = replayed.polls.median;
      const xs = own.map((r) => (r.polls as Spread).median);
      const line = (pick: (r: CostRow) => number | undefined) => {
        const ys = own.map(pick);
        if (own.length < 2 || ys.some((y) => y === undefined)) return null;
        return fitLine(xs, ys as number[]);
      };
      const events = line((r) => r.events?.median);
      const actions = line((r) => r.actions?.median);
      const requests = line((r) => r.apiRequestsPerJob?.median);
      const runs = variant.impl === 'worker' ? Math.ceil(polls / POLLS_PER_RUN) : 1;
      const at = (fit: { a: number; b: number } | null, perRun: number) =>
        fit === null ? null : exact(fit.a + fit.b * polls + (runs - 1) * perRun);
      const runPolls = Math.min(polls, POLLS_PER_RUN);
      rows.push({
        variant: variant.name,
        impl: variant.impl,
        jobLengthMs,
        scale: params.scale,
        samples: 0,
        measured: false,
        realTimePolls: replayed.polls,
        polls: exact(polls),
        events: variant.impl === 'plain-loop' ? null : at(events, PER_CONTINUATION.events),
        maxRunEvents:
          events === null || variant.impl === 'plain-loop'
            ? null
            : Math.round(events.a + events.b * runPolls + (runs > 1 ? 1 : 0)),
        runs: variant.impl === 'plain-loop' ? null : exact(runs),
        actions: variant.impl === 'plain-loop' ? null : at(actions, PER_CONTINUATION.actions),
        actionBreakdown: null,
        apiRequestsPerJob: at(requests, 0),
        meanDetectionDelayS: replayed.meanDelayMs / 1000,
      });
    }
  }
  return rows;
}

function exact(value: number): Spread {
  return { median: value, min: value, max: value, n: 1 };
}

/** Least-squares line y = a + b·x. */
function fitLine(xs: number[], ys: number[]): { a: number; b: number } {
  const [mx, my] = [mean(xs), mean(ys)];
  const den = sum(xs.map((x) => (x - mx) ** 2));
  const b = den === 0 ? 0 : sum(xs.map((x, i) => (x - mx) * ((ys[i] as number) - my))) / den;
  return { a: my - b * mx, b };
}
