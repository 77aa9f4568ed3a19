/**
 * The wake scenario: how fast a poll that waits on the server wakes (pollNow to its GET, a
 * follow-up to its POST), and how the polls come back when the worker is SIGKILLed and replaced:
 * the method is docs/PERFORMANCE.md's "Wake-ups". An attempt running on the dead worker is retried
 * only after its start-to-close timeout. Request times and poll counts come from the simulator, on
 * the benchmark's clock: the attempts of a poll activity cancelled between attempts are in no
 * history (docs/PERFORMANCE.md, "Billable actions"); the scenario counts both to show the gap.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { SearchAttributes, pollNowSignal, sendMessageUpdate } from '../../src/contract.js';
import { mapLimit } from '../../src/client/map-limit.js';
import { GET_BACKOFF } from '../../src/failure-policy/backoff.js';
import { POLL_ATTEMPT_TIMEOUT_MS } from '../../src/poll-schedule.js';
import type { BenchEnvironment } from '../environment.js';
import { workflowCost } from '../history.js';
import type { MeasuredProcess } from '../processes.js';
import { fixedSchedule } from '../schedule.js';
import { percentile, sum } from '../stats.js';
import { waitUntil } from '../wait.js';
import type { WorkerImplementation } from '../catalogue.js';
import { phaseTimeoutMs, startJobs, terminateLeftovers, waitForCount } from './load.js';

/** What to run. */
export interface WakeParams {
  /** This worker, or a baseline for the restart alone: the baselines have no pollNow or follow-ups. */
  impl: WorkerImplementation;
  jobs: number;
  /**
   * Quick mode spreads the probes over 15 s rather than 30 s, and waits 20 s, not past a lost
   * attempt's timeout, for every job's first GET after the new worker runs (later: missing).
   */
  quick: boolean;
  log: (line: string) => void;
}

/** The fixed poll interval of every job (initial = max, coefficient 1). */
const CADENCE_MS = 10_000;
/** The poll activity's start-to-close timeout: this worker's (src/poll-schedule.ts), the baselines' 75 s. */
const startToCloseMs = (impl: string) => (impl === 'worker' ? POLL_ATTEMPT_TIMEOUT_MS : 75_000);
/** How often the scenario reads the simulator's per-job request times: well under a cadence. */
const WATCH_EVERY_MS = 100;
const FOLLOW_UP_PROMPT = 'Benchmark follow-up: add a sentence.';

/** Runs the wake scenario on a worker of this project. */
export async function runWake(env: BenchEnvironment, params: WakeParams): Promise<WakeRun> {
  const scenario = new WakeScenario(env, params);
  try {
    return await scenario.run();
  } finally {
    await terminateLeftovers(env, scenario.project);
  }
}

/** What the wake scenario measured. Times in ms unless named otherwise. */
export type WakeRun = Awaited<ReturnType<WakeScenario['run']>>;

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

/** One run of the scenario: its project at the simulator, whose name is its task queue too. */
class WakeScenario {
  readonly project: string;

  constructor(
    private readonly env: BenchEnvironment,
    private readonly params: WakeParams,
  ) {
    this.project = env.newProject(`wake-${params.impl}-${params.jobs}`);
  }

