/**
 * `npm run bench`: measures this worker against the local Temporal dev server and the API
 * simulator, next to two baselines, prints a table, writes bench/results/<date>-<mode>.json (and
 * removes the older runs of that mode the page no longer reads) and regenerates
 * docs/PERFORMANCE.md. See `npm run bench -- --help`.
 *
 * Exit code: 0 when the benchmark ran, whatever the figures (a missed aim prints MISSED); 1 when
 * the benchmark itself broke (a workflow failed, a process died, the server would not start); 2 for
 * bad flags.
 */
import { parseArgs } from 'node:util';
import { DYNAMIC_CONFIG, startBenchEnvironment, type BenchEnvironment } from './environment.js';
import { cpuShares, cpuTimes, currentLoad, describeMachine } from './machine.js';
import { describePoints, render, writePerformanceDoc, writeResult } from './report.js';
import {
  COST_VARIANTS,
  IMPLEMENTATIONS,
  runOrder,
  LADDER,
  QUICK_POINTS,
  type BenchResult,
  type BenchServer,
  type ChoiceSide,
  type CostRow,
  type DesignChoice,
  type Implementation,
  type LoadPoint,
  type LoadRun,
  type Mode,
  type WakeRun,
} from './catalogue.js';
import { runCost } from './scenarios/cost.js';
import { runLoad } from './scenarios/load.js';
import { runQuotaCost } from './scenarios/quota.js';
import { runStartup } from './scenarios/startup.js';
import { runWake } from './scenarios/wake.js';
import { TEMPORAL_SERVER_VERSION } from '../dev/temporal-versions.js';
import { AIM_JOBS } from './summary.js';
import { POLL_JITTER } from '../src/poll-schedule.js';

const USAGE = `Usage: npm run bench -- [--quick | --full] [options]

  --quick              the quick load points (below), start-up, cost per job (default)
  --full               the ladder of N (below) up to --max-jobs, design choices, 6-hour jobs in the
                       cost table
  --max-jobs N         largest N in full mode (default 10000)
  --points LIST        load points instead of the mode's, e.g. "100@2s*3,1000@10s,2000@10s"
                       (*R: repeats of that point)
  --choice-point P     where full mode measures the design choices (default 500@10s)
  --repeats R          repeats of each load run (quick 1, full 3)
  --cost-lengths LIST  job lengths of the cost table (quick "1m,10m,1h", full "1m,10m,1h,6h")
  --cost-max-polls P   run the cost of jobs up to P polls (quick 20, full 100) and extrapolate
                       longer ones from them; each poll takes a second or more
  --scale K            cost runs go K times faster than real time (default 240, at most 500: the
                       workflow's shortest interval is 10 ms)
  --wake-jobs N        jobs the wake scenario holds (quick 100, full 1000): pollNow → GET and
                       follow-up → POST latency, and a worker SIGKILLed and replaced (quick
                       mode waits 20 s for polling to resume, full mode past the 75 s timeout)
  --only LIST          run only some of: startup, load, cost, quota, wake, choices
  --server KIND        dev (default): the CLI's dev server; postgres: Temporal Server v${TEMPORAL_SERVER_VERSION} on
                       PostgreSQL, set up by the compose files as \`npm run test:cluster\` does
  --no-write           print only; write neither bench/results/ nor docs/PERFORMANCE.md
  --report-only        run nothing; regenerate docs/PERFORMANCE.md from bench/results/
  --help               this text

Quick load points: ${describePoints(QUICK_POINTS)}.
The ladder of N: ${describePoints(LADDER)}.

Figures are taken on this machine; a busy machine gives noisy figures, so each load figure is the
median over the repeats, shown with its min–max.`;

const SCENARIOS = ['startup', 'load', 'cost', 'quota', 'wake', 'choices'] as const;
type Scenario = (typeof SCENARIOS)[number];

/** Everything a run will do, decided from the flags before anything starts. */
interface Plan {
  mode: Mode;
  repeats: number;
  points: LoadPoint[];
  /** Stop climbing N for an implementation once a point broke (full mode's ladder). */
  ladder: boolean;
  steadyCadences: number;
  startupRepeats: Record<'prebuilt-bundle' | 'workflowsPath', number>;
  costScale: number;
  costLengthsMs: number[];
  costSamples: number;
  costMaxPolls: number;
  choices: DesignChoice[];
  wakeJobs: number;
  only: Set<Scenario>;
  write: boolean;
  server: BenchServer;
}

