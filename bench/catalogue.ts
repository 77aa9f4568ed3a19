/**
 * What the scenarios, the summary and the report share, in one module that imports none of them:
 * the implementations and their labels, the load points, the cost variants, and the shape of a
 * result as bench/results/ holds it. Scenarios write these types, the summary and the report read
 * them, so neither side imports the other.
 */
import { durationMs } from '../src/duration.js';
import type { ActionCounts, DetectionParts } from './history.js';
import type { MachineInfo } from './resources.js';
import { DEFAULT_POLL } from '../src/poll-schedule.js';
import { fixedSchedule, type Schedule } from './schedule.js';
import type { Spread } from './stats.js';

// The implementations compared.

/**
 * The implementations compared, in the order the tables list them: this worker, then the
 * baselines. A baseline is added here, in {@link BASELINE_NAMES}, and where scenarios/load.ts
 * spawns and starts it; the load points, the tables and the ratios take it from there.
 */
export const IMPLEMENTATIONS = ['worker', 'plain-loop', 'poll-by-retry', 'floor'] as const;
/** One of {@link IMPLEMENTATIONS}. */
export type Implementation = (typeof IMPLEMENTATIONS)[number];
/** What this worker's figures are divided by. */
export type Baseline = Exclude<Implementation, 'worker'>;
/** The baselines, in the order of their columns. */
export const BASELINES = IMPLEMENTATIONS.filter((impl): impl is Baseline => impl !== 'worker');

/**
 * The order in which repeat `repeat` (from 1) of a load point runs `impls`: interleaved, so that a
 * change in the machine's load falls on every implementation alike, in the rows of a balanced Latin
 * square (Williams' design: 0, 1, n−1, 2, n−2, … shifted by one per repeat), so that over n repeats
 * of an even n each implementation runs right after each other one exactly once. A plain rotation
 * would keep every neighbour, as the fixed order did: (c) ran right before this worker in every
 * repeat, which on a server shared by the runs weighed on this worker's figures alone (each run gets
 * a fresh server since: bench/environment.ts' renewServer has the measurement).
 */
export function runOrder<T>(impls: readonly T[], repeat: number): T[] {
  const n = impls.length;
  const first = Array.from({ length: n }, (_, i) => (i % 2 === 1 ? (i + 1) / 2 : (n - i / 2) % n));
  return first.map((index) => impls[(index + repeat - 1) % n] as T);
}

/** Each baseline's mark (its ratio column is "÷ mark") and name. */
const BASELINE_NAMES: Record<Baseline, { mark: string; name: string }> = {
  'plain-loop': { mark: '(a)', name: 'plain loop' },
  'poll-by-retry': { mark: '(b)', name: 'poll by retry' },
  floor: { mark: '(c)', name: 'floor of this design' },
};

/** What runs in a Temporal worker process: every implementation but the plain loop. */
export type WorkerImplementation = Exclude<Implementation, 'plain-loop'>;

/** The `--impl` of the tools that look inside one worker (bench:profile, bench:heap): this worker, (b) or (c). */
export function workerImpl(value: string | undefined): WorkerImplementation {
  if (value === 'worker' || value === 'floor' || value === 'poll-by-retry') return value;
  throw new Error(`--impl is worker, poll-by-retry or floor, not ${value}`);
}

/** The `--cadence` of the same tools, such as "10s", in milliseconds. */
export function cadenceFlag(value: string | undefined): number {
  const ms = value === undefined ? undefined : durationMs(value);
  if (ms === undefined || ms <= 0) throw new Error(`--cadence is a duration such as 10s, not ${value}`);
  return ms;
}

/** A baseline's mark, such as "(a)". */
export function mark(baseline: Baseline): string {
  return BASELINE_NAMES[baseline].mark;
}

/** An implementation as the tables name it: "this worker", or a baseline's mark and name. */
export function label(impl: Implementation): string {
  if (impl === 'worker') return 'this worker';
  const { mark, name } = BASELINE_NAMES[impl];
  return `${mark} ${name}`;
}

/**
 * Full mode's ladder of N, every implementation at every point (up to `--max-jobs`): the first at
 * the short cadence of a demo, the rest at the in-flight aim's 10 s.
 */
export const LADDER: readonly LoadPoint[] = [
  { jobs: 100, cadenceMs: 2_000 },
  { jobs: 1_000, cadenceMs: 10_000 },
  { jobs: 2_000, cadenceMs: 10_000 },
  { jobs: 5_000, cadenceMs: 10_000 },
  { jobs: 10_000, cadenceMs: 10_000 },
];

