/**
 * A run as bench/results/ holds it. The scenarios' own result types are derived from the code that
 * builds them, so this module sits above the scenarios, and the summary and the report read it.
 */
import type { BenchServer, DesignChoice, Implementation, LoadPoint, Mode } from './catalogue.js';
import type { MachineInfo } from './resources.js';
import type { CodecCost } from './scenarios/codec.js';
import type { CostRow } from './scenarios/cost.js';
import type { LoadRun } from './scenarios/load.js';
import type { QuotaCostSide } from './scenarios/quota.js';
import type { StartupRun } from './scenarios/startup.js';
import type { WakeRun } from './scenarios/wake.js';

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
     * order of runOrder, ./catalogue.ts) or `shared` (one server for the whole benchmark, a fixed order; also
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