class UsageError extends Error {}

function plan(argv: string[]): Plan | 'report-only' | null {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      full: { type: 'boolean', default: false },
      'max-jobs': { type: 'string' },
      points: { type: 'string' },
      repeats: { type: 'string' },
      scale: { type: 'string' },
      'cost-lengths': { type: 'string' },
      'choice-point': { type: 'string' },
      'cost-max-polls': { type: 'string' },
      'wake-jobs': { type: 'string' },
      only: { type: 'string' },
      server: { type: 'string', default: 'dev' },
      'no-write': { type: 'boolean', default: false },
      'report-only': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return null;
  if (values['report-only']) return 'report-only';
  if (values.quick && values.full) throw new UsageError('choose --quick or --full, not both');
  const mode: Mode = values.full ? 'full' : 'quick';
  const server = values.server;
  if (server !== 'dev' && server !== 'postgres') {
    throw new UsageError(`--server must be dev or postgres, not "${server}"`);
  }
  const maxJobs = positiveInt(values['max-jobs'] ?? '10000', '--max-jobs');
  const points = values.points
    ? parsePoints(values.points)
    : mode === 'quick'
      ? [...QUICK_POINTS]
      : LADDER.filter((p) => p.jobs <= maxJobs);
  const only = new Set<Scenario>(
    values.only ? values.only.split(',').map((s) => scenarioName(s.trim())) : SCENARIOS,
  );
  const hour = 60 * 60_000;
  // Half the aim's N, at its cadence: big enough to fill the cache of 250 twice, small enough to
  // run five sides in a few minutes.
  const choicePoint: LoadPoint = values['choice-point']
    ? (parsePoints(values['choice-point'])[0] as LoadPoint)
    : { jobs: Math.min(500, maxJobs), cadenceMs: 10_000 };
  return {
    mode,
    repeats: positiveInt(values.repeats ?? (mode === 'quick' ? '1' : '3'), '--repeats'),
    points,
    ladder: mode === 'full',
    steadyCadences: mode === 'quick' ? 1 : 2,
    startupRepeats:
      mode === 'quick'
        ? { 'prebuilt-bundle': 2, workflowsPath: 1 }
        : { 'prebuilt-bundle': 3, workflowsPath: 3 },
    costScale: scale(values.scale ?? '240'),
    costLengthsMs: values['cost-lengths']
      ? parseLengths(values['cost-lengths'])
      : mode === 'quick'
        ? [60_000, 10 * 60_000, hour]
        : [60_000, 10 * 60_000, hour, 6 * hour],
    costSamples: mode === 'quick' ? 2 : 3,
    costMaxPolls: positiveInt(
      values['cost-max-polls'] ?? (mode === 'quick' ? '20' : '100'),
      '--cost-max-polls',
    ),
    choices: mode === 'full' ? designChoices(choicePoint) : [],
    // Quick mode holds fewer jobs: the ramp of 1,000 workflows alone takes a minute or more here.
    wakeJobs: positiveInt(values['wake-jobs'] ?? (mode === 'quick' ? '100' : '1000'), '--wake-jobs'),
    only: mode === 'quick' ? new Set([...only].filter((s) => s !== 'choices')) : only,
    write: !values['no-write'],
    server,
  };
}

/**
 * The choices that may move a figure, each measured on every side at one point. This worker's
 * defaults are one side of each; they run once per repeat and serve all three.
 */
function designChoices(point: LoadPoint): DesignChoice[] {
  const defaults = { variant: '' };
  return [
    {
      name: 'workflow cache size',
      why: 'a cache smaller than the open workflows evicts them, and every later task replays the history',
      point,
      sides: [defaults, { variant: 'cache 250', workerEnv: { WORKER_MAX_CACHED_WORKFLOWS: '250' } }],
    },
    {
      name: 'workflow task concurrency',
      why: 'on 2 cores more slots than cores may only add contention',
      point,
      sides: [
        defaults,
        { variant: '10 workflow task slots', workerEnv: { WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '10' } },
      ],
    },
  ];
}