  #jobs() {
    return this.env.jobsOf(this.project);
  }

  async run() {
    const { env, params, project } = this;
    const worker = await this.env.startWorker(this.params.impl, this.project);
    const t0 = Date.now();
    const how = { impl: params.impl, taskQueue: project, schedule: fixedSchedule(CADENCE_MS) };
    const started = await startJobs(env.client, how, project, params.jobs);
    const created = () => env.simulator.stats().jobsPerProject[project] ?? 0;
    const deadline = Date.now() + phaseTimeoutMs(params.jobs, CADENCE_MS);
    const broke = await waitForCount(created, params.jobs, 'created', deadline, worker);
    const measured = {
      impl: params.impl,
      jobs: params.jobs,
      cadenceMs: CADENCE_MS,
      /** Seconds from the first start until every agent job existed. */
      rampSeconds: (Date.now() - t0) / 1000,
      /** The signal sent → that job's next GET at the simulator; null for a baseline. */
      pollNow: null as Delays | null,
      /** The sendMessage update sent → its POST at the simulator; null for a baseline. */
      followUp: null as Delays | null,
      restart: null as Awaited<ReturnType<WakeScenario['killAndRestart']>> | null,
      pollCounts: null as Awaited<ReturnType<WakeScenario['countPolls']>> | null,
      /** Why the run did not complete, or null. */
      broke,
    };
    if (broke !== null) return measured;
    // A cadence and a half: every job now waits in its poll activity, between attempts on the server.
    await sleep(CADENCE_MS * 1.5);
    if (params.impl !== 'worker') return { ...measured, restart: await this.killAndRestart(worker) };

    // Distinct jobs for each probe, picked at random, their agent job IDs from visibility.
    const followUps = Math.min(100, Math.floor(params.jobs / 6));
    const total = Math.min(200, Math.floor(params.jobs / 3)) + followUps;
    const picked = started
      .map((s) => ({ s, order: Math.random() }))
      .sort((x, y) => x.order - y.order)
      .slice(0, total)
      .map(({ s }) => s);
    const jobIds = await mapLimit(picked, 16, (s) => this.#agentJobIdOf(s.workflowId));
    const probes: Probe[] = picked.map((s, i) => ({
      ...s,
      jobId: jobIds[i] as string,
      // Exactly `followUps` of the probes, interleaved evenly among the pollNow signals, so that
      // both kinds meet the same moments of the run.
      kind:
        Math.floor(((i + 1) * followUps) / total) > Math.floor((i * followUps) / total) ? 'message' : 'get',
      sentAt: null,
      arrivedAt: null,
      error: null,
    }));
    const spreadMs = params.quick ? 15_000 : 30_000;
    params.log(`  wake: ${probes.length} probes over ${spreadMs / 1000} s`);
    await this.#probe(probes, spreadMs);
    const errors = probes.filter((p) => p.error !== null);
    if (errors.length > 0) {
      throw new Error(`${errors.length} probes failed; the first: ${errors[0]?.error ?? ''}`);
    }
    const latencies = (kind: Probe['kind']) => {
      const own = probes.filter((p) => p.kind === kind);
      return delays(
        own.length,
        own.flatMap((p) => (p.sentAt !== null && p.arrivedAt !== null ? [p.arrivedAt - p.sentAt] : [])),
      );
    };
    return {
      ...measured,
      pollNow: latencies('get'),
      followUp: latencies('message'),
      restart: await this.killAndRestart(worker),
      pollCounts: await this.countPolls(probes.filter((p) => p.kind === 'get').slice(0, 20)),
    };
  }

  /**
   * Sends every probe at its moment of the spread and watches the simulator for its request: the
   * first GET (or message POST) of that job that arrived at or after the moment it was sent.
   */
  async #probe(probes: Probe[], spreadMs: number): Promise<void> {
    const stepMs = spreadMs / Math.max(1, probes.length);
    const start = Date.now();
    const sends = probes.map(async (p, i) => {
      await sleep(Math.max(0, start + i * stepMs - Date.now()));
      const handle = this.env.client.workflow.getHandle(p.workflowId);
      p.sentAt = Date.now();
      try {
        if (p.kind === 'get') await handle.signal(pollNowSignal);
        else await handle.executeUpdate(sendMessageUpdate, { args: [FOLLOW_UP_PROMPT] });
      } catch (err) {
        p.error = err instanceof Error ? err.message : String(err);
      }
    });
    const byJob = new Map(probes.map((p) => [p.jobId, p]));
    const watching = waitUntil<null>({
      check: () => {
        for (const job of this.#jobs()) {
          const p = byJob.get(job.id);
          if (p === undefined || p.sentAt === null || p.arrivedAt !== null) continue;
          const lastAt = job.requests[p.kind].lastAt;
          // A natural poll in between is taken for it: rarely, and only shortening the figure
          // (docs/PERFORMANCE.md, "Wake-ups").
          if (lastAt !== null && lastAt >= p.sentAt) p.arrivedAt = lastAt;
        }
        return probes.every((p) => p.arrivedAt !== null || p.error !== null) ? null : undefined;
      },
      deadline: start + spreadMs + phaseTimeoutMs(this.params.jobs, CADENCE_MS),
      everyMs: WATCH_EVERY_MS,
      late: () => null,
    });
    await Promise.all([...sends, watching]);
  }

  /**
   * SIGKILLs the worker with every job waiting in its poll activity, starts a new one at once, and
   * times each job's first GET after the kill.
   */
  async killAndRestart(first: MeasuredProcess) {
    const { impl, quick } = this.params;
    // A cadence after the probes: the woken jobs wait again like the others.
    await sleep(CADENCE_MS);
    const killedAt = Date.now();
    first.child.kill('SIGKILL');
    await first.exited;
    const { runningAt } = await this.env.startWorker(this.params.impl, this.project);
    const resumedAt = new Map<string, number>();
    const jobs = this.#jobs().length;
    await waitUntil<null>({
      check: () => {
        for (const job of this.#jobs()) {
          const lastAt = job.requests.get.lastAt;
          if (!resumedAt.has(job.id) && lastAt !== null && lastAt > killedAt) resumedAt.set(job.id, lastAt);
        }
        return resumedAt.size >= jobs ? null : undefined;
      },
      // An attempt lost with the worker times out, then waits the retry policy's backoff for its
      // attempt number before the server retries it; with polls as attempts that is soon the
      // policy's longest interval.
      deadline:
        runningAt +
        (quick ? 20_000 : startToCloseMs(impl) + GET_BACKOFF.maximumIntervalMs + 2 * CADENCE_MS + 30_000),
      everyMs: 500,
      late: () => null,
    });
    const waits = [...resumedAt.values()].map((at) => at - killedAt);
    return {
      /** From the SIGKILL to the new worker's "worker running" line. */
      newWorkerRunningMs: runningAt - killedAt,
      /** From the SIGKILL to each job's first GET after it, over every job. */
      resumed: delays(jobs, waits),
      /** Jobs whose first GET came more than one cadence after the new worker ran. */
      late: [...resumedAt.values()].filter((at) => at > runningAt + CADENCE_MS).length,
      /** How long after the new worker ran the scenario waited for the jobs' first GETs. */
      waitedMs: Date.now() - runningAt,
      /** From the kill to the first GET of the jobs later than the start-to-close timeout (at most 50). */
      pastTimeoutMs: waits
        .filter((ms) => ms > startToCloseMs(impl))
        .sort((a, b) => a - b)
        .slice(0, 50),
      startToCloseMs: startToCloseMs(impl),
    };
  }

  /**
   * Ends the agent jobs of `woken` and, once their workflows have completed, counts their polls
   * twice: the GETs the simulator received, and the poll activity's attempts in their histories
   * (the attempts of cancelled activities are missing).
   */
  async countPolls(woken: Probe[]) {
    const { client, simulator } = this.env;
    for (const p of woken) simulator.archiveJob(this.project, p.jobId);
    const costs = await mapLimit(woken, 8, async (p) => {
      await client.workflow.getHandle(p.workflowId).result();
      return workflowCost(client, p.workflowId, p.runId);
    });
    const getsOf = new Map(this.#jobs().map((j) => [j.id, j.requests.get.count]));
    return {
      sampled: woken.length,
      simulatorGets: sum(woken.map((p) => getsOf.get(p.jobId) ?? 0)),
      historyAttempts: sum(costs.map((c) => c.attemptsByActivity.pollAgentJob ?? 0)),
    };
  }

  /** The agent job ID a workflow shows as its AgentJobId search attribute, once visibility has it. */
  #agentJobIdOf(workflowId: string): Promise<string> {
    const handle = this.env.client.workflow.getHandle(workflowId);
    return waitUntil<string>({
      check: async () => (await handle.describe()).typedSearchAttributes.get(SearchAttributes.jobId),
      deadline: Date.now() + 30_000,
      everyMs: 500,
      late: () => {
        throw new Error(`workflow ${workflowId} shows no AgentJobId after 30 s`);
      },
    });
  }
}

/** Percentiles of one set of delays, ms, and how many of the sample never got their request. */
type Delays = ReturnType<typeof delays>;

/**
 * Percentiles over everything sent, the missing ones counted as later than any that arrived: a
 * percentile or maximum that falls among them is null (not known, beyond the wait), never one of
 * the others.
 */
function delays(sent: number, values: number[]) {
  const padded = [...values, ...Array<number>(Math.max(0, sent - values.length)).fill(Infinity)];
  const known = (p: number) => {
    const value = percentile(padded, p);
    return Number.isFinite(value) ? value : null;
  };
  return {
    sent,
    /** Requests that did not arrive within the scenario's wait: not in the percentiles. */
    missing: sent - values.length,
    p50: known(50),
    p99: known(99),
    max: values.length === sent && sent > 0 ? Math.max(...values) : null,
  };
}
