/**
 * History per hour of API outage, measured: one agent-job workflow against a simulator whose every
 * get answers 503 after the create succeeded, on Temporal's time-skipping test server, so hours of
 * workflow time pass in minutes. At each hour mark it reads the history of every run of the
 * workflow (continue-as-new included) and counts events and bytes. (Before 1.1 it compared polls as
 * local and as regular activities; since 1.1 a poll is one activity the server retries, and the
 * outage's 503s come back to the workflow's own timers, so there is one mode.)
 *
 * Real parts: the test server (dev/time-skipping-server.ts), the simulator over HTTP, the worker
 * with the real activities and the bundled workflow code.
 *
 *   npm run bench:outage                     # 3 hours of outage
 *   npm run bench:outage -- --hours 2 --histories /tmp/h
 *
 * Three hours by default: at about 55 polls an hour, a run continues as new after its 150th poll,
 * near 2.8 hours into the outage. The workflow's timeout is one hour longer than the measurement.
 *
 * Writes bench/results/<timestamp>-outage.json in place of the one before, and prints a table.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Client, WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import proto from '@temporalio/proto';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker, type WorkflowBundle } from '@temporalio/worker';
import { ProjectMetrics } from '../src/observability/project-metrics.js';
import {
  javaVersion,
  startTimeSkippingServer,
  TEST_SERVER_VERSION,
  type TimeSkippingServer,
} from '../dev/time-skipping-server.js';
import { createActivities } from '../src/activities/index.js';
import { AgentApiClient } from '../src/agent-api/index.js';
import { workflowBundleOptions } from '../src/worker/bundle-options.js';
import { POLLS_PER_RUN } from '../src/workflows/agent-job/workflow.js';
import { WORKFLOW_TYPE, type AgentJobInput } from '../src/contract.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/index.js';
import { chainHistories, isClose, timestampMs, type HistoryEvent } from './history.js';
import { removeResults, resultNames, writeResultFile } from './report.js';
import { sum } from './stats.js';
import { waitUntil } from './wait.js';

// @temporalio/proto is CommonJS without named exports Node can detect.
const { temporal } = proto;
const HOUR_MS = 60 * 60 * 1000;
const API_KEY = 'bench-outage-key';
const WORKFLOWS_PATH = new URL('../src/workflows/index.ts', import.meta.url).pathname;
/** How long the create may take in real time before the run is called broken. */
const CREATE_DEADLINE_MS = 60_000;

/** One run of the workflow's continue-as-new chain, as read at an hour mark. */
interface RunFigures {
  runId: string;
  events: number;
  /** Protobuf-encoded size of the run's history. */
  bytes: number;
  /** Length of the history as the JSON that `temporal workflow show --output json` writes. */
  jsonBytes: number;
  eventsByType: Record<string, number>;
  /**
   * Longest stretch of workflow time between two events of the run, in seconds. Longer than the
   * poll interval means the test server skipped time with nothing recorded: with 1.0's local-activity
   * polls it has timed out a workflow task the worker was still running, then held its retry back.
   */
  longestGapSeconds: number;
}

/** The whole chain at one hour mark. */
interface Snapshot {
  /** Workflow time since the create succeeded (the outage so far), in hours. */
  outageHours: number;
  runs: number;
  events: number;
  bytes: number;
  jsonBytes: number;
  largestRun: Pick<RunFigures, 'runId' | 'events' | 'bytes' | 'jsonBytes'>;
  /** Every run, first to current. */
  perRun: RunFigures[];
  /** Get requests the simulator answered (all 503). */
  gets: number;
  /** Real seconds since the workflow started. */
  realSeconds: number;
  /** Events by type over every run: what one outage cycle is made of. */
  eventsByType: Record<string, number>;
}

/** The measurement. */
interface OutageResult {
  workflowId: string;
  snapshots: Snapshot[];
  /** Events per hour and bytes per hour, from the last snapshot over the whole outage. */
  perHour: { events: number; bytes: number; jsonBytes: number; gets: number };
  /** Events by type added in the last hour: what an hour of outage is made of. */
  lastHourEventsByType: Record<string, number>;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      hours: { type: 'string', default: '3' },
      histories: { type: 'string' },
    },
  });
  const hours = Number(values.hours);
  if (!Number.isInteger(hours) || hours < 1 || hours > 24) {
    throw new Error(`--hours must be a whole number from 1 to 24, not ${values.hours}`);
  }
  Runtime.install({
    logger: new DefaultLogger('WARN'),
    telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
  });
  const startedAt = new Date().toISOString();
  const stops: Array<() => Promise<void>> = [];
  try {
    const server = await startTimeSkippingServer(log);
    stops.push(() => server.stop());
    const simulator = await startSimulator({ apiKeys: [API_KEY], log: false, createsPerProjectPerHour: 0 });
    stops.push(() => simulator.stop());
    log(`simulator on ${simulator.url}`);
    const workflowBundle = await bundleWorkflowCode({
      ...workflowBundleOptions(WORKFLOWS_PATH),
      logger: new DefaultLogger('ERROR'),
    });
    const measured = await measure({
      server,
      simulator,
      workflowBundle,
      hours,
      historiesDir: values.histories,
    });
    const result = {
      startedAt,
      testServer: TEST_SERVER_VERSION,
      java: javaVersion(),
      hours,
      pollsPerRun: POLLS_PER_RUN,
      fault: 'every get answers 503 without Retry-After, from the first poll',
      ...measured,
    };
    const path = writeResultFile(startedAt, 'outage', result);
    // The newest outage run is the one kept; the report does not read it, people do.
    removeResults(resultNames('outage').filter((name) => name !== basename(path)));
    process.stdout.write(`${table(measured)}\nwrote ${path}\n`);
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
}