function parseLengths(text: string): number[] {
  return text.split(',').map((part) => {
    const match = /^\s*(\d+(?:\.\d+)?)(m|h)\s*$/.exec(part);
    if (!match) throw new UsageError(`--cost-lengths: "${part}" is not a length such as 10m or 1h`);
    return Number(match[1]) * (match[2] === 'h' ? 3_600_000 : 60_000);
  });
}

function parsePoints(text: string): LoadPoint[] {
  return text.split(',').map((part) => {
    const match = /^\s*(\d+)@(\d+(?:\.\d+)?)(ms|s)(?:\*(\d+))?\s*$/.exec(part);
    if (!match)
      throw new UsageError(`--points: "${part}" is not N@cadence[*repeats] such as 1000@10s or 100@2s*3`);
    const value = Number(match[2]);
    const point: LoadPoint = { jobs: Number(match[1]), cadenceMs: match[3] === 's' ? value * 1000 : value };
    if (match[4] !== undefined) point.repeats = positiveInt(match[4], '--points repeats');
    return point;
  });
}

function positiveInt(text: string, flag: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1)
    throw new UsageError(`${flag} must be a whole number of at least 1`);
  return value;
}

function scale(text: string): number {
  const value = positiveInt(text, '--scale');
  // The default schedule's 5 s first interval must stay at or above the workflow's 10 ms floor.
  if (value > 500) throw new UsageError('--scale must be at most 500');
  return value;
}

function scenarioName(name: string): Scenario {
  if (!(SCENARIOS as readonly string[]).includes(name)) {
    throw new UsageError(`--only: "${name}" is none of ${SCENARIOS.join(', ')}`);
  }
  return name as Scenario;
}

const say = (line: string) => process.stderr.write(`[bench] ${line}\n`);

/**
 * Long enough for the slowest phase seen at N on this machine when shared (starting 1,000
 * workflows took from 60 to 250 s), with room to spare; a phase that takes longer is what broke.
 */
function phaseTimeoutMs(point: LoadPoint): number {
  return Math.max(90_000, point.jobs * 400 + 10 * point.cadenceMs);
}

async function runLoads(env: BenchEnvironment, p: Plan, result: BenchResult): Promise<void> {
  const stopped = new Set<Implementation>();
  for (const point of p.points) {
    // A run that broke stops its implementation at once; one that could not hold the cadence
    // lets the point's other repeats run, so the point where the climb ends has its spread too.
    const stopAfterPoint = new Map<Implementation, string>();
    for (let repeat = 1; repeat <= (point.repeats ?? p.repeats); repeat++) {
      for (const impl of runOrder(point.impls ?? IMPLEMENTATIONS, repeat)) {
        if (stopped.has(impl)) continue;
        const run = await loadRun(env, p, point, impl, repeat);
        result.load.push(run);
        if (!p.ladder) continue;
        if (run.broke !== null) {
          stopped.add(impl);
          stopAfterPoint.delete(impl);
          result.ladderStops.push({ impl, jobs: point.jobs, reason: run.broke });
        } else {
          const reason = cadenceNotHeld(run);
          if (reason !== null && !stopAfterPoint.has(impl)) stopAfterPoint.set(impl, reason);
        }
      }
    }
    for (const [impl, reason] of stopAfterPoint) {
      stopped.add(impl);
      result.ladderStops.push({ impl, jobs: point.jobs, reason });
    }
  }
}

/**
 * Why the ladder stops climbing N for an implementation after this point, or null: past the aim's
 * N (so the ladder always climbs at least that far), the machine kept less than half the poll rate
 * the cadence asks for, so that every larger N would only take longer to say the same.
 */
function cadenceNotHeld(run: LoadRun): string | null {
  const asked = run.jobs / (run.cadenceMs / 1000);
  if (run.jobs >= AIM_JOBS && run.steadyPollsPerSecond < asked / 2) {
    return (
      `kept ${run.steadyPollsPerSecond.toFixed(0)} of the ${asked.toFixed(0)} polls/s the cadence asks for: ` +
      'the machine cannot hold the cadence at this N'
    );
  }
  return null;
}

