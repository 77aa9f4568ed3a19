/**
 * Writes a run down: its JSON under bench/results/, docs/PERFORMANCE.md regenerated from there,
 * and the markdown that `npm run bench` prints at the end.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as prettier from 'prettier';
import { ROOT, WORKER_ENTRY } from './build.js';
import {
  BASELINES,
  COST_VARIANTS,
  IMPLEMENTATIONS,
  LADDER,
  label,
  mark,
  QUICK_POINTS,
  type BenchServer,
  type DesignChoice,
  type Implementation,
  type LoadPoint,
} from './catalogue.js';
import { pollJitterOf, type BenchResult } from './result.js';
import type { CodecCost } from './scenarios/codec.js';
import type { QuotaCostSide } from './scenarios/quota.js';
import type { StartupMode, StartupRun } from './scenarios/startup.js';
import type { WakeRun } from './scenarios/wake.js';
import { ACTION_KINDS, DETECTION_PARTS, DETECTION_SAMPLE, perPart, type ActionCounts } from './history.js';
import { fixed, num, ratio, spread, spreadText as f, times } from './stats.js';
import {
  cpuInclServer,
  evaluateAims,
  ranSide,
  ratios,
  summarizeLoad,
  type LoadSummary,
  type RatioRow,
} from './summary.js';

const RESULTS_DIR = join(ROOT, 'bench', 'results');
const PERFORMANCE_DOC = join(ROOT, 'docs', 'PERFORMANCE.md');

/**
 * Writes the run's JSON, then removes the runs of its kind that the report no longer reads, so
 * bench/results/ does not grow; returns its path.
 */
export function writeResult(result: BenchResult): string {
  const kind = kindOf(result.mode, result.server);
  const summary = summarizeLoad(result.load);
  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = result.startedAt.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const path = join(RESULTS_DIR, `${stamp}-${kind}.json`);
  const written = {
    ...result,
    summary: { load: summary, ratios: ratios(summary, result.cost), aims: evaluateAims(result, summary) },
  };
  writeFileSync(path, `${JSON.stringify(written, null, 2)}\n`);
  // Each part of the report comes from the newest run of the kind that has it: a run that is the
  // newest with no part is read no more. The newest stays in any case, as the record of the last run.
  const names = resultNames(kind);
  const runs = names.map(readResult);
  const read = new Set([runs[0], ...sourcesOf(runs).keys()]);
  for (const name of names.filter((_, i) => !read.has(runs[i]))) rmSync(join(RESULTS_DIR, name));
  return path;
}