interface MeasureOptions {
  server: TimeSkippingServer;
  simulator: RunningSimulator;
  workflowBundle: WorkflowBundle;
  hours: number;
  /** Where to write each run's history as JSON, for a closer look; none when undefined. */
  historiesDir: string | undefined;
}

/** Runs one workflow through `hours` of outage and reads its histories at every hour mark. */
async function measure(options: MeasureOptions): Promise<OutageResult> {
  const { server, simulator, hours } = options;
  const id = randomUUID().slice(0, 8);
  const projectId = `outage-${id}`;
  const taskQueue = `outage-${id}`;
  simulator.setScenario(projectId, {
    faults: { rules: [{ endpoint: 'get', kind: 'status', status: 503 }] },
  });
  const worker = await Worker.create({
    connection: server.nativeConnection,
    namespace: server.namespace,
    taskQueue,
    workflowBundle: options.workflowBundle,
    sinks: new ProjectMetrics(Runtime.instance().metricMeter, 100).sinks(),
    activities: createActivities({ api: new AgentApiClient({ baseUrl: simulator.url, apiKey: API_KEY }) }),
  });
  const running = worker.run();
  const workflowId = `outage-history-${projectId}`;
  try {
    const realStart = Date.now();
    const input: AgentJobInput = {
      projectId,
      prompt: 'Fix the broken links in the getting-started guide.',
      // Longer than the measurement, so the deadline never ends the outage early.
      timeout: `${hours + 1}h`,
    };
    const handle = await server.client.workflow.start(WORKFLOW_TYPE, {
      taskQueue,
      workflowId,
      args: [input],
    });
    // Time skipping stays locked outside `sleep`, so the create runs in real time: wait for it.
    const createdAt = await waitForCreate(handle, realStart);
    log(`agent job created; skipping through ${hours}h of outage`);
    const snapshots: Snapshot[] = [];
    for (let hour = 1; hour <= hours; hour++) {
      const before = await server.currentTimeMs();
      const untilMark = createdAt + hour * HOUR_MS - before;
      if (untilMark > 0) await server.sleep(untilMark);
      const now = await server.currentTimeMs();
      log(
        `asked to skip ${(untilMark / 1000).toFixed(0)}s, the server clock moved ${((now - before) / 1000).toFixed(0)}s`,
      );
      const snapshot = await readChain(server.client, workflowId, handle.firstExecutionRunId, {
        outageHours: (now - createdAt) / HOUR_MS,
        gets: simulator.stats().requestsPerProjectEndpoint[projectId]?.get ?? 0,
        realSeconds: (Date.now() - realStart) / 1000,
      });
      snapshots.push(snapshot);
      log(
        `${snapshot.outageHours.toFixed(2)}h of outage: ${snapshot.events} events, ${snapshot.bytes} bytes, ${snapshot.runs} runs, ${snapshot.gets} gets, ${snapshot.realSeconds.toFixed(0)}s real`,
      );
    }
    await handle.terminate('outage-history benchmark done');
    if (options.historiesDir)
      await writeHistories(server.client, workflowId, handle.firstExecutionRunId, options.historiesDir);
    const last = snapshots.at(-1) as Snapshot;
    return {
      workflowId,
      snapshots,
      perHour: {
        events: Math.round(last.events / last.outageHours),
        bytes: Math.round(last.bytes / last.outageHours),
        jsonBytes: Math.round(last.jsonBytes / last.outageHours),
        gets: Math.round(last.gets / last.outageHours),
      },
      lastHourEventsByType: difference(last.eventsByType, snapshots.at(-2)?.eventsByType ?? {}),
    };
  } finally {
    worker.shutdown();
    await running;
  }
}