async function loadRun(
  env: BenchEnvironment,
  p: Plan,
  point: LoadPoint,
  impl: Implementation,
  repeat: number,
  side: Omit<ChoiceSide, 'impl'> = { variant: '' },
): Promise<LoadRun> {
  const { variant } = side;
  const what = `${impl}${variant ? ` [${variant}]` : ''} N=${point.jobs} @ ${point.cadenceMs / 1000}s (${repeat}/${point.repeats ?? p.repeats})`;
  const started = Date.now();
  say(`load ${what}`);
  await env.renewServer();
  const run = await runLoad(env, {
    impl,
    jobs: point.jobs,
    cadenceMs: point.cadenceMs,
    steadyCadences: p.steadyCadences,
    phaseTimeoutMs: phaseTimeoutMs(point),
    historySample: 20,
    workerEnv: side.workerEnv ?? {},
    variant,
  });
  say(
    `  ${Math.round((Date.now() - started) / 1000)} s: ${run.throughput.toFixed(1)} jobs/s, p99 ${
      run.latency ? (run.latency.p99 / 1000).toFixed(2) : '?'
    } s, ${run.steadyPollsPerSecond.toFixed(0)} polls/s, CPU ${run.cpuPer1000Polls.measured.toFixed(2)} s/1k polls` +
      `${run.broke ? `, broke: ${run.broke}` : ''}`,
  );
  return run;
}

async function runChoices(env: BenchEnvironment, p: Plan, result: BenchResult): Promise<void> {
  for (let repeat = 1; repeat <= p.repeats; repeat++) {
    const done = new Set<string>();
    for (const choice of p.choices) {
      for (const side of choice.sides) {
        const impl = side.impl ?? 'worker';
        const key = `${choice.point.jobs}|${choice.point.cadenceMs}|${impl}|${side.variant}`;
        if (done.has(key)) continue;
        done.add(key);
        const ran = result.load.filter(
          (r) =>
            r.impl === impl &&
            r.variant === side.variant &&
            r.jobs === choice.point.jobs &&
            r.cadenceMs === choice.point.cadenceMs,
        );
        // The ladder may have run this worker's defaults at this point already.
        if (ran.length >= repeat) continue;
        result.load.push(await loadRun(env, p, choice.point, impl, repeat, side));
      }
    }
  }
}

async function runCostScenario(env: BenchEnvironment, p: Plan): Promise<CostRow[]> {
  say(`cost per job, schedules ${p.costScale} times faster than real time`);
  const started = Date.now();
  const rows = await runCost(env, {
    // The fixed 10 s schedule polls 360 times an hour: full mode only.
    variants:
      p.mode === 'full' ? COST_VARIANTS : COST_VARIANTS.filter((v) => v.name !== 'this worker, fixed 10 s'),
    jobLengthsMs: p.costLengthsMs,
    scale: p.costScale,
    samples: p.costSamples,
    maxMeasuredPolls: p.costMaxPolls,
    log: say,
  });
  say(`  ${Math.round((Date.now() - started) / 1000)} s`);
  return rows;
}

/**
 * This worker's wake-ups and restart, then, in full mode, the restart of (c) (1.0's shape: a timer
 * and a local activity per poll) and of (b), beside it.
 */
