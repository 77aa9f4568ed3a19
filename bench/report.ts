/**
 * Writes a run down: the JSON under bench/results/, and docs/PERFORMANCE.md, which is regenerated
 * from the newest full run, the newest quick run and the newest quick run on PostgreSQL in
 * bench/results/ (so a quick run in CI never pushes the full run out of it), and the same markdown
 * that `npm run bench` prints at the end. Writing a run removes the older runs of its kind that the
 * page no longer reads, so bench/results/ does not grow.
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
  pollJitterOf,
  QUICK_POINTS,
  type BenchResult,
  type BenchServer,
  type DesignChoice,
  type Implementation,
  type LoadPoint,
  type QuotaCostSide,
  type StartupMode,
  type WakeRun,
} from './catalogue.js';
import {
  ACTION_KINDS,
  DETECTION_PART_NAMES,
  DETECTION_PARTS,
  DETECTION_SAMPLE,
  type ActionCounts,
} from './history.js';
import { num, ratio, spread, spreadText as f, times } from './stats.js';
import {
  cpuInclServer,
  evaluateAims,
  quotaOwnCost,
  ratios,
  summarizeLoad,
  type LoadSummary,
  type RatioRow,
} from './summary.js';

/** Where results go. */
export const RESULTS_DIR = join(ROOT, 'bench', 'results');
/** The generated performance document. */
const PERFORMANCE_DOC = join(ROOT, 'docs', 'PERFORMANCE.md');

/** Writes the run's JSON, then removes the runs of its kind that the report no longer reads; returns its path. */
export function writeResult(result: BenchResult): string {
  // Runs on PostgreSQL are a kind of their own, so the dev server's newest runs stay the ones shown.
  const kind = result.server === 'postgres' ? `${result.mode}-postgres` : result.mode;
  const summary = summarizeLoad(result.load);
  const path = writeResultFile(result.startedAt, kind, {
    ...result,
    summary: { load: summary, ratios: ratios(summary, result.cost), aims: evaluateAims(result, summary) },
  });
  // Each part of the report comes from the newest run of the kind that has it: a run that is the
  // newest with no part is read no more. The newest stays in any case, as the record of the last run.
  const names = resultNames(kind);
  const runs = names.map(readResult);
  const read = new Set([runs[0], ...sourcesOf(runs).keys()]);
  removeResults(names.filter((_, i) => !read.has(runs[i])));
  return path;
}

/** Writes `content` as bench/results/<its start>-<kind>.json; returns its path. */
export function writeResultFile(startedAt: string, kind: string, content: unknown): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const stamp = startedAt.replace(/:/g, '-').replace(/\.\d+Z$/, 'Z');
  const path = join(RESULTS_DIR, `${stamp}-${kind}.json`);
  writeFileSync(path, `${JSON.stringify(content, null, 2)}\n`);
  return path;
}

