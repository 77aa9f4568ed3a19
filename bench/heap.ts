/**
 * `npm run bench:heap`: the JavaScript heap each open workflow holds, and what each further poll
 * adds to it (what the load runs' resident memory cannot isolate: docs/PERFORMANCE.md), with one
 * worker in this process and the workflows in this thread (the SDK's debug mode), the heap read
 * after full garbage collections at three moments:
 *
 * 1. base: after a warm-up of 20 workflows that have polled once (one-off costs are in the base);
 * 2. open: after N more workflows, each having polled about twice;
 * 3. later: after `--polls` more polls of each.
 *
 * (open − base) / N is the heap per open workflow; (later − open) / (N + 20) / polls what a poll
 * leaves behind until its run ends (the warm-up's workflows poll too). With `--snapshots DIR`, V8 heap snapshots of the three moments, to
 * open in Chrome DevTools (Memory, Comparison) and see what the difference is made of.
 *
 *   npm run bench:heap -- [--impl worker|poll-by-retry|floor] [--jobs 300] [--cadence 2s] [--polls 20] [--snapshots DIR]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { writeHeapSnapshot } from 'node:v8';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { ProjectMetrics } from '../src/observability/project-metrics.js';
import { createActivities } from '../src/activities/index.js';
import { AgentApiClient, closeDispatcher } from '../src/agent-api/index.js';
import { loadWorkerConfig } from '../src/config/worker.js';
import { createBaselineActivities } from './baselines/activities.js';
import { startBenchEnvironment } from './environment.js';
import { cadenceFlag, label, workerImpl } from './catalogue.js';
import { startJobs } from './scenarios/load.js';
import { fixedSchedule } from './schedule.js';
import { waitUntil } from './wait.js';

const say = (line: string) => process.stderr.write(`[heap] ${line}\n`);

const { values } = parseArgs({
  options: {
    impl: { type: 'string', default: 'worker' },
    jobs: { type: 'string', default: '300' },
    cadence: { type: 'string', default: '2s' },
    polls: { type: 'string', default: '20' },
    snapshots: { type: 'string' },
  },
  strict: true,
});
const impl = workerImpl(values.impl);
const jobs = Number(values.jobs);
const polls = Number(values.polls);
const cadenceMs = cadenceFlag(values.cadence);
if (!Number.isInteger(jobs) || jobs < 1 || !Number.isInteger(polls) || polls < 0) {
  throw new Error('--jobs must be a positive integer and --polls a whole number');
}
const WARM_UP = 20;
/** Longest wait for a round of polls: a stuck worker fails the run instead of hanging it. */
const WAIT_LIMIT_MS = 10 * 60_000;
const exposedGc = (globalThis as { gc?: () => void }).gc;
if (!exposedGc) throw new Error('run with node --expose-gc (npm run bench:heap does)');
const gc: () => void = exposedGc;

/** Heap in use after full collections, MiB; written as a snapshot too when asked. */
function heapMiB(moment: string): number {
  gc();
  gc();
  if (values.snapshots)
    say(`snapshot: ${writeHeapSnapshot(join(values.snapshots, `${impl}-${moment}.heapsnapshot`))}`);
  return process.memoryUsage().heapUsed / 2 ** 20;
}

Runtime.install({ logger: new DefaultLogger('WARN') });
const env = await startBenchEnvironment(say);
try {
  // Jobs that outlast the measurement: every poll finds them active.
  const project = env.newProject(`heap-${impl}`, 24 * 3_600_000);
  const config = loadWorkerConfig(await env.workerEnv(project));
  const connection = await NativeConnection.connect(config.temporal.connect.connectionOptions);
  const api = new AgentApiClient({
    baseUrl: config.agentApi.AGENT_API_BASE_URL,
    apiKey: config.agentApi.AGENT_API_KEY,
  });
  const worker = await Worker.create({
    connection,
    ...config.workerOptions,
    // Workflows in this thread, where this process can read their heap.
    debugMode: true,
    sinks: new ProjectMetrics(Runtime.instance().metricMeter, config.METRICS_MAX_PROJECTS).sinks(),
    workflowBundle: {
      codePath: impl === 'worker' ? env.build.workerBundlePath : env.build.baselineBundlePath,
    },
    activities:
      impl === 'worker'
        ? createActivities({
            api,
            ambiguousCreatePolicy: config.agentApi.AGENT_API_AMBIGUOUS_CREATE,
            projectQuota: config.projectQuota,
          })
        : createBaselineActivities(api),
  });
  try {
    await worker.runUntil(async () => {
      const gets = () => env.requestsOf(project).get ?? 0;
      // Counted at the simulator: a poll is one GET of the project's jobs.
      const pollsOf = async (count: number) => {
        const target = gets() + count;
        await waitUntil({
          check: () => (gets() >= target ? true : undefined),
          deadline: Date.now() + WAIT_LIMIT_MS,
          everyMs: 200,
          late: () => {
            throw new Error(
              `${target - gets()} of ${count} polls still missing after ${WAIT_LIMIT_MS / 60_000} min`,
            );
          },
        });
      };
      const how = { impl, taskQueue: project, schedule: fixedSchedule(cadenceMs) };
      await startJobs(env.client, how, project, WARM_UP);
      await pollsOf(WARM_UP);
      const base = heapMiB('base');
      say(`${jobs} workflows, polled every ${cadenceMs} ms`);
      await startJobs(env.client, how, project, jobs, WARM_UP);
      await pollsOf(2 * (WARM_UP + jobs));
      const open = heapMiB('open');
      await pollsOf(polls * (WARM_UP + jobs));
      const later = heapMiB('later');
      const KiB = (mib: number) => (mib * 1024).toFixed(1);
      process.stdout.write(
        [
          `${label(impl)}: ${jobs} workflows at a ${cadenceMs} ms cadence`,
          `  heap: base ${base.toFixed(1)} MiB, open ${open.toFixed(1)} MiB, after ${polls} more polls ${later.toFixed(1)} MiB`,
          `  per open workflow: ${KiB((open - base) / jobs)} KiB`,
          `  per poll, per workflow: ${Math.round(((later - open) / (WARM_UP + jobs) / Math.max(1, polls)) * 2 ** 20)} bytes`,
          '',
        ].join('\n'),
      );
    });
  } finally {
    await connection.close();
    await closeDispatcher();
  }
} finally {
  await env.close();
}