/**
 * Quick mode's points: the ladder's first for everyone, and N = 1,000 at 10 s for this worker and
 * (c), the largest N quick mode runs, where this worker's ratio to the floor of its design matters
 * most. (a) and (b) stay at N = 100: starting 1,000 workflows takes about a minute here, and each
 * more such run adds that again.
 */
export const QUICK_POINTS: readonly LoadPoint[] = [
  { jobs: 100, cadenceMs: 2_000 },
  { jobs: 1_000, cadenceMs: 10_000, impls: ['worker', 'floor'] },
];

/** CPU seconds of the three busy processes over a window. */
export interface CpuSplit {
  /** The measured process (worker or baseline). */
  measured: number;
  /** The Temporal dev server. */
  server: number;
  /** This process: the simulator and the client. */
  bench: number;
}

/** What one run measured. Times in ms unless named otherwise. */
export interface LoadRun {
  impl: Implementation;
  variant: string;
  jobs: number;
  cadenceMs: number;
  workerEnv: Record<string, string>;
  completed: number;
  /** Seconds from the first start until every agent job existed. */
  rampSeconds: number;
  /** Seconds from the release until the last close. */
  drainSeconds: number;
  /** Agent jobs completed per second end to end: N / (ramp + drain), the hold left out. */
  throughput: number;
  /** From the simulator's terminal moment to the workflow's close (or the loop's detection). */
  latency: { p50: number; p95: number; p99: number; max: number } | null;
  /** Polls in the steady window, and per second. */
  steadyPolls: number;
  steadyPollsPerSecond: number;
  /** CPU seconds per 1,000 polls in the steady window, by process. */
  cpuPer1000Polls: CpuSplit;
  /** CPU seconds per agent job started in the ramp (start, first workflow task, create), by process. */
  cpuPerStart: CpuSplit;
  apiRequestsPerJob: number;
  idleRssMiB: number;
  peakRssMiB: number;
  /** (Peak − idle resident memory) per 1,000 open workflows. */
  rssMiBPer1000Open: number;
  /**
   * Where detection latency went, part by part (p50 and p99, ms), from the histories of a sample of
   * the closed workflows (./scenarios/load.ts); null for the plain loop, absent in older runs.
   */
  detection?: { sampled: number; p50: DetectionParts; p99: DetectionParts } | null;
  /** From sampled histories; null for the plain loop. */
  history: { sampled: number; eventsPerJob: number; actionsPerJob: number; maxRunEvents: number } | null;
  /** Why the run did not complete, or null. */
  broke: string | null;
}

// The cost variants.

/** One way of polling that the cost table compares. */
export interface CostVariant {
  /** Row label. */
  name: string;
  impl: Implementation;
  /** Real-time schedule. */
  schedule: Schedule;
}

/** This worker on its defaults, and both baselines. */
export const COST_VARIANTS: CostVariant[] = [
  { name: 'this worker (default schedule)', impl: 'worker', schedule: DEFAULT_POLL },
  { name: '(a) plain loop, same schedule', impl: 'plain-loop', schedule: DEFAULT_POLL },
  // A retry policy can express the same schedule (5 s ×1.5 up to 60 s), so this row differs from
  // ours only in the mechanism.
  { name: '(b) poll by retry, same schedule', impl: 'poll-by-retry', schedule: DEFAULT_POLL },
  // The pattern as Temporal documents it for polling: coefficient 1, here at our longest interval.
  { name: '(b) poll by retry, fixed 60 s', impl: 'poll-by-retry', schedule: fixedSchedule(60_000) },
  // The poll-schedule design choice: a fixed cadence as short as the default's first interval
  // would detect the end sooner and cost more.
  { name: 'this worker, fixed 10 s', impl: 'worker', schedule: fixedSchedule(10_000) },
];

/**
 * The variant each implementation is compared by: its own way of polling, on this worker's default
 * schedule with the default options (what the ratios and the cost aim read).
 */
export function defaultScheduleVariant(impl: Implementation): string | undefined {
  return COST_VARIANTS.find((v) => v.impl === impl && v.schedule === DEFAULT_POLL)?.name;
}