/** The file names of the results of a kind ("quick", "full", "quick-postgres", "outage"), newest first. */
export function resultNames(kind: string): string[] {
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

/** Removes results from bench/results/, by file name. */
export function removeResults(names: readonly string[]): void {
  for (const name of names) rmSync(join(RESULTS_DIR, name));
}

function readResult(name: string): BenchResult {
  return JSON.parse(readFileSync(join(RESULTS_DIR, name), 'utf8')) as BenchResult;
}

/** Every result of a mode on a server in bench/results/, newest first. */
function results(mode: BenchResult['mode'], server: BenchServer = 'dev'): BenchResult[] {
  return resultNames(server === 'postgres' ? `${mode}-postgres` : mode).map(readResult);
}

/** `text` formatted by the project's Prettier settings, so that `prettier --check` passes on the page. */
export async function formatMarkdown(text: string): Promise<string> {
  const options = (await prettier.resolveConfig(PERFORMANCE_DOC)) ?? {};
  return prettier.format(text, { ...options, filepath: PERFORMANCE_DOC });
}

/**
 * Regenerates docs/PERFORMANCE.md from bench/results/. Each part comes from the newest run of its
 * mode that has it, so a later `--only choices` run replaces the design choices and leaves the
 * rest; every part is shown under the run it came from.
 */
export async function writePerformanceDoc(): Promise<void> {
  const parts = [
    DOC_INTRO,
    '## Latest full run\n',
    renderNewest(results('full')) ?? 'No full run recorded yet: run `npm run bench -- --full`.\n',
    '## Latest quick run\n',
    renderNewest(results('quick')) ?? 'No quick run recorded yet: run `npm run bench -- --quick`.\n',
    '## Latest quick run on PostgreSQL\n',
    POSTGRES_INTRO,
    renderNewest(results('quick', 'postgres')) ??
      'No run on PostgreSQL recorded yet: run `npm run bench -- --quick --server postgres`.\n',
    DOC_PROFILE,
    DOC_METHOD,
  ];
  writeFileSync(PERFORMANCE_DOC, await formatMarkdown(parts.join('\n')));
}

/** A heading at the level of the part it is written into. */
type Heading = (title: string) => string;

/** A part of a report: a run made with `--only` has some of them. */
interface Section {
  name: 'load' | 'cost' | 'quota' | 'wake' | 'startup' | 'choices';
  has(result: BenchResult): boolean;
  /** Its headings and tables. */
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
export type Column<T> = [header: string, cell: (row: T) => string];

/** A markdown table of `rows`, one column per entry of `columns`. */
export function table<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
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
  const parts = DETECTION_PARTS.map((part): Column<LoadSummary> => [
    DETECTION_PART_NAMES[part],
    ({ detection: d }) => `${f(d?.p50[part], 2, 1000)} / ${f(d?.p99[part], 2, 1000)}`,
  ]);
  return [h('Where detection latency goes'), `${intro}\n${table(rows, [...POINT_COLUMNS, ...parts])}`];
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
      ? `\n${quotaOwnCostText(on, off)}The quota adds ${num(on.eventsPerJob - off.eventsPerJob)} events and ${num(
          (on.actionsPerJob ?? 0) - (off.actionsPerJob ?? 0),
        )} billable actions per job all told (${times(ratio(on.actionsPerJob, off.actionsPerJob))} the actions), ` +
        `and ${num((on.startLatencyMs?.median ?? 0) - (off.startLatencyMs?.median ?? 0))} ms to the median start.\n`
      : '';
  const chainText = ({ quotaWorkflow: q }: QuotaCostSide) =>
    q
      ? `${q.events} events, ${q.actions} actions` +
        (q.updates === undefined ? '' : ` (${q.updates} updates, ${q.timers ?? 0} timers)`) +
        `, ${q.runs} run(s)`
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

/**
 * The quota's own cost per job, each part apart: what it adds to the job's history (issue 29: no
 * event), the takes (accepted updates on the quota workflow, one action each; issue 29: at most
 * one per job), and the rest of the quota workflow's chain (its start, its wakes as uses leave the
 * window, its end), which a busy project shares over many more jobs than the benchmark runs.
 */
function quotaOwnCostText(on: QuotaCostSide, off: QuotaCostSide): string {
  const own = quotaOwnCost(on, off);
  if (!own) return '';
  const { chain: quota, takes } = own;
  const history =
    `In the job's own history the quota adds ${num(own.events)} events ` +
    `and ${num(own.jobActions)} actions (medians, on − off). `;
  if (takes === null) return history;
  return (
    history +
    `On the quota workflow: ${num(takes / on.jobs)} accepted updates (takes) per job, 1 action each; ` +
    `the rest of its chain ${num((quota.actions - takes) / on.jobs)} actions per job ` +
    `(${num((quota.timers ?? 0) / on.jobs)} of them timers), and ${num(quota.events / on.jobs)} events per job ` +
    `in its history, over ${on.jobs} jobs. ` +
    (quota.margin && own.perJob !== null
      ? `Over the last ${quota.margin.jobs} jobs, once the chain ran, it grew by ${quota.margin.actions} actions ` +
        `(${quota.margin.updates} takes, ${quota.margin.timers} timers): ${num(own.perJob)} actions per further job. `
      : '') +
    `Issue 29's aim, the quota's own cost per job when it never waits at most 1 action and 0 events in the ` +
    `job's history: ${num(own.perJob ?? own.actions)} actions ` +
    `(${own.perJob === null ? "takes and the chain's share" : 'per further job'}) and ${num(own.events)} events, ` +
    `${own.met ? 'MET' : 'MISSED'}; the chain's ${quota.actions - takes} actions besides the takes ` +
    `(its start, its timers, its patch marker) are shared by every job of the chain, ${on.jobs} here. `
  );
}

function wakeTable(result: BenchResult): string {
  const ms = (value: number | null) => (value === null ? '?' : `${Math.round(value)}`);
  const rows: string[][] = [];
  const notes: string[] = [];
  for (const w of result.wake ?? []) {
    const point = `${label(w.impl ?? 'worker')}, N=${w.jobs} at ${w.cadenceMs / 1000} s`;
    if (w.broke !== null) {
      rows.push([point, 'broke', '', '', '', w.broke.split('\n')[0] ?? '']);
      continue;
    }
    const got = (d: NonNullable<WakeRun['pollNow']>) => `${d.sent - d.missing} of ${d.sent}`;
    const delays = (
      what: string,
      d: WakeRun['pollNow'],
      arrived = (d: NonNullable<WakeRun['pollNow']>) => got(d),
    ) => {
      if (d !== null) rows.push([point, what, ms(d.p50), ms(d.p99), ms(d.max), arrived(d)]);
    };
    delays('pollNow signal → its GET', w.pollNow);
    delays('sendMessage update → its POST', w.followUp);
    const r = w.restart;
    if (r) {
      delays(
        "worker SIGKILLed → each job's next GET",
        r.resumed,
        (d) =>
          `${got(d)} jobs within ${Math.round(r.waitedMs / 1000)} s of the new worker's start; ` +
          `${r.late} of them more than a cadence after it`,
      );
      notes.push(
        `${point}: the new worker ran ${ms(r.newWorkerRunningMs)} ms after the kill. ` +
          restartNote(w.impl ?? 'worker', r),
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
  notes.push(
    `1.0 itself (a timer and a local-activity poll per wait) was not measured against a SIGKILL: no figure ` +
      `for it exists in bench/results/ or in earlier versions of this page. ${label('floor')} polls as 1.0 ` +
      `did; full mode kills and replaces its worker too, and ${label('poll-by-retry')}'s.`,
  );
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
  const of = (mode: StartupMode, pick: (r: BenchResult['startup'][number]) => number | null) =>
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
      const s = loads.find(
        (l) =>
          l.impl === 'worker' &&
          l.variant === side.variant &&
          l.jobs === choice.point.jobs &&
          l.cadenceMs === choice.point.cadenceMs,
      );
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

const POSTGRES_INTRO = `The same quick run on the production topology: Temporal Server v1.30.1 (the release of the
compose images) with PostgreSQL, set up by the compose files as \`npm run test:cluster\` sets it up
(dev/temporal-cluster.ts), with the dynamic config of \`deploy/compose/dynamicconfig.yaml\` and so the
server's default rate limits, not the raised ones of the dev-server runs. Figures for users on a
real cluster; PostgreSQL shares the machine's two cores with everything else here. Where the tables
say "dev server", read the Temporal Server process (its CPU; PostgreSQL's own is not counted).
`;

const DOC_INTRO = `# Performance

Generated by \`npm run bench\` (bench/report.ts) from the newest full and quick results in
\`bench/results/\`; do not edit by hand. Every figure was taken on the machine named with it, a
2-core machine shared with other work at the time: read them as figures of a busy machine, and
compare figures within one run rather than across runs.

- \`npm run bench -- --quick\`:
  ${describePoints(QUICK_POINTS)};
  start-up, and cost per job (1-minute and 10-minute jobs run, 1-hour jobs extrapolated from
  them). About seven minutes on this machine while it was shared (load average 4 to 8), less when
  it is idle: the two runs at N = 1,000 are more than half of it. It exits 0 when an aim is missed
  (it prints MISSED) and non-zero only when the benchmark itself breaks (a workflow failed, a
  process died, the server did not start), so it can run beside CI's tests without failing the
  build on noise.
- \`npm run bench -- --full\`:
  ${describePoints(LADDER)}
  (up to \`--max-jobs\`), stopping the ladder for an implementation at the first N that breaks (a
  phase past its deadline) or, from N = 2,000, that keeps less than half the poll rate its cadence asks for
  (after that N's repeats), and saying which; the design choices at N = 500; cost per job for
  1-minute, 10-minute, 1-hour and 6-hour jobs; three repeats (\`--repeats\`).
- \`npm run bench -- --help\` lists every flag.
`;

/**
 * What \`npm run bench:profile\` and \`npm run bench:heap\` found, and what changed because of it.
 * Written by hand from their output (not a table the benchmark regenerates): update it with the
 * next profile.
 */
const DOC_PROFILE = `## Where the worker's CPU and memory go, and what was changed

Two tools look inside the worker, each for this worker or, with \`--impl floor\`, for (c):

- \`npm run bench:profile -- --jobs 1000 --cadence 10s --cadences 6\` (bench/profile.ts) runs the
  worker process under V8's sampling profiler with 1,000 jobs open at a 10 s cadence and reads
  each of its threads' CPU from /proc over a steady minute; the profiler's own overhead is
  included.
- \`npm run bench:heap -- --jobs 300 --cadence 5s --polls 10\` (bench/heap.ts) runs a worker with
  the workflows in its own thread (the SDK's debug mode; same bundle and activities) and reads
  the JavaScript heap after full garbage collections: per open workflow, and what each further
  poll leaves behind until its run ends. Resident memory in the load tables also counts garbage
  not yet collected and the SDK core's native memory; this is what the workflow code keeps alive.

Runs of 2026-11-24, one after the other on an otherwise quiet machine: *before* is commit ef14f08,
*after* is with the two changes below.

| worker CPU per poll, ms                             | before | after | (c)  | after ÷ (c) |
| --------------------------------------------------- | ------ | ----- | ---- | ----------- |
| workflow threads (JavaScript)                       | 3.71   | 3.03  | 2.39 | 1.27×       |
| main thread (activities, the SDK's bridge and rxjs) | 1.72   | 1.41  | 1.43 | 0.98×       |
| the SDK core (Rust)                                 | 0.91   | 0.80  | 0.85 | 0.94×       |
| V8's helpers (garbage collection, compiler)         | 0.64   | 0.54  | 0.58 | 0.94×       |
| other threads                                       | 0.58   | 0.51  | 0.50 | 1.01×       |
| all                                                 | 7.57   | 6.29  | 5.76 | 1.09×       |

(One run each. Neither change touches the main thread: its 18% between the runs is the noise of
one run, so read the workflow threads' row for the changes.)

| JavaScript heap (\`bench:heap\`)                   | before | after | (c) before | (c) after | after ÷ (c) after |
| ------------------------------------------------- | ------ | ----- | ---------- | --------- | ----------------- |
| per open workflow, KiB: 1,000 jobs at 10 s         | 115.1  | 76.6  | 72.8       | 47.1      | 1.63×             |
| per open workflow, KiB: 300 jobs at 5 s            | 113.9  | 78.9  | 76.5       | 43.7      | 1.81×             |
| left per poll, bytes: 1,000 jobs, 5 more polls     | 4,927  | 1,854 | 1,426      | 1,397     | 1.33×             |
| left per poll, bytes: 300 jobs, 10 more polls      | 4,883  | 1,652 | 974        | 1,703     | 0.97×             |

(One run each; repeated runs of the same code differ by up to 15%, the per-poll figures more: read
the two sizes as two samples. In resident memory, which the load tables report, the difference to
(c) is smaller as a ratio (1.16× to 1.18× up to N = 1,000 in the full run above; three quick runs
of the same code gave 1.24× to 1.47×, so read the full run's as the low end): the heap the
workflows keep alive is about a quarter of this worker's resident memory per open job.)

What the profiles show:

- **The SDK's promise hook, in CPU and in memory.** For the \`__stack_trace\` query, the SDK
  records a stack trace for every promise created in workflow code (and every \`await\`): a third
  of the workflow threads' samples (the hook, formatting the call sites, the source-map lookups).
  Each *pending* promise also keeps its stack, as text and as frames, until it settles (the text
  alone is about 0.7 KiB in the heap snapshots). What this project's code controls is how many
  promises each poll makes and how many stay pending while a workflow waits.
- **Module evaluation per workflow.** The SDK's reusable V8 context shares the modules loaded
  before a workflow exists (its own), but evaluates the workflow's modules again for each
  workflow, so every open workflow held its own copy of src/workflows/, contract.ts and
  retries.ts: their functions, constants and activity proxies.
- **Operations hold on to their scope.** Every timer and activity started in a cancellation scope
  hangs a handler on that scope's promise, and the handler keeps the operation's options and
  arguments until the scope settles; the workflow's root scope settles only when its run ends. So
  each poll leaves 1–2 KiB behind, in (c) as in this worker (whose options also carry summaries),
  until continue-as-new starts a fresh run: every 150 polls, which bounds it at 0.2–0.3 MiB per
  workflow late in a run. The load tables measure jobs a few polls in, so they do not show it, and
  the worker's cache sizing (src/worker/memory.ts) was set from them: a pod whose cached workflows
  are all late in long runs holds more than that rule plans for.
- **What stays per open workflow.** In heap snapshots (bench:heap \`--snapshots\`, with the modules
  preloaded, before the wait change), about a fifth of the difference to (c) was strings, mostly
  the stack text the SDK keeps for pending promises: 8.9 KiB per workflow against 2.5 KiB. The
  rest is the handlers' closures, the run's state, the quota requester and the promises of the
  wake-up on \`pollNow\`.
- **Main thread.** The SDK's native bridge, rxjs (its activation pipeline), the SDK's worker code,
  undici, the record's schema check (zod): little of it is this project's code.

What was changed because of it:

- **The workflow modules are preloaded** (src/worker/bundle-options.ts, for every bundle: the prebuilt
  one, the worker's from sources, the tests', and the baselines', so (c) gets it too): evaluated
  once per worker thread, shared frozen by every workflow. Safe because they keep no state at
  module scope; a write to a shared module would throw.
- **The wait between polls keeps less.** It made a cancellation scope per wait, which the SDK links
  to the root scope until the run ends, and hung a \`.then\` per wait on the shared poll-request
  condition, pending until a poll is requested (the whole run when none is). Now one scope serves
  the run's waits until a requested poll cancels it, and each wait has one promise of its own,
  settled when the wait ends. Same commands, and the wait ends the same number of microtask steps
  after the condition as before, so at the same point of an activation: every captured history
  replayed unchanged.
- **Earlier (2026-11-22):** each wait was \`condition(() => pollRequested, interval)\`, which cancels
  its own scope even after the timer fired, building a failure whose stack is mapped through the
  source map on every poll; the wait became a timer raced with one shared condition (15% less CPU
  in the workflow threads then).

What the remaining difference to (c) buys (the ratios are in the tables above):

- **Summaries and current details**: what each timer and activity is for in the UI's timeline, and
  the job's status and next poll time on the workflow's page. A payload per timer and per
  activity, a string per poll, and the per-poll memory above.
- **Handlers** (\`status\`, \`pollNow\`, \`sendMessage\`, \`followUp\`, the quota's grant and place),
  the run's state and the pending promises of the poll-request wake-up: memory per open workflow;
  \`pollNow\` and follow-ups interrupt a wait at once.
- **Bounded API calls** (src/workflows/api-calls.ts): one more async layer per poll, so that no
  answer of the API can push a workflow past its deadline or history bound.
- **The project quota's enqueue activity**, also when the worker has the quota off (6 events and an
  action per job): the workflow cannot read the worker's setting, and one budget per project needs
  no setting in the workflow input. With the search attributes, it is most of what
  this worker's start costs beyond (c), which is why its throughput (jobs started and ended per
  second) trails (c)'s more than its cost per poll does.

`;

const DOC_METHOD = `## How the figures are taken

Everything runs on this machine: the real Temporal server (dev/dev-server.ts: Temporal Server of the
compose file's release, built from source, every service in one process on in-memory SQLite; a run
whose versions line names a Temporal CLI ran on its \`temporal server start-dev\`, Server 1.29.1),
the API simulator (in the benchmark's process, create limit off), and each implementation in a process of its own, started fresh for
every run, on its own task queue and simulator project. Each load run and each wake run also gets a
Temporal server of its own (runs before 2026-11-27 shared one, as their headers say): the dev
server slows over a session of heavy runs (it keeps every closed workflow in its one shard; which
of its state slows it is not measured), so on a shared server a run measured the runs before it
too (at N = 2,000, (b) read a p99 detection of 36.3 s right after (c), 21.4 s on a server of its
own). The repeats of a load point run the implementations in the rows of a balanced Latin square,
so that none always follows the same one.

- **Implementations.** *This worker*: \`src/${WORKER_ENTRY}.ts\` emitted to JavaScript in a scratch
  directory with its prebuilt workflow bundle beside it (what \`npm run build\` puts in lib/), run
  by plain \`node\` with its default settings; workflows started with \`startAgentJob\`. *(a) plain
  loop* (bench/baselines/plain-loop.ts): one Node process, a \`setTimeout\` loop per job with the
  project's API client, at the same cadence and jitter (the run's header), nothing durable. *(b)
  poll by retry* (bench/baselines/retry-workflow.ts): a workflow that creates the job with the
  project's create activity, then runs one activity that fails while the job is active, under a
  retry policy with coefficient 1, initial interval = the cadence and unlimited attempts. *(c) floor
  of this design* (bench/baselines/floor-workflow.ts): this worker's workflow with nothing but its
  work when nothing fails: the same create, then, until the record is terminal, a durable timer of
  the cadence (with the same jitter) and one local-activity GET with the project's API client; no
  summaries, current details, search attributes, metrics or message handlers. What this worker costs
  beyond (c) is what its features cost. (b) and (c) run in one worker of the benchmark's own
  (bench/baselines/worker.ts) with the same settings as ours (cache size, concurrency) and a
  prebuilt bundle of both workflows.
- **Load runs** start N jobs that the simulator holds active until all N exist (the *ramp*),
  wait until each has been polled once and then half a cadence (so that no job's first wait or
  first workflow task falls in the window), measure a *steady* window of whole cadences with all N
  open, then end each
  job at a random moment within one cadence (the simulator archives it) and wait for every
  workflow to close (the *drain*). Throughput is N ÷ (ramp + drain): the hold is left out, so it is
  the rate at which jobs are started, created, seen ending and closed. Detection latency runs from
  the moment the simulator made the job terminal (\`stats().jobs[].terminalAt\`) to the workflow's
  close time (from visibility, or from the history for (b) and (c)), or to the loop's detection for (a).
  It includes the wait for the next poll, so at a fixed cadence c its floor is about c/2 at p50
  and c at p99. *polls/s (asked)* is the poll rate of the steady window next to N ÷ c: when the
  first falls short, the machine could not keep the cadence.
- **CPU** is user + system time from /proc/<pid>/stat of the measured process (the SDK's Rust
  threads included), of the dev server, and of the benchmark process (the simulator), over the
  steady window, divided by the polls the simulator answered in it. *CPU ms/start* is the measured
  process's CPU over the ramp per job (start, first workflow task, create, and the polls of the
  jobs already started). **Memory** is the highest VmRSS sampled every 250 ms during the steady
  window; per 1,000 open jobs it is (peak − the idle process's RSS just before the ramp) ÷ N ×
  1,000, so it carries what the first workflows warm up and means most at large N.
- **Cost per job** counts events and billable actions from real histories, every run of a
  continue-as-new chain included, and API requests from the simulator's counters. A job of length
  L takes a number of polls that only the schedule decides (with its jitter): bench/schedule.ts
  replays the schedule 1,001 times for it, and the benchmark then runs the workflow on the same
  schedule with every interval divided by \`--scale\` (240) against an agent job that the
  simulator ends right after the poll before the last, so each history holds exactly the polls,
  timers, activities and runs of a real-time job of length L. Shortening the job instead would
  not do: the dev server fires timers at whole-second granularity (a 21 ms timer fires after
  about 950 ms), so each poll takes a second or more whatever its interval. For the same reason
  jobs of more than \`--cost-max-polls\` polls are not run but extrapolated on the straight line
  through the variant's measured lengths (each poll adds the same events and actions), plus, per
  extra continue-as-new run, one action and five events; the table marks them. *Mean detection
  delay* is the schedule's mean wait from a job's end to the poll that sees it, for jobs of L ±10%.
- **Billable actions** follow Temporal Cloud's list (https://docs.temporal.io/cloud/actions):
  workflow started (by the client or by continue-as-new), timer started, activity started or
  retried (each attempt, read from the \`attempt\` of the activity's started event, since a retried
  activity leaves one started event; a poll activity cancelled while it waits between attempts, as
  pollNow and a follow-up cancel it, leaves no started event at all, so polls are counted as the
  GETs the simulator received, and the attempts a history misses are added to its actions), local activities (one per workflow task that records any
  local-activity marker), search-attribute upsert (one per command; those set at start are free),
  signal, accepted update, child workflow (two). Other markers are not on the list; they would count
  one action each, to err high. Queries are billable but never reach a history; the benchmark sends none.
- **Wake-ups** (the wake scenario) hold N jobs active at a fixed 10 s cadence, as the load runs do,
  and, once every job waits in its poll activity, send a pollNow signal to a random sample and a
  \`sendMessage\` update to another, spread evenly over 30 s (15 s in quick mode). Each figure runs
  from the moment the client sends to the arrival of that job's GET (or the message's POST) at the
  simulator, read from \`stats().jobs[].requests\` on the same clock; a natural poll landing between
  the two would be taken for the woken one, which at a 10 s cadence is rare and only shortens the
  figure. Then the worker is SIGKILLed, a new one spawned at once, and each job's first GET after
  the kill is timed; full mode waits past a lost attempt's start-to-close timeout and backoff, quick
  mode 20 s (jobs not polled by then are shown as not arrived), and full mode does the same for
  (c) and (b).
- **Start-up** starts a workflow that attaches to an existing agent job (so it polls at once) and
  then spawns the worker: the time from the spawn to the simulator's answer to that first poll.
- **Dev server limits** (\`--dynamic-config-value\`; key names and defaults from the server's
  common/dynamicconfig/constants.go): frontend.rps, frontend.namespaceRPS, history.rps,
  matching.rps and frontend.persistenceMaxQPS at 50,000 (defaults 2,400, 2,400, 3,000, 1,200 and
  2,000), frontend.namespaceRPS.visibility at 200 (default 10), so that the limits measured are the
  machine's; and history.queueReaderStuckCriticalAttempts at 0 (default 3): the dev server has one
  history shard, and at N = 2,000 its timer queue fires about 400 timers a second, which that
  mitigation takes for a stuck reader, moving busy seconds of retry timers to a second reader that
  waits tens of seconds for the shard's load budget (at N = 2,000, 118 of the jobs then went 20 s
  and more without a poll; a cluster spreads these timers over its shards). bench/environment.ts
  has the measurement.
`;
