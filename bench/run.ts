/**
 * `npm run bench`: measures this worker against the local Temporal dev server and the API
 * simulator, next to two baselines, prints the report, writes bench/results/<date>-<mode>.json (and
 * removes the older runs of that mode the page no longer reads) and regenerates
 * docs/PERFORMANCE.md. See `npm run bench -- --help`.
 *
 * Exit code: 0 when the benchmark ran, whatever the figures (a missed aim prints MISSED); 1 when
 * the benchmark itself broke (a workflow failed, a process died, the server would not start); 2 for
 * bad flags.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { DYNAMIC_CONFIG, startBenchEnvironment, type BenchEnvironment } from './environment.js';
import { cpuShares, cpuTimes, currentLoad, describeMachine } from './resources.js';
import { describePoints, formatMarkdown, render, writePerformanceDoc, writeResult } from './report.js';
import {
  COST_VARIANTS,
  IMPLEMENTATIONS,
  runOrder,
  LADDER,
  QUICK_POINTS,
  type BenchServer,
  type ChoiceSide,
  type DesignChoice,
  type Implementation,
  type LoadPoint,
  type Mode,
} from './catalogue.js';
import type { BenchResult } from './result.js';
import { runCodecCost } from './scenarios/codec.js';
import { runCost } from './scenarios/cost.js';
import { runLoad, type LoadRun } from './scenarios/load.js';
import { runQuotaCost } from './scenarios/quota.js';
import { runStartup } from './scenarios/startup.js';
import { runWake } from './scenarios/wake.js';
import { TEMPORAL_SERVER_VERSION } from '../dev/temporal-versions.js';
import { AIM_JOBS, ranSide } from './summary.js';
import { fixed } from './stats.js';
import { POLL_JITTER } from '../src/poll-schedule.js';

const SCENARIOS = ['startup', 'load', 'cost', 'quota', 'codec', 'wake', 'choices'] as const;
type Scenario = (typeof SCENARIOS)[number];

interface Flags {
  full?: boolean;
  maxJobs: number;
  points?: LoadPoint[];
  repeats?: number;
  costMaxPolls?: number;
  scale: number;
  wakeJobs?: number;
  only?: Scenario[];
  server: BenchServer;
  write: boolean;
  reportOnly?: boolean;
}

const HOUR_MS = 60 * 60_000;

const program = new Command('npm run bench --')
  .usage('[--quick | --full] [options]')
  .option('--quick', 'the quick load points (below), start-up, cost per job (default)')
  .addOption(
    new Option(
      '--full',
      'the ladder of N (below) up to --max-jobs, design choices, 6-hour jobs in the cost table',
    ).conflicts('quick'),
  )
  .option('--max-jobs <N>', 'largest N in full mode', positiveInt, 10_000)
  .option(
    '--points <list>',
    'load points instead of the mode\'s, e.g. "100@2s*3,1000@10s,2000@10s" (*R: repeats of that point)',
    parsePoints,
  )
  .option('--repeats <R>', 'repeats of each load run (quick 1, full 3)', positiveInt)
  .option(
    '--cost-max-polls <P>',
    'run the cost of jobs up to P polls (quick 20, full 100) and extrapolate longer ones from them; each poll takes a second or more',
    positiveInt,
  )
  .option(
    '--scale <K>',
    "cost runs go K times faster than real time (at most 500: the workflow's shortest interval is 10 ms)",
    scale,
    240,
  )
  .option(
    '--wake-jobs <N>',
    'jobs the wake scenario holds (quick 100, full 1000): pollNow → GET and follow-up → POST latency, and a worker ' +
      'SIGKILLed and replaced (quick mode waits 20 s for polling to resume, full mode past the 75 s timeout)',
    positiveInt,
  )
  .option('--only <list>', `run only some of: ${SCENARIOS.join(', ')}`, parseOnly)
  .addOption(
    new Option(
      '--server <kind>',
      `dev: the dev server; postgres: Temporal Server v${TEMPORAL_SERVER_VERSION} on PostgreSQL, set up by the ` +
        'compose files as `npm run test:cluster` does',
    )
      .choices(['dev', 'postgres'])
      .default('dev'),
  )
  .option('--no-write', 'print only; write neither bench/results/ nor docs/PERFORMANCE.md')
  .option('--report-only', 'run nothing; regenerate docs/PERFORMANCE.md from bench/results/')
  .addHelpText(
    'after',
    `
Quick load points: ${describePoints(QUICK_POINTS)}.
The ladder of N: ${describePoints(LADDER)}.

Figures are taken on this machine; a busy machine gives noisy figures, so each load figure is the
median over the repeats, shown with its min–max.`,
  )
  .showHelpAfterError()
  .exitOverride();

/** Everything a run will do, decided from the flags before anything starts. */
type Plan = ReturnType<typeof plan>;