/** Costs of one variant at one job length, over its samples. */
export interface CostRow {
  variant: string;
  impl: Implementation;
  jobLengthMs: number;
  scale: number;
  samples: number;
  /**
   * false: not run, but extrapolated from this variant's measured lengths (a straight line in the
   * number of polls, plus one action and five events per extra continue-as-new run).
   */
  measured: boolean;
  /** Polls the schedule makes at real time over the jitter (replayed); the runs make the median. */
  realTimePolls: Spread;
  /** Polls the runs made: the GETs the simulator received (or the loop's count). */
  polls: Spread | null;
  events: Spread | null;
  /** Events of the longest single run over every sample. */
  maxRunEvents: number | null;
  runs: Spread | null;
  actions: Spread | null;
  /** The actions of one sample, by kind. */
  actionBreakdown: ActionCounts | null;
  apiRequestsPerJob: Spread | null;
  /** Mean wait from the job's end to its detection at real time, by the schedule (replayed). */
  meanDetectionDelayS: number;
}

// What the other scenarios measured.

/** One side of the comparison. */
export interface QuotaCostSide {
  /** The worker's `AGENT_API_PROJECT_QUOTA`. */
  quota: string;
  jobs: number;
  /** Events and actions of each job's own history. */
  jobEvents: Spread | null;
  jobActions: Spread | null;
  /**
   * The quota workflow's whole chain, over the jobs (null with the quota off). `updates`: the
   * accepted updates among its actions, the takes; `timers`: its wake-ups (a use leaving the
   * window, a take moving the next one).
   */
  quotaWorkflow: {
    runs: number;
    events: number;
    actions: number;
    updates: number;
    timers: number;
    /** What the chain grew by over the second half of the jobs, when it had one. */
    margin?: QuotaMargin;
  } | null;
  /** Per job, all told: the job's medians plus the quota workflow's share. */
  eventsPerJob: number | null;
  actionsPerJob: number | null;
  /** From the workflow's start event to the simulator recording the create, ms. */
  startLatencyMs: Spread | null;
}

/**
 * The quota workflow's chain over the later jobs of a run, once it runs: its start, its patch
 * marker and its first timer fall before them, so its actions here are what each further job costs.
 */
export interface QuotaMargin {
  jobs: number;
  actions: number;
  /** Accepted updates among them: the takes. */
  updates: number;
  timers: number;
}

/**
 * How the worker was started; `modules-only` is not a worker but `node` importing the SDK's
 * worker package and exiting: the floor under every start.
 */
export type StartupMode = 'prebuilt-bundle' | 'workflowsPath' | 'modules-only';

/** One start. Milliseconds from the spawn. */
export interface StartupRun {
  mode: StartupMode;
  /** The worker's own figure (process uptime) in its "worker running" line. */
  reportedStartupMs: number | null;
  /** Until the benchmark read the "worker running" line (or the probe exited). */
  runningMs: number;
  /** Until the simulator answered the first poll. */
  firstPollMs: number | null;
}

/**
 * Percentiles of one set of delays, ms, and how many of the sample never got their request: those
 * count as later than the wait, so a percentile or maximum that falls among them is null.
 */
