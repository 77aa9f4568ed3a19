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
import type { WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import proto from '@temporalio/proto';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { ProjectMetrics } from '../src/observability/project-metrics.js';
import { javaVersion, startTimeSkippingServer, TEST_SERVER_VERSION } from '../dev/time-skipping-server.js';
import { createActivities } from '../src/activities/index.js';
import { AgentApiClient } from '../src/agent-api/index.js';
import { workflowBundleOptions } from '../src/worker/bundle-options.js';
import { POLLS_PER_RUN } from '../src/workflows/agent-job/workflow.js';
import { WORKFLOW_TYPE, type AgentJobInput } from '../src/contract.js';
import { BENCH_API_KEY, startBenchSimulator } from './environment.js';
import { chainHistories, isClose, timestampMs, type HistoryEvent } from './history.js';
import { formatMarkdown, removeResults, resultNames, table, writeResultFile } from './report.js';
import { waitUntil } from './wait.js';

// @temporalio/proto is CommonJS without named exports Node can detect.
const { temporal } = proto;
const HOUR_MS = 60 * 60 * 1000;
const WORKFLOWS_PATH = new URL('../src/workflows/index.ts', import.meta.url).pathname;
/** How long the create may take in real time before the run is called broken. */
const CREATE_DEADLINE_MS = 60_000;

/** The whole chain at one hour mark. */
interface Snapshot {
  /** Workflow time since the create succeeded (the outage so far), in hours. */
  outageHours: number;
  runs: number;
  events: number;
  /** Protobuf-encoded size of the histories. */
  bytes: number;
  /** Length of the histories as the JSON that `temporal workflow show --output json` writes. */
  jsonBytes: number;
  /** The run with the largest history. */
  largestRun: { runId: string; events: number; bytes: number };
  /** Get requests the simulator answered (all 503). */
  gets: number;
  /** Real seconds since the workflow started. */
  realSeconds: number;
  /** Events by type over every run: what one outage cycle is made of. */
  eventsByType: Record<string, number>;
}

const log = (line: string) => process.stderr.write(`[outage] ${line}\n`);

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { hours: { type: 'string', default: '3' }, histories: { type: 'string' } },
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
  const server = await startTimeSkippingServer(log);
  const simulator = await startBenchSimulator().catch(async (err: unknown) => {
    await server.stop();
    throw err;
  });
  const id = randomUUID().slice(0, 8);
  const projectId = `outage-${id}`;
  const workflowId = `outage-history-${projectId}`;
  simulator.setScenario(projectId, { faults: { rules: [{ endpoint: 'get', kind: 'status', status: 503 }] } });
  try {
    const worker = await Worker.create({
      connection: server.nativeConnection,
      namespace: server.namespace,
      taskQueue: projectId,
      workflowBundle: await bundleWorkflowCode({
        ...workflowBundleOptions(WORKFLOWS_PATH),
        logger: new DefaultLogger('ERROR'),
      }),
      sinks: new ProjectMetrics(Runtime.instance().metricMeter, 100).sinks(),
      activities: createActivities({
        api: new AgentApiClient({ baseUrl: simulator.url, apiKey: BENCH_API_KEY }),
      }),
    });
    const snapshots = await worker.runUntil(async () => {
      const realStart = Date.now();
      const input: AgentJobInput = {
        projectId,
        prompt: 'Fix the broken links in the getting-started guide.',
        // Longer than the measurement, so the deadline never ends the outage early.
        timeout: `${hours + 1}h`,
      };
      const handle = await server.client.workflow.start(WORKFLOW_TYPE, {
        taskQueue: projectId,
        workflowId,
        args: [input],
      });
      const chain = () => chainHistories(server.client, workflowId, handle.firstExecutionRunId);
      // Time skipping stays locked outside `sleep`, so the create runs in real time: wait for it.
      const createdAt = await waitForCreate(handle, realStart);
      log(`agent job created; skipping through ${hours}h of outage`);
      const taken: Snapshot[] = [];
      for (let hour = 1; hour <= hours; hour++) {
        const before = await server.currentTimeMs();
        const untilMark = createdAt + hour * HOUR_MS - before;
        if (untilMark > 0) await server.sleep(untilMark);
        const now = await server.currentTimeMs();
        log(
          `asked to skip ${(untilMark / 1000).toFixed(0)}s, the server clock moved ${((now - before) / 1000).toFixed(0)}s`,
        );
        const s = await readChain(chain(), {
          outageHours: (now - createdAt) / HOUR_MS,
          gets: simulator.stats().requestsPerProjectEndpoint[projectId]?.get ?? 0,
          realSeconds: (Date.now() - realStart) / 1000,
        });
        taken.push(s);
        log(
          `${s.outageHours.toFixed(2)}h of outage: ${s.events} events, ${s.bytes} bytes, ${s.runs} runs, ${s.gets} gets, ${s.realSeconds.toFixed(0)}s real`,
        );
      }
      await handle.terminate('outage-history benchmark done');
      if (values.histories) await writeHistories(chain(), workflowId, values.histories);
      return taken;
    });
    const last = snapshots.at(-1) as Snapshot;
    const perHour = (n: number) => Math.round(n / last.outageHours);
    const path = writeResultFile(startedAt, 'outage', {
      startedAt,
      testServer: TEST_SERVER_VERSION,
      java: javaVersion(),
      hours,
      pollsPerRun: POLLS_PER_RUN,
      fault: 'every get answers 503 without Retry-After, from the first poll',
      workflowId,
      snapshots,
      perHour: {
        events: perHour(last.events),
        bytes: perHour(last.bytes),
        jsonBytes: perHour(last.jsonBytes),
        gets: perHour(last.gets),
      },
      // What the last hour of outage is made of: the events by type it added.
      lastHourEventsByType: Object.fromEntries(
        Object.entries(last.eventsByType)
          .map(([type, n]) => [type, n - (snapshots.at(-2)?.eventsByType[type] ?? 0)] as const)
          .filter(([, n]) => n !== 0),
      ),
    });
    // The newest outage run is the one kept; the report does not read it, people do.
    removeResults(resultNames('outage').filter((name) => name !== basename(path)));
    const markdown = table(snapshots, [
      ['outage h', (s) => s.outageHours.toFixed(2)],
      ['events', (s) => String(s.events)],
      ['events/h', (s) => String(Math.round(s.events / s.outageHours))],
      ['bytes', (s) => String(s.bytes)],
      ['bytes/h', (s) => String(Math.round(s.bytes / s.outageHours))],
      ['JSON bytes/h', (s) => String(Math.round(s.jsonBytes / s.outageHours))],
      ['runs', (s) => String(s.runs)],
      ['largest run (events, bytes)', (s) => `${s.largestRun.events}, ${s.largestRun.bytes}`],
      ['gets', (s) => String(s.gets)],
      ['real s', (s) => s.realSeconds.toFixed(0)],
    ]);
    process.stdout.write(`${await formatMarkdown(markdown)}\nwrote ${path}\n`);
  } finally {
    await simulator.stop();
    await server.stop();
  }
}

