/**
 * What the scenarios, the summary and the report share, in one module that imports none of them:
 * the implementations and their labels, the load points and the cost variants. A run's shape as
 * bench/results/ holds it is ./result.ts.
 */
import { durationMs } from '../src/duration.js';
import { DEFAULT_POLL } from '../src/poll-schedule.js';
import { fixedSchedule, type Schedule } from './schedule.js';

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
 * of an even n each implementation runs right after each other one exactly once; a plain rotation
 * would keep every neighbour.
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

/** What the project quota's and the payload codec's comparisons run: jobs per side. */
export interface SideParams {
  jobs: number;
  log: (line: string) => void;
}

/** A design choice measured on every side at one load point. */
export interface DesignChoice {
  name: string;
  /** Why it may move a figure. */
  why: string;
  point: LoadPoint;
  sides: ChoiceSide[];
}

/** Which Temporal server a run measured. */
export type BenchServer = 'dev' | 'postgres';