/** The file names of the results of a kind ("quick", "full", "quick-postgres"), newest first. */
function resultNames(kind: string): string[] {
  try {
    return readdirSync(RESULTS_DIR)
      .filter((n) => n.endsWith(`-${kind}.json`))
      .sort()
      .reverse();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

function readResult(name: string): BenchResult {
  return JSON.parse(readFileSync(join(RESULTS_DIR, name), 'utf8')) as BenchResult;
}

/** Runs on PostgreSQL are a kind of their own, so the dev server's newest runs stay the ones shown. */
function kindOf(mode: BenchResult['mode'], server: BenchServer = 'dev'): string {
  return server === 'postgres' ? `${mode}-postgres` : mode;
}

/** Every result of a mode on a server in bench/results/, newest first. */
function results(mode: BenchResult['mode'], server?: BenchServer): BenchResult[] {
  return resultNames(kindOf(mode, server)).map(readResult);
}

/** `text` formatted by the project's Prettier settings, so that `prettier --check` passes on the page. */
export async function formatMarkdown(text: string): Promise<string> {
  const options = (await prettier.resolveConfig(PERFORMANCE_DOC)) ?? {};
  return prettier.format(text, { ...options, filepath: PERFORMANCE_DOC });
}

/** The page's hand-written parts, with a `{{part}}` where each generated one goes (see its comment). */
const PAGE_TEMPLATE = join(ROOT, 'bench', 'performance-page.md');

/**
 * Regenerates docs/PERFORMANCE.md from the full, quick and quick-on-PostgreSQL runs in bench/results/
 * (kinds apart, so a quick run in CI never pushes the full run out). Each part comes from the newest
 * run of its kind that has it, so a later `--only choices` run replaces the design choices and leaves
 * the rest; every part is shown under the run it came from.
 */
export async function writePerformanceDoc(): Promise<void> {
  const parts: Record<string, string> = {
    'quick points': describePoints(QUICK_POINTS),
    ladder: describePoints(LADDER),
    'worker entry': WORKER_ENTRY,
    'full run': renderNewest(results('full')) ?? 'No full run recorded yet: run `npm run bench -- --full`.',
    'quick run':
      renderNewest(results('quick')) ?? 'No quick run recorded yet: run `npm run bench -- --quick`.',
    'quick run on PostgreSQL':
      renderNewest(results('quick', 'postgres')) ??
      'No run on PostgreSQL recorded yet: run `npm run bench -- --quick --server postgres`.',
  };
  const page = readFileSync(PAGE_TEMPLATE, 'utf8')
    .replace(/^<!--[\s\S]*?-->\n+/, '')
    .replace(/\{\{([^}]+)\}\}/g, (_, name: string) => {
      if (parts[name] === undefined) throw new Error(`${PAGE_TEMPLATE} names no part "${name}"`);
      return parts[name];
    });
  writeFileSync(PERFORMANCE_DOC, await formatMarkdown(page));
}

/** A heading at the level of the part it is written into. */
type Heading = (title: string) => string;

/** A part of a report: a run made with `--only` has some of them. */
interface Section {
  name: 'load' | 'cost' | 'quota' | 'codec' | 'wake' | 'startup' | 'choices';
  has(result: BenchResult): boolean;
  render(result: BenchResult, loads: LoadSummary[], h: Heading): string[];
}

/** The parts, in the order a report shows them. */
const SECTIONS: readonly Section[] = [
  {
    name: 'load',
    has: (r) =>
      r.load.some((run) => run.variant === '' && r.settings.points.some((p) => p.jobs === run.jobs)),
    render: (result, loads, h) => [
      h('Throughput, detection latency, worker resources'),
      loadTable(loads.filter((s) => s.variant === '' && IMPLEMENTATIONS.includes(s.impl))),
      ...detectionTable(loads, h),
      ...marginalMemory(loads),
      ...(result.ladderStops.length === 0
        ? []
        : [
            `Where the ladder of N stopped: ${result.ladderStops.map((s) => `${s.impl} at N=${s.jobs}: ${s.reason}`).join('; ')}.\n`,
          ]),
      h('This worker as ratios to the baselines'),
      ratioTable(loads, result),
    ],
  },
  { name: 'cost', has: (r) => r.cost.length > 0, render: (r, _, h) => [h('Cost per job'), costTable(r)] },
  {
    name: 'quota',
    has: (r) => (r.quota?.length ?? 0) > 0,
    render: (r, _, h) => [h('What the project quota adds per job'), quotaTable(r.quota ?? [])],
  },
  {
    name: 'codec',
    has: (r) => r.codec !== undefined,
    render: (r, _, h) =>
      r.codec ? [h('What the payload codec costs per job and per poll'), codecTable(r.codec)] : [],
  },
  {
    name: 'wake',
    has: (r) => (r.wake?.length ?? 0) > 0,
    render: (r, _, h) => [h('Waking a waiting poll: pollNow, follow-ups, a worker SIGKILLed'), wakeTable(r)],
  },
  {
    name: 'startup',
    has: (r) => r.startup.length > 0,
    render: (r, _, h) => [h('Start-up'), startupTable(r)],
  },
  {
    name: 'choices',
    has: (r) => r.settings.choices.length > 0 && r.load.some((run) => run.variant !== ''),
    render: (r, loads, h) => [h('Design choices, both sides'), choiceTable(r.settings.choices, loads)],
  },
];

type SectionName = Section['name'];

/** The runs the report shows, newest first, each with the parts it is the newest run to have. */
function sourcesOf(runs: readonly BenchResult[]): Map<BenchResult, Set<SectionName>> {
  const sources = new Map<BenchResult, Set<SectionName>>();
  for (const section of SECTIONS) {
    const source = runs.find((r) => section.has(r));
    if (source) sources.set(source, new Set([...(sources.get(source) ?? []), section.name]));
  }
  return sources;
}

function renderNewest(runs: BenchResult[]): string | null {
  const sources = sourcesOf(runs);
  if (sources.size === 0) return null;
  if (sources.size === 1) {
    const [[only, sections]] = [...sources] as [[BenchResult, Set<SectionName>]];
    return render(only, 3, sections);
  }
  // Parts from several runs: the aims are judged on them together, then each run is shown.
  const pick = (section: SectionName) => [...sources].find(([, set]) => set.has(section))?.[0];
  const base = pick('load') ?? [...sources.keys()][0]!;
  const combined: BenchResult = {
    ...base,
    load: pick('load')?.load ?? [],
    cost: pick('cost')?.cost ?? [],
    startup: pick('startup')?.startup ?? [],
    quota: pick('quota')?.quota ?? [],
    wake: pick('wake')?.wake ?? [],
    codec: pick('codec')?.codec,
  };
  const out = ['### Aims, judged on the runs below\n', aimsTable(combined, summarizeLoad(combined.load))];
  for (const [run, sections] of sources) {
    out.push(`### Run of ${when(run)} UTC: ${[...sections].join(', ')}\n`);
    out.push(render(run, 4, sections, false));
  }
  return out.join('\n');
}

/**
 * The report of one run, in markdown under headings of `level`: the sections asked for, and the
 * aims unless `withAims` is false.
 */
export function render(
  result: BenchResult,
  level = 2,
  sections: ReadonlySet<SectionName> = new Set(SECTIONS.map((s) => s.name)),
  withAims = true,
): string {
  const h: Heading = (title) => `${'#'.repeat(level)} ${title}\n`;
  const loads = summarizeLoad(result.load);
  const out = [header(result)];
  if (withAims) out.push(h('Aims'), aimsTable(result, loads));
  for (const section of SECTIONS) {
    if (sections.has(section.name) && section.has(result)) out.push(...section.render(result, loads, h));
  }
  return out.join('\n');
}

/** When a run started, as its headings say it: "2026-11-27 10:54". */
function when(result: BenchResult): string {
  return result.startedAt.slice(0, 16).replace('T', ' ');
}

function header(result: BenchResult): string {
  const { machine: m, settings } = result;
  const lines = [
    `Mode: ${result.mode}, run ${when(result)} UTC, ${Math.round(result.durationSeconds)} s in all.`,
    `Command: \`${result.command}\`.`,
    `Machine: ${m.cpuCount} × ${m.cpuModel}, ${m.totalMemoryGiB} GiB, Linux ${m.kernel}; shared with other work while measured ` +
      `(1-minute load average ${m.loadAverageAtStart.toFixed(2)} at the start, ${m.loadAverageAtEnd?.toFixed(2) ?? '?'} at the end; ` +
      `cores busy ${m.cpuBusyPercent?.toFixed(0) ?? '?'}% of the run, ${m.cpuStealPercent?.toFixed(1) ?? '?'}% stolen by the hypervisor).`,
    `Versions: Node ${m.node}, ${m.temporalCli ? `Temporal CLI ${m.temporalCli}, ` : ''}server ${m.temporalServer}${result.server === 'postgres' ? ' on PostgreSQL' : ''}, TypeScript SDK ${m.temporalSdk}.`,
    `Load points: ${settings.points
      .map((p) => `N=${p.jobs} at ${p.cadenceMs / 1000} s ×${p.repeats ?? settings.repeats}`)
      .join(', ')}${settings.choices.length > 0 ? `; design choices ×${settings.repeats}` : ''} ` +
      `(figures are medians, with min–max when repeated); cost: ${settings.costSamples} jobs per row, ` +
      `schedules ${settings.costScale} times faster than real time.`,
    settings.servers === 'per-run'
      ? 'Each load and wake run had a fresh Temporal server; each repeat ran the implementations in another order.'
      : 'All runs shared one Temporal server, the implementations in the same order in every repeat.',
    `Poll jitter: ±${Math.round(pollJitterOf(result) * 100)}% on every wait of this worker, (a) and (c).`,
  ];
  if (result.error) lines.push(`This run broke part-way, and exited 1: ${result.error.split('\n')[0]}`);
  return `${lines.join('\n')}\n`;
}

/** A column of a table: its header, and its cell in a row. */
type Column<T> = [header: string, cell: (row: T) => string];

/** A markdown table of `rows`, one column per entry of `columns`. */
function table<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const line = (cells: string[]) => `| ${cells.map((cell) => cell.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [
    line(columns.map(([header]) => header)),
    line(columns.map(() => '---')),
    ...rows.map((row) => line(columns.map(([, cell]) => cell(row)))),
    '',
  ].join('\n');
}

function aimsTable(result: BenchResult, loads: LoadSummary[]): string {
  return table(evaluateAims(result, loads), [
    ['Aim', (a) => a.aim],
    ['Status', (a) => a.status],
    ['Where it lands', (a) => a.landed],
    ['What limits it', (a) => a.limits],
  ]);
}

/** At each N the baselines in the order of their marks, then this worker, right under (c). */
function byPoint(a: LoadSummary, b: LoadSummary): number {
  const order: readonly Implementation[] = [...BASELINES, 'worker'];
  return a.jobs - b.jobs || order.indexOf(a.impl) - order.indexOf(b.impl);
}

/** The columns a load point's figures show in, in the load table and the design choices' table. */
const LOAD_COLUMNS = {
  jobs: ['jobs/s', (s) => f(s.throughput, 1)],
  p99: ['p99 s', (s) => f(s.p99, 2, 1000)],
  polls: ['polls/s (asked)', (s) => `${f(s.steadyPollsPerSecond, 0)} / ${s.targetPollsPerSecond.toFixed(0)}`],
  cpu: ['CPU s/1k polls', (s) => f(s.cpuMeasured, 2)],
  serverCpu: ['server CPU s/1k polls', (s) => f(s.cpuServer, 2)],
  cpuPerStart: ['CPU ms/start', (s) => f(s.cpuPerStartMs, 0)],
  rss: ['peak RSS MiB', (s) => f(s.peakRssMiB, 0)],
  events: ['events/job', (s) => f(s.eventsPerJob, 0)],
  actions: ['actions/job', (s) => f(s.actionsPerJob, 1)],
} satisfies Record<string, Column<LoadSummary>>;

/** A load point's N, cadence and implementation. */
const POINT_COLUMNS: Column<LoadSummary>[] = [
  ['N', (s) => String(s.jobs)],
  ['cadence', (s) => `${s.cadenceMs / 1000} s`],
  ['implementation', (s) => label(s.impl)],
];

function loadTable(loads: LoadSummary[]): string {
  const c = LOAD_COLUMNS;
  return table([...loads].sort(byPoint), [
    ...POINT_COLUMNS,
    c.jobs,
    ['ramp s', (s) => f(s.rampSeconds, 1)],
    ['p50 s', (s) => f(s.p50, 2, 1000)],
    ['p95 s', (s) => f(s.p95, 2, 1000)],
    c.p99,
    c.polls,
    c.cpu,
    c.serverCpu,
    c.cpuPerStart,
    c.rss,
    ['RSS MiB/1k open', (s) => f(s.rssPer1000Open, 0)],
    ['API req/job', (s) => f(s.apiRequestsPerJob, 2)],
    c.events,
    c.actions,
    ['note', (s) => (s.broke.length > 0 ? `broke: ${s.broke[0]}` : '')],
  ]);
}

/**
 * The detection split of each Temporal implementation's load runs (./history.ts), p50 / p99 of each
 * part in seconds; nothing when no run has one.
 */
function detectionTable(loads: LoadSummary[], h: Heading): string[] {
  const rows = loads.filter((s) => s.variant === '' && s.detection !== null).sort(byPoint);
  if (rows.length === 0) return [];
  const intro =
    `p50 / p99 of each part, in seconds, from the histories of up to ${DETECTION_SAMPLE} closed workflows per run ` +
    "((c)'s reads are local activities, which leave no start in a history, so it has no split; the job's end " +
    "is the simulator's clock, the rest the server's): the p99 of a part and of the whole need not come " +
    'from the same jobs.\n';
  const parts = perPart((part): Column<LoadSummary> => [
    DETECTION_PARTS[part],
    ({ detection: d }) => `${f(d?.p50[part], 2, 1000)} / ${f(d?.p99[part], 2, 1000)}`,
  ]);
  return [
    h('Where detection latency goes'),
    `${intro}\n${table(rows, [...POINT_COLUMNS, ...Object.values(parts)])}`,
  ];
}

/**
 * Resident memory each further 1,000 open jobs adds, between the smallest and the largest N an
 * implementation ran: free of what the process and its first workflows warm up once.
 */
function marginalMemory(loads: LoadSummary[]): string[] {
  const parts = IMPLEMENTATIONS.flatMap((impl) => {
    const own = loads
      .filter((s) => s.impl === impl && s.variant === '' && s.peakRssMiB && s.broke.length === 0)
      .sort((a, b) => a.jobs - b.jobs);
    const [low, high] = [own[0], own.at(-1)];
    if (!low?.peakRssMiB || !high?.peakRssMiB || high.jobs === low.jobs) return [];
    const perThousand = ((high.peakRssMiB.median - low.peakRssMiB.median) / (high.jobs - low.jobs)) * 1000;
    return [`${label(impl)} ${perThousand.toFixed(0)} MiB (N=${low.jobs} to ${high.jobs})`];
  });
  return parts.length === 0
    ? []
    : [`Resident memory each further 1,000 open jobs adds: ${parts.join('; ')}.\n`];
}

function ratioTable(loads: LoadSummary[], result: BenchResult): string {
  const rows = ratios(loads, result.cost);
  // A baseline with no figure in any row did not run (runs recorded before it existed): no columns.
  const shown = BASELINES.filter((b) => rows.some((r) => r.values[b] !== null));
  return table(rows, [
    ['at', (r) => (r.point === 'cost' ? 'cost' : `N=${r.point.jobs}, ${r.point.cadenceMs / 1000} s`)],
    ['figure', (r) => r.figure],
    ...(['worker', ...shown] as const).map((impl): Column<RatioRow> => [
      label(impl),
      (r) => num(r.values[impl]),
    ]),
    ...shown.map((b): Column<RatioRow> => [`÷ ${mark(b)}`, (r) => times(r.ratios[b])]),
  ]);
}

function costTable(result: BenchResult): string {
  const order = COST_VARIANTS.map((v) => v.name);
  const rows = [...result.cost].sort(
    (a, b) => order.indexOf(a.variant) - order.indexOf(b.variant) || a.jobLengthMs - b.jobLengthMs,
  );
  const hours = (ms: number) => (ms >= 3_600_000 ? `${ms / 3_600_000} h` : `${ms / 60_000} min`);
  return table(rows, [
    ['variant', (r) => r.variant],
    ['job length', (r) => `${hours(r.jobLengthMs)}${r.measured ? '' : ' (extrapolated)'}`],
    ['polls by the schedule', (r) => f(r.realTimePolls, 0)],
    ['polls made', (r) => f(r.polls, 0)],
    ['mean detection delay s', (r) => r.meanDetectionDelayS.toFixed(1)],
    ['events', (r) => f(r.events, 0)],
    ['max events/run', (r) => (r.maxRunEvents === null ? '' : String(r.maxRunEvents))],
    ['runs', (r) => f(r.runs, 0)],
    ['billable actions', (r) => f(r.actions, 0)],
    [
      'actions by kind',
      ({ actionBreakdown: a }) =>
        // The start always, the other kinds when any.
        a
          ? (Object.entries(ACTION_KINDS) as Array<[keyof ActionCounts, string]>)
              .filter(([kind]) => kind === 'workflowStarted' || a[kind])
              .map(([kind, name]) => `${name} ${a[kind]}`)
              .join(', ')
          : '',
    ],
    ['API req/job', (r) => f(r.apiRequestsPerJob, 0)],
  ]);
}

function quotaTable(sides: QuotaCostSide[]): string {
  const [on, off] = [sides.find((s) => s.quota !== 'off'), sides.find((s) => s.quota === 'off')];
  const added =
    on && off && on.eventsPerJob !== null && off.eventsPerJob !== null
      ? `\nThe quota adds ${num(on.eventsPerJob - off.eventsPerJob)} events and ${num(
          (on.actionsPerJob ?? 0) - (off.actionsPerJob ?? 0),
        )} billable actions per job all told (${times(ratio(on.actionsPerJob, off.actionsPerJob))} the actions), ` +
        `and ${num((on.startLatencyMs?.median ?? 0) - (off.startLatencyMs?.median ?? 0))} ms to the median start.\n`
      : '';
  const chainText = ({ quotaWorkflow: q }: QuotaCostSide) =>
    q
      ? `${q.events} events, ${q.actions} actions (${q.updates} updates, ${q.timers} timers), ${q.runs} run(s)`
      : '';
  return table(sides, [
    ['quota', (s) => (s.quota === 'off' ? 'off' : `on (${s.quota}, never waits)`)],
    ['jobs', (s) => String(s.jobs)],
    ['events/job (own history)', (s) => f(s.jobEvents, 0)],
    ['actions/job (own history)', (s) => f(s.jobActions, 1)],
    ['quota workflow, whole chain', chainText],
    ['events/job, all told', (s) => num(s.eventsPerJob)],
    ['actions/job, all told', (s) => num(s.actionsPerJob)],
    ['start to create at the API, ms', (s) => f(s.startLatencyMs, 0)],
  ]).concat(added);
}

function codecTable({ sides, sealOpen }: CodecCost): string {
  const [off, on] = [sides.find((s) => s.codec === 'off'), sides.find((s) => s.codec === 'on')];
  const rows = table(sides, [
    ['payload codec', (s) => s.codec],
    ['jobs', (s) => String(s.jobs)],
    ['polls/job', (s) => f(s.polls, 0)],
    ['events/job', (s) => f(s.events, 0)],
    ['payloads/job', (s) => f(s.payloads, 0)],
    ['history bytes/job', (s) => f(s.historyBytes, 0)],
    ['worker CPU/poll, ms (load-sensitive)', (s) => num(s.workerCpuMsPerPoll)],
  ]);
  const { cpuUsPerJob: job, cpuUsPerPollInput: poll } = sealOpen;
  const bytes =
    off?.historyBytes && on?.historyBytes
      ? `The codec adds ${num(on.historyBytes.median - off.historyBytes.median)} bytes to a job's stored history ` +
        `(${times(ratio(on.historyBytes.median, off.historyBytes.median))} the bytes) and ` +
        `${num((on.events?.median ?? 0) - (off.events?.median ?? 0))} events. `
      : '';
  const own =
    job && poll
      ? `Sealing the ${sealOpen.payloads} payloads of one job's history (${sealOpen.bytes} bytes) and opening them ` +
        `again takes ${num(job.median)} µs of CPU (median of the rounds, ${f(job, 0)}); the poll activity's input ` +
        `(${sealOpen.pollInputBytes} bytes), which each poll attempt opens on the worker, ${num(poll.median)} µs` +
        (off
          ? `: ${num(poll.median / 10 / off.workerCpuMsPerPoll)}% of the worker's CPU per poll with the codec off ` +
            `(${num(off.workerCpuMsPerPoll)} ms in this run).`
          : '.')
      : '';
  return `${rows}\n${bytes}${own}\n`;
}