async function runWakeScenario(env: BenchEnvironment, p: Plan): Promise<WakeRun[]> {
  const impls = p.mode === 'full' ? (['worker', 'floor', 'poll-by-retry'] as const) : (['worker'] as const);
  const runs: WakeRun[] = [];
  for (const impl of impls) {
    say(`wake-ups and a worker SIGKILLed: ${impl} N=${p.wakeJobs} at 10 s`);
    const started = Date.now();
    await env.renewServer();
    const run = await runWake(env, {
      impl,
      jobs: p.wakeJobs,
      cadenceMs: 10_000,
      pollNowSamples: Math.min(200, Math.floor(p.wakeJobs / 3)),
      followUpSamples: Math.min(100, Math.floor(p.wakeJobs / 6)),
      spreadMs: p.mode === 'quick' ? 15_000 : 30_000,
      // Quick mode does not wait out the 75 s timeout of an attempt lost with the killed worker:
      // jobs not polled within the window are reported as such.
      restartWaitMs: p.mode === 'quick' ? 20_000 : null,
      phaseTimeoutMs: phaseTimeoutMs({ jobs: p.wakeJobs, cadenceMs: 10_000 }),
      log: say,
    });
    runs.push(run);
    const ms = (v: number | null | undefined) =>
      v === null || v === undefined ? '?' : `${Math.round(v)} ms`;
    say(
      `  ${Math.round((Date.now() - started) / 1000)} s: pollNow p99 ${ms(run.pollNow?.p99)}, ` +
        `follow-up p99 ${ms(run.followUp?.p99)}, restart p50 ${ms(run.restart?.resumed.p50)} ` +
        `p99 ${ms(run.restart?.resumed.p99)}${run.broke ? `, broke: ${run.broke}` : ''}`,
    );
  }
  return runs;
}

async function main(): Promise<number> {
  let p: Plan | 'report-only' | null;
  try {
    p = plan(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UsageError) && !(err instanceof TypeError)) throw err;
    process.stderr.write(`${err.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (p === null) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (p === 'report-only') {
    await writePerformanceDoc();
    say('regenerated docs/PERFORMANCE.md from bench/results/');
    return 0;
  }
  const began = Date.now();
  const cpuAtStart = cpuTimes();
  say(`${p.mode} mode: ${[...p.only].join(', ')}`);
  const env = await startBenchEnvironment(say, p.server);
  const stop = () => {
    say('interrupted: stopping what the benchmark started');
    env.close().then(
      () => process.exit(130),
      () => process.exit(130),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const result: BenchResult = {
      schema: 1,
      mode: p.mode,
      command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
      startedAt: new Date(began).toISOString(),
      finishedAt: '',
      durationSeconds: 0,
      machine: describeMachine(env.serverVersion),
      settings: {
        repeats: p.repeats,
        points: p.points,
        steadyCadences: p.steadyCadences,
        costScale: p.costScale,
        costLengthsMs: p.costLengthsMs,
        costSamples: p.costSamples,
        startupRepeats: p.startupRepeats,
        // The PostgreSQL server runs with the compose file's dynamic config, not the raised limits.
        dynamicConfig: p.server === 'dev' ? DYNAMIC_CONFIG : {},
        choices: p.choices,
        servers: 'per-run',
        pollJitter: POLL_JITTER,
      },
      setupMs: env.setupMs,
      server: p.server,
      startup: [],
      load: [],
      ladderStops: [],
      cost: [],
    };
    let failure: Error | null = null;
    try {
      if (p.only.has('startup')) {
        say('start-up');
        result.startup = await runStartup(env, p.startupRepeats);
      }
      if (p.only.has('cost')) result.cost = await runCostScenario(env, p);
      if (p.only.has('quota')) {
        say('project quota on and off');
        result.quota = await runQuotaCost(env, { jobs: p.mode === 'quick' ? 10 : 20, log: say });
      }
      if (p.only.has('wake')) result.wake = await runWakeScenario(env, p);
      if (p.only.has('load')) await runLoads(env, p, result);
      if (p.only.has('choices') && p.choices.length > 0) await runChoices(env, p, result);
    } catch (err) {
      // What ran before the break is kept: a full run takes long, and the break is a finding too.
      failure = err instanceof Error ? err : new Error(String(err));
      result.error = failure.message;
    }
    result.finishedAt = new Date().toISOString();
    result.durationSeconds = (Date.now() - began) / 1000;
    result.machine.loadAverageAtEnd = currentLoad();
    const shares = cpuShares(cpuAtStart, cpuTimes());
    result.machine.cpuBusyPercent = shares.busy;
    result.machine.cpuStealPercent = shares.steal;
    process.stdout.write(`${render(result, 'text')}\n`);
    if (p.write) {
      const path = writeResult(result);
      await writePerformanceDoc();
      say(`wrote ${path} and docs/PERFORMANCE.md`);
    }
    if (failure !== null) throw failure;
    return 0;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await env.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(
      `[bench] the benchmark broke: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  },
);