/** Waits, in real time, until the create activity completed; returns its workflow time. */
async function waitForCreate(handle: WorkflowHandle, realStart: number): Promise<number> {
  return waitUntil({
    check: async () => {
      const history = await handle.fetchHistory();
      const completed = history.events?.find((event) => event.activityTaskCompletedEventAttributes);
      if (completed) return timestampMs(completed.eventTime);
      const closed = history.events?.find(
        (event) => isClose(event) || event.workflowExecutionContinuedAsNewEventAttributes,
      );
      if (closed) throw new Error(`the workflow closed before the create succeeded: ${eventName(closed)}`);
      return undefined;
    },
    deadline: realStart + CREATE_DEADLINE_MS,
    everyMs: 200,
    late: () => {
      throw new Error(`the create did not succeed within ${CREATE_DEADLINE_MS / 1000}s`);
    },
  });
}

/** Reads every run of the chain from the first, and sums them. */
async function readChain(
  client: Client,
  workflowId: string,
  firstRunId: string,
  at: Pick<Snapshot, 'outageHours' | 'gets' | 'realSeconds'>,
): Promise<Snapshot> {
  const runs: RunFigures[] = [];
  const eventsByType: Record<string, number> = {};
  for await (const { runId, history } of chainHistories(client, workflowId, firstRunId)) {
    const events = history.events ?? [];
    runs.push({
      runId,
      events: events.length,
      bytes: temporal.api.history.v1.History.encode(history).finish().length,
      jsonBytes: Buffer.byteLength(historyToJSON(history)),
      eventsByType: countByType(events, {}),
      longestGapSeconds: longestGapSeconds(events),
    });
    countByType(events, eventsByType);
  }
  const largest = runs.reduce((a, b) => (b.bytes > a.bytes ? b : a));
  const largestRun = {
    runId: largest.runId,
    events: largest.events,
    bytes: largest.bytes,
    jsonBytes: largest.jsonBytes,
  };
  return {
    ...at,
    runs: runs.length,
    perRun: runs,
    events: sum(runs.map((run) => run.events)),
    bytes: sum(runs.map((run) => run.bytes)),
    jsonBytes: sum(runs.map((run) => run.jsonBytes)),
    largestRun,
    eventsByType,
  };
}

/** Writes each run's history as `<workflowId>-<n>.json`, the JSON `temporal workflow show` writes. */
async function writeHistories(
  client: Client,
  workflowId: string,
  firstRunId: string,
  dir: string,
): Promise<void> {
  mkdirSync(dir, { recursive: true });
  let n = 0;
  for await (const { history } of chainHistories(client, workflowId, firstRunId)) {
    writeFileSync(join(dir, `${workflowId}-${++n}.json`), historyToJSON(history));
  }
  log(`wrote the histories of ${workflowId} to ${dir}`);
}

function longestGapSeconds(events: readonly HistoryEvent[]): number {
  let longest = 0;
  for (let i = 1; i < events.length; i++) {
    longest = Math.max(longest, timestampMs(events[i]?.eventTime) - timestampMs(events[i - 1]?.eventTime));
  }
  return Math.round(longest / 1000);
}

/** Counts in `to` minus those in `from`, without the types that did not grow. */
function difference(to: Record<string, number>, from: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(to)
      .map(([type, n]) => [type, n - (from[type] ?? 0)] as const)
      .filter(([, n]) => n !== 0),
  );
}

function countByType(events: readonly HistoryEvent[], into: Record<string, number>): Record<string, number> {
  for (const event of events) {
    const name = eventName(event);
    into[name] = (into[name] ?? 0) + 1;
  }
  return into;
}

function eventName(event: HistoryEvent): string {
  const name = temporal.api.enums.v1.EventType[event.eventType ?? 0] ?? String(event.eventType);
  const marker = event.markerRecordedEventAttributes?.markerName;
  return `${name.replace(/^EVENT_TYPE_/, '')}${marker ? ` (${marker})` : ''}`;
}

function table(result: OutageResult): string {
  const header = [
    'outage h',
    'events',
    'events/h',
    'bytes',
    'bytes/h',
    'JSON bytes/h',
    'runs',
    'largest run (events, bytes)',
    'gets',
    'real s',
  ];
  const rows = result.snapshots.map((s) => [
    s.outageHours.toFixed(2),
    String(s.events),
    String(Math.round(s.events / s.outageHours)),
    String(s.bytes),
    String(Math.round(s.bytes / s.outageHours)),
    String(Math.round(s.jsonBytes / s.outageHours)),
    String(s.runs),
    `${s.largestRun.events}, ${s.largestRun.bytes}`,
    String(s.gets),
    s.realSeconds.toFixed(0),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] as string).length)));
  const line = (cells: string[]) => cells.map((cell, i) => cell.padStart(widths[i] as number)).join('  ');
  return [line(header), ...rows.map(line)].join('\n');
}

function log(line: string): void {
  process.stderr.write(`[outage] ${line}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`[outage] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