function wakeTable(result: BenchResult): string {
  const ms = (value: number | null) => fixed(value, 0);
  const rows: string[][] = [];
  const notes: string[] = [];
  for (const w of result.wake ?? []) {
    const point = `${label(w.impl)}, N=${w.jobs} at ${w.cadenceMs / 1000} s`;
    if (w.broke !== null) {
      rows.push([point, 'broke', '', '', '', w.broke.split('\n')[0] ?? '']);
      continue;
    }
    const delays = (what: string, d: WakeRun['pollNow'], arrived = '') => {
      if (d === null) return;
      const got = `${d.sent - d.missing} of ${d.sent}${arrived}`;
      rows.push([point, what, ms(d.p50), ms(d.p99), ms(d.max), got]);
    };
    delays('pollNow signal → its GET', w.pollNow);
    delays('sendMessage update → its POST', w.followUp);
    const r = w.restart;
    if (r) {
      delays(
        "worker SIGKILLed → each job's next GET",
        r.resumed,
        ` jobs within ${Math.round(r.waitedMs / 1000)} s of the new worker's start; ` +
          `${r.late} of them more than a cadence after it`,
      );
      notes.push(
        `${point}: the new worker ran ${ms(r.newWorkerRunningMs)} ms after the kill. ` +
          restartNote(w.impl, r),
      );
    }
    const c = w.pollCounts;
    if (c) {
      notes.push(
        `${point}: ${c.sampled} jobs woken by pollNow, run to their end: the simulator received ${c.simulatorGets} GETs, ` +
          `their histories show ${c.historyAttempts} poll attempts. A poll activity cancelled while it waits between ` +
          `attempts leaves no ActivityTaskStarted event, so the attempts it made (each a GET and a billable action) ` +
          `appear in no history: polls are counted at the simulator.`,
      );
    }
  }
  const columns = ['point', 'from → to', 'p50 ms', 'p99 ms', 'max ms', 'arrived'];
  return `${table(
    rows,
    columns.map((header, i): Column<string[]> => [header, (row) => row[i] ?? '']),
  )}\n${notes.join('\n\n')}\n`;
}