function plan(flags: Flags) {
  const mode: Mode = flags.full ? 'full' : 'quick';
  const quick = mode === 'quick';
  const settings: BenchResult['settings'] = {
    repeats: flags.repeats ?? (quick ? 1 : 3),
    points: flags.points ?? (quick ? [...QUICK_POINTS] : LADDER.filter((p) => p.jobs <= flags.maxJobs)),
    steadyCadences: quick ? 1 : 2,
    costScale: flags.scale,
    costLengthsMs: [60_000, 10 * 60_000, HOUR_MS, ...(quick ? [] : [6 * HOUR_MS])],
    costSamples: quick ? 2 : 3,
    startupRepeats: quick
      ? { 'prebuilt-bundle': 2, workflowsPath: 1 }
      : { 'prebuilt-bundle': 3, workflowsPath: 3 },
    // The PostgreSQL server runs with the compose file's dynamic config, not the raised limits.
    dynamicConfig: flags.server === 'dev' ? DYNAMIC_CONFIG : {},
    // Half the aim's N, at its cadence: big enough to fill the cache of 250 twice, small enough to
    // run five sides in a few minutes.
    choices: quick ? [] : designChoices({ jobs: Math.min(500, flags.maxJobs), cadenceMs: 10_000 }),
    servers: 'per-run',
    pollJitter: POLL_JITTER,
  };
  return {
    mode,
    /** What the result records of them. */
    settings,
    costMaxPolls: flags.costMaxPolls ?? (quick ? 20 : 100),
    // Quick mode holds fewer jobs: the ramp of 1,000 workflows alone takes a minute or more here.
    wakeJobs: flags.wakeJobs ?? (quick ? 100 : 1000),
    only: new Set((flags.only ?? SCENARIOS).filter((s) => !(quick && s === 'choices'))),
    write: flags.write,
    server: flags.server,
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
      name: 'payload codec',
      why: 'sealing and opening every payload costs CPU on the worker, and 91 bytes a payload on the server',
      point,
      sides: [defaults, { variant: 'payload codec on', sealed: true }],
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

function parsePoints(text: string): LoadPoint[] {
  return text.split(',').map((part) => {
    const match = /^\s*(\d+)@(\d+(?:\.\d+)?)(ms|s)(?:\*(\d+))?\s*$/.exec(part);
    if (!match)
      throw new InvalidArgumentError(`"${part}" is not N@cadence[*repeats] such as 1000@10s or 100@2s*3`);
    const value = Number(match[2]);
    const point: LoadPoint = { jobs: Number(match[1]), cadenceMs: match[3] === 's' ? value * 1000 : value };
    if (match[4] !== undefined) point.repeats = positiveInt(match[4]);
    return point;
  });
}

function positiveInt(text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new InvalidArgumentError('a whole number of at least 1');
  return value;
}

function scale(text: string): number {
  const value = positiveInt(text);
  // The default schedule's 5 s first interval must stay at or above the workflow's 10 ms floor.
  if (value > 500) throw new InvalidArgumentError('at most 500');
  return value;
}

function parseOnly(text: string): Scenario[] {
  return text.split(',').map((name) => {
    const scenario = SCENARIOS.find((s) => s === name.trim());
    if (!scenario) throw new InvalidArgumentError(`"${name}" is none of ${SCENARIOS.join(', ')}`);
    return scenario;
  });
}

const say = (line: string) => process.stderr.write(`[bench] ${line}\n`);

async function runLoads(env: BenchEnvironment, p: Plan, result: BenchResult): Promise<void> {
  const stopped = new Set<Implementation>();
  for (const point of p.settings.points) {
    // A run that broke stops its implementation at once; one that could not hold the cadence
    // lets the point's other repeats run, so the point where the climb ends has its spread too.
    const stopAfterPoint = new Map<Implementation, string>();
    for (let repeat = 1; repeat <= (point.repeats ?? p.settings.repeats); repeat++) {
      for (const impl of runOrder(point.impls ?? IMPLEMENTATIONS, repeat)) {
        if (stopped.has(impl)) continue;
        const run = await loadRun(env, p, point, impl, repeat);
        result.load.push(run);
        // Full mode climbs a ladder of N; a broken run or a cadence not held ends the climb.
        if (p.mode !== 'full') continue;
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

/** One load run on a fresh server, this worker's defaults unless `side` says otherwise. */
async function loadRun(
  env: BenchEnvironment,
  p: Plan,
  point: LoadPoint,
  impl: Implementation,
  repeat: number,
  { variant, workerEnv = {}, sealed = false }: ChoiceSide = { variant: '' },
): Promise<LoadRun> {
  const started = Date.now();
  const repeats = point.repeats ?? p.settings.repeats;
  say(
    `load ${impl}${variant ? ` [${variant}]` : ''} N=${point.jobs} @ ${point.cadenceMs / 1000}s (${repeat}/${repeats})`,
  );
  await env.renewServer();
  const { steadyCadences } = p.settings;
  const run = await env.scenario(() =>
    runLoad(env, { impl, ...point, steadyCadences, workerEnv, variant, sealed }),
  );
  say(
    `  ${Math.round((Date.now() - started) / 1000)} s: ${run.throughput.toFixed(1)} jobs/s, ` +
      `p99 ${fixed(run.latency?.p99, 2, ' s', 1000)}, ${run.steadyPollsPerSecond.toFixed(0)} polls/s, ` +
      `CPU ${run.cpuPer1000Polls.measured.toFixed(2)} s/1k polls${run.broke ? `, broke: ${run.broke}` : ''}`,
  );
  return run;
}

/** Each side of each design choice at its point, once per repeat: the defaults serve every choice. */
async function runChoices(env: BenchEnvironment, p: Plan, result: BenchResult): Promise<void> {
  const sides = new Map(
    p.settings.choices.flatMap(({ point, sides }) =>
      sides.map((side) => [`${point.jobs}|${point.cadenceMs}|${side.variant}`, { point, side }] as const),
    ),
  );
  for (let repeat = 1; repeat <= p.settings.repeats; repeat++) {
    for (const { point, side } of sides.values()) {
      const ran = result.load.filter((r) => ranSide(r, { ...point, impl: 'worker', variant: side.variant }));
      // The ladder may have run this worker's defaults at this point already.
      if (ran.length < repeat) result.load.push(await loadRun(env, p, point, 'worker', repeat, side));
    }
  }
}

/**
 * This worker's wake-ups and restart, then, in full mode, the restart of (c) (1.0's shape: a timer
 * and a local activity per poll) and of (b), beside it.
 */
async function runWakes(env: BenchEnvironment, p: Plan): Promise<BenchResult['wake']> {
  const impls = p.mode === 'full' ? (['worker', 'floor', 'poll-by-retry'] as const) : (['worker'] as const);
  const runs = [];
  for (const impl of impls) {
    say(`wake-ups and a worker SIGKILLed: ${impl} N=${p.wakeJobs} at 10 s`);
    const started = Date.now();
    await env.renewServer();
    const run = await env.scenario(() =>
      runWake(env, { impl, jobs: p.wakeJobs, quick: p.mode === 'quick', log: say }),
    );
    runs.push(run);
    const ms = (v: number | null | undefined) => fixed(v, 0, ' ms');
    say(
      `  ${Math.round((Date.now() - started) / 1000)} s: pollNow p99 ${ms(run.pollNow?.p99)}, ` +
        `follow-up p99 ${ms(run.followUp?.p99)}, restart p50 ${ms(run.restart?.resumed.p50)} ` +
        `p99 ${ms(run.restart?.resumed.p99)}${run.broke ? `, broke: ${run.broke}` : ''}`,
    );
  }
  return runs;
}

/** Runs the scenarios of the plan into `result`; what ran before a break stays in it. */
async function runScenarios(env: BenchEnvironment, p: Plan, result: BenchResult): Promise<void> {
  // Jobs per side of the quota's and the payload codec's comparisons.
  const sideJobs = p.mode === 'quick' ? 10 : 20;
  if (p.only.has('startup')) {
    say('start-up');
    result.startup = await env.scenario(() => runStartup(env, p.settings.startupRepeats));
  }
  if (p.only.has('cost')) {
    say(`cost per job, schedules ${p.settings.costScale} times faster than real time`);
    result.cost = await env.scenario(() =>
      runCost(env, {
        // The fixed 10 s schedule polls 360 times an hour: full mode only.
        variants: COST_VARIANTS.filter((v) => p.mode === 'full' || v.name !== 'this worker, fixed 10 s'),
        jobLengthsMs: p.settings.costLengthsMs,
        scale: p.settings.costScale,
        samples: p.settings.costSamples,
        maxMeasuredPolls: p.costMaxPolls,
        log: say,
      }),
    );
  }
  if (p.only.has('quota')) {
    say('project quota on and off');
    result.quota = await env.scenario(() => runQuotaCost(env, { jobs: sideJobs, log: say }));
  }
  if (p.only.has('codec')) {
    say('payload codec off and on');
    result.codec = await env.scenario(() => runCodecCost(env, { jobs: sideJobs, log: say }));
  }
  if (p.only.has('wake')) result.wake = await runWakes(env, p);
  if (p.only.has('load')) await runLoads(env, p, result);
  if (p.only.has('choices')) await runChoices(env, p, result);
}

async function main(): Promise<number> {
  try {
    program.parse();
  } catch (err) {
    // Commander has printed the help, or what is wrong with the flags and the help.
    return (err as { exitCode?: number }).exitCode === 0 ? 0 : 2;
  }
  const flags = program.opts<Flags>();
  if (flags.reportOnly) {
    await writePerformanceDoc();
    say('regenerated docs/PERFORMANCE.md from bench/results/');
    return 0;
  }
  const p = plan(flags);
  const began = Date.now();
  const cpuAtStart = cpuTimes();
  say(`${p.mode} mode: ${[...p.only].join(', ')}`);
  const env = await startBenchEnvironment(say, p.server);
  const stop = () => {
    say('interrupted: stopping what the benchmark started');
    void env.close().finally(() => process.exit(130));
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
      machine: describeMachine(env.temporal.version),
      settings: p.settings,
      setupMs: env.setupMs,
      server: p.server,
      startup: [],
      load: [],
      ladderStops: [],
      cost: [],
    };
    let failure: Error | null = null;
    try {
      await runScenarios(env, p, result);
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
    process.stdout.write(await formatMarkdown(render(result)));
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