export interface Delays {
  sent: number;
  /** Requests that did not arrive within the scenario's wait: not in the percentiles. */
  missing: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

/** What the wake scenario measured. Times in ms unless named otherwise. */
export interface WakeRun {
  impl: WorkerImplementation;
  jobs: number;
  cadenceMs: number;
  /** Seconds from the first start until every agent job existed. */
  rampSeconds: number;
  /** The signal sent → that job's next GET at the simulator; null for a baseline. */
  pollNow: Delays | null;
  /** The sendMessage update sent → its POST at the simulator; null for a baseline. */
  followUp: Delays | null;
  restart: {
    /** From the SIGKILL to the new worker's "worker running" line. */
    newWorkerRunningMs: number;
    /** From the SIGKILL to each job's first GET after it, over every job. */
    resumed: Delays;
    /** Jobs whose first GET came more than one cadence after the new worker ran. */
    late: number;
    /** How long after the new worker ran the scenario waited for the jobs' first GETs. */
    waitedMs: number;
    /** From the kill to the first GET of the jobs later than the start-to-close timeout, ascending (at most 50). */
    pastTimeoutMs: number[];
    /** start-to-close timeout of the poll activity (of this worker and both baselines). */
    startToCloseMs: number;
  } | null;
  /**
   * Poll counts of the jobs sent a pollNow: GETs the simulator received, against the poll
   * activity's attempts their histories show (the attempts of cancelled activities are missing).
   */
  pollCounts: { sampled: number; simulatorGets: number; historyAttempts: number } | null;
  /** Why the run did not complete, or null. */
  broke: string | null;
}

// A run as bench/results/ holds it.

/** quick or full. */
export type Mode = 'quick' | 'full';

/** One load point: N jobs at a cadence, by some or all implementations. */
export interface LoadPoint {
  jobs: number;
  cadenceMs: number;
  /** Default: every implementation. */
  impls?: Implementation[];
  /** Default: the run's repeats. */
  repeats?: number;
}

/** One side of a design choice, on this worker. */
export interface ChoiceSide {
  /** '': its defaults. */
  variant: string;
  /** Worker settings, as environment variables. */
  workerEnv?: Record<string, string>;
  /** The payload codec on, for the worker and the client that starts the jobs. */
  sealed?: boolean;
}

/** A design choice measured on every side at one load point. */
export interface DesignChoice {
  name: string;
  /** Why it may move a figure. */
  why: string;
  point: LoadPoint;
  sides: ChoiceSide[];
}

/** One side of the payload codec's cost: the same jobs with the codec off or on. */
export interface CodecCostSide {
  codec: 'off' | 'on';
  jobs: number;
  /** Polls per job (the poll activity's attempts). */
  polls: Spread | null;
  events: Spread | null;
  /** Bytes of every run's history of a job, serialized as the server stores it. */
  historyBytes: Spread | null;
  /** Payloads in them. */
  payloads: Spread | null;
  /** The worker process's CPU over the side's jobs, per poll (ms): for scale, load-sensitive. */
  workerCpuMsPerPoll: number;
}

/** What the payload codec costs: both sides, and the codec's own CPU on one job's payloads. */
export interface CodecCost {
  sides: CodecCostSide[];
  sealOpen: {
    /** Payloads in one job's history (codec off), and their serialized bytes. */
    payloads: number;
    bytes: number;
    /** CPU microseconds to seal all of them once and open them once, over the rounds. */
    cpuUsPerJob: Spread | null;
    /** The poll activity's input (what each poll attempt opens), its bytes and the same CPU. */
    pollInputBytes: number;
    cpuUsPerPollInput: Spread | null;
  };
}

/** Which Temporal server a run measured. */
export type BenchServer = 'dev' | 'postgres';

/** The poll jitter a run measured: what it recorded, or ±10%, the jitter of every run recorded without it. */
export function pollJitterOf(result: Pick<BenchResult, 'settings'>): number {
  return result.settings.pollJitter ?? 0.1;
}

/** Everything one benchmark run wrote: raw runs, settings, machine. The summary is derived. */
export interface BenchResult {
  schema: 1;
  mode: Mode;
  command: string;
  startedAt: string;
  finishedAt: string;
  durationSeconds: number;
  machine: MachineInfo;
  settings: {
    repeats: number;
    points: LoadPoint[];
    steadyCadences: number;
    costScale: number;
    costLengthsMs: number[];
    costSamples: number;
    startupRepeats: Record<'prebuilt-bundle' | 'workflowsPath', number>;
    /** The dev server's raised limits (bench/environment.ts); empty on PostgreSQL. */
    dynamicConfig: Record<string, number>;
    choices: DesignChoice[];
    /**
     * How the load and wake runs shared the Temporal server: `per-run` (each on a fresh one, in the
     * order of {@link runOrder}) or `shared` (one server for the whole benchmark, a fixed order; also
     * every run recorded before this field existed).
     */
    servers?: 'per-run' | 'shared';
    /**
     * The worker's jitter of each wait between polls (`POLL_JITTER`), which (a) and (c) copy; absent
     * from runs recorded before this field existed, all at ±10% ({@link pollJitterOf}).
     */
    pollJitter?: number;
  };
  setupMs: { server: number; emit: number; bundle: number };
  /**
   * The Temporal server measured against: `dev` (the CLI's dev server with SQLite; also every run
   * recorded before this field existed) or `postgres` (Temporal Server with PostgreSQL, as
   * `npm run test:cluster` runs it).
   */
  server?: BenchServer;
  startup: StartupRun[];
  load: LoadRun[];
  /** Where the ladder of N stopped for an implementation, and why. */
  ladderStops: Array<{ impl: Implementation; jobs: number; reason: string }>;
  cost: CostRow[];
  /** What the project quota adds per job, on and off; absent in runs from before it was measured. */
  quota?: QuotaCostSide[];
  /** pollNow and follow-up wake-ups and a worker restart; absent in runs from before they were measured. */
  wake?: WakeRun[];
  /** What the payload codec costs; absent in runs from before it was measured. */
  codec?: CodecCost;
  /** Set when the benchmark broke part-way: what broke. The figures before it are kept. */
  error?: string;
}