/** How each implementation's polls come back after a SIGKILL, and the jobs that waited past a timeout. */
function restartNote(impl: Implementation, r: NonNullable<WakeRun['restart']>): string {
  if (impl === 'floor') {
    return (
      'Each poll is a local activity inside a workflow task: a task the killed worker held is retried after ' +
      "the workflow task timeout, one sent to the killed worker's sticky queue after the sticky " +
      'schedule-to-start timeout, and the new worker replays each workflow it takes over (not broken down here).'
    );
  }
  const backoff =
    impl === 'worker'
      ? "the retry policy's interval for a timeout (1 s, coefficient 1)"
      : "its retry policy's interval (the cadence, coefficient 1)";
  const past =
    r.pastTimeoutMs.length > 0
      ? `Jobs resumed past the timeout: ${r.pastTimeoutMs.length}, after ${r.pastTimeoutMs.map((v) => `${(v / 1000).toFixed(0)} s`).join(', ')}.`
      : 'No job waited past the timeout.';
  return (
    `A poll attempt running on the killed worker is retried by the server only after its start-to-close ` +
    `timeout (${r.startToCloseMs / 1000} s) and then ${backoff}; an attempt waiting for its retry goes to the ` +
    `new worker when its wait ends. ${past}`
  );
}

/** How each start-up mode is run, as the start-up table names it. */
const STARTUP_MODES: Array<[StartupMode, string]> = [
  ['prebuilt-bundle', `prebuilt bundle (\`node lib/${WORKER_ENTRY}.js\`)`],
  ['workflowsPath', 'no bundle (`npm run worker`, webpack at start)'],
  ['modules-only', 'not a worker: `node` importing @temporalio/worker, then exiting'],
];