/** Waits, in real time, until the create activity completed; returns its workflow time. */
async function waitForCreate(handle: WorkflowHandle, realStart: number): Promise<number> {
  return waitUntil({
    check: async () => {
      const events = (await handle.fetchHistory()).events ?? [];
      const completed = events.find((event) => event.activityTaskCompletedEventAttributes);
      if (completed) return timestampMs(completed.eventTime);
      const closed = events.find((e) => isClose(e) || e.workflowExecutionContinuedAsNewEventAttributes);
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
  runs: ReturnType<typeof chainHistories>,
  at: Pick<Snapshot, 'outageHours' | 'gets' | 'realSeconds'>,
): Promise<Snapshot> {
  const snapshot: Snapshot = {
    ...at,
    runs: 0,
    events: 0,
    bytes: 0,
    jsonBytes: 0,
    largestRun: { runId: '', events: 0, bytes: 0 },
    eventsByType: {},
  };
  for await (const { runId, history } of runs) {
    const events = history.events ?? [];
    const bytes = temporal.api.history.v1.History.encode(history).finish().length;
    snapshot.runs++;
    snapshot.events += events.length;
    snapshot.bytes += bytes;
    snapshot.jsonBytes += Buffer.byteLength(historyToJSON(history));
    if (bytes > snapshot.largestRun.bytes) snapshot.largestRun = { runId, events: events.length, bytes };
    for (const name of events.map(eventName))
      snapshot.eventsByType[name] = (snapshot.eventsByType[name] ?? 0) + 1;
  }
  return snapshot;
}

/** Writes each run's history as `<workflowId>-<n>.json`, the JSON `temporal workflow show` writes. */
async function writeHistories(runs: ReturnType<typeof chainHistories>, workflowId: string, dir: string) {
  mkdirSync(dir, { recursive: true });
  let n = 0;
  for await (const { history } of runs)
    writeFileSync(join(dir, `${workflowId}-${++n}.json`), historyToJSON(history));
  log(`wrote the histories of ${workflowId} to ${dir}`);
}

function eventName(event: HistoryEvent): string {
  const name = temporal.api.enums.v1.EventType[event.eventType ?? 0] ?? String(event.eventType);
  const marker = event.markerRecordedEventAttributes?.markerName;
  return `${name.replace(/^EVENT_TYPE_/, '')}${marker ? ` (${marker})` : ''}`;
}

main().catch((err: unknown) => {
  process.stderr.write(`[outage] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