function startupTable(result: BenchResult): string {
  const of = (mode: StartupMode, pick: (r: StartupRun) => number | null) =>
    f(spread(result.startup.filter((r) => r.mode === mode).map(pick)), 0);
  return table(STARTUP_MODES, [
    ['worker started with', ([, name]) => name],
    ['starts', ([mode]) => String(result.startup.filter((r) => r.mode === mode).length)],
    ['to first poll, ms', ([mode]) => of(mode, (r) => r.firstPollMs)],
    ['to "worker running" (or exit), ms', ([mode]) => of(mode, (r) => r.runningMs)],
    ['startupMs the worker logs', ([mode]) => of(mode, (r) => r.reportedStartupMs)],
  ]);
}

/** One side of a design choice, with the side listed above it (none for the first). */
type ChoiceRow = LoadSummary & { choice: string; side: string; above: LoadSummary | null };

function choiceTable(choices: DesignChoice[], loads: LoadSummary[]): string {
  const rows = choices.flatMap((choice) => {
    const sides = choice.sides.flatMap((side) => {
      const s = loads.find((l) => ranSide(l, { ...choice.point, impl: 'worker', variant: side.variant }));
      return s ? [{ ...s, choice: choice.name, side: side.variant || 'this worker, defaults' }] : [];
    });
    return sides.map((s, i): ChoiceRow => ({ ...s, above: sides[i - 1] ?? null }));
  });
  const c = LOAD_COLUMNS;
  const vsAbove = (value: (s: LoadSummary) => number | null | undefined) => (r: ChoiceRow) =>
    r.above ? times(ratio(value(r), value(r.above))) : '';
  return table<ChoiceRow>(rows, [
    ['choice', (r) => r.choice],
    ['side', (r) => r.side],
    ['at', (s) => `N=${s.jobs}, ${s.cadenceMs / 1000} s`],
    c.jobs,
    c.p99,
    c.polls,
    c.cpu,
    c.serverCpu,
    ['CPU incl. server, ÷ the row above', vsAbove(cpuInclServer)],
    ['p99, ÷ the row above', vsAbove((s) => s.p99?.median)],
    c.cpuPerStart,
    c.rss,
    ['API req/job', (s) => f(s.apiRequestsPerJob, 1)],
    c.events,
    c.actions,
  ]);
}

/**
 * Load points in words, for the usage text and the document, so that they say what the code runs:
 * "N = 100 at 2 s for this worker and every baseline; N = 1,000 at 10 s for this worker and (c)".
 */
export function describePoints(points: readonly LoadPoint[]): string {
  const who = (impls: readonly Implementation[] | undefined) =>
    impls === undefined
      ? 'this worker and every baseline'
      : list(impls.map((impl) => (impl === 'worker' ? 'this worker' : mark(impl))));
  const whos = points.map((p) => who(p.impls));
  const same = whos.every((w) => w === whos[0]);
  const each = points.map(
    (p, i) =>
      `N = ${p.jobs.toLocaleString('en-US')} at ${p.cadenceMs / 1000} s${same ? '' : ` for ${whos[i]}`}`,
  );
  if (!same) return each.join('; ');
  return `${list(each)}, ${points.length > 1 ? 'each ' : ''}for ${whos[0]}`;
}

/** "a", "a and b", "a, b and c". */
function list(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}
