/**
 * `npm run bench:profile`: where a worker's CPU goes per poll, with a profiler rather than guesses.
 *
 * Starts the benchmark's environment (dev server, simulator, prebuilt build), runs one worker (this
 * project's, or with `--impl poll-by-retry` or `--impl floor` the one of baseline (b) or (c), to compare thread by thread)
 * under V8's sampling profiler (`--cpu-prof`, one profile per JavaScript thread: the main thread
 * with the activities and the SDK's bridge, and the workflow threads), holds N jobs open at a fixed
 * cadence, and reads over a steady window of whole cadences:
 *
 * - the CPU of each of the worker's threads, grouped by kind (JavaScript main thread, workflow
 *   threads, the SDK core's Rust runtime, V8's helpers, libuv's pool), from /proc: the Rust core is
 *   invisible to a JavaScript profiler, so this is the only way to see its share;
 * - from the profiles, the self time by module and the top functions of each JavaScript thread,
 *   over the whole life of the worker (the ramp of N starts included: the steady window is made
 *   long enough that polls dominate; the per-thread CPU above is the steady window alone);
 * - how long a poll attempt takes from when it was due to its failure (the retry timer firing,
 *   matching, the worker taking the task, the GET): the server's view of 50 of the jobs' pending
 *   poll activities, read twice a cadence apart. A job polls every cadence plus this;
 * - how many GETs each job made in the window, and for the five jobs polled least, their pending
 *   poll activity (its attempt, when the last one started and ended, when the next is due: "-" once
 *   it is due and not yet started) and the last events of their history: whether a shortfall of the
 *   rate is every poll a little late or some jobs going long without one;
 * - how busy the machine was in the window, and how much the host stole: per-poll figures of two
 *   runs compare only when neither ran short of CPU;
 * - after the window, a release as the load scenario's (every job ends within one cadence), with 50
 *   jobs' detection latency split from their histories (see {@link release}).
 *
 *   npm run bench:profile -- [--impl worker|poll-by-retry|floor] [--jobs 1000] [--cadence 10s] [--cadences 6] [--top 25] [--keep DIR]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { spawnWorker, startBenchEnvironment } from './environment.js';
import { cadenceFlag, label, workerImpl } from './catalogue.js';
import { releaseWithinCadence, startLoadJob, terminalTimes, waitForClose } from './scenarios/load.js';
import { waitUntil } from './wait.js';
import { sampleProcess } from './resources.js';
import { detectionSplit, timestampMs } from './history.js';
import { percentile } from './stats.js';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { mapLimit } from '../src/client/map-limit.js';

const say = (line: string) => process.stderr.write(`[profile] ${line}\n`);

const { values } = parseArgs({
  options: {
    impl: { type: 'string', default: 'worker' },
    jobs: { type: 'string', default: '1000' },
    cadence: { type: 'string', default: '10s' },
    cadences: { type: 'string', default: '6' },
    top: { type: 'string', default: '25' },
    keep: { type: 'string' },
  },
  strict: true,
});

/** CPU seconds of each thread of a process, by thread ID, with the thread's name. */
function threadCpu(pid: number): Map<string, { name: string; seconds: number }> {
  const ticks = 100; // USER_HZ on Linux
  const threads = new Map<string, { name: string; seconds: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
      const seconds = (Number(fields[11]) + Number(fields[12])) / ticks;
      threads.set(tid, { name, seconds });
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return threads;
}

/** The machine's CPU ticks from /proc/stat: all of them, idle (with I/O wait), and stolen by the host. */
function machineTicks(): { total: number; idle: number; steal: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const [, , , idle = 0, iowait = 0, , , steal = 0] = fields;
  return { total: fields.reduce((a, b) => a + b, 0), idle: idle + iowait, steal };
}

/** The kind of the worker's workflow threads, in {@link threadKind}. */
const WORKFLOW_THREADS = 'workflow threads (JavaScript)';

/** What kind of work a thread does, from its name as Node, V8, libuv and tokio set it. */
function threadKind(name: string, isMain: boolean): string {
  if (isMain) return 'JavaScript main thread (activities, SDK bridge, logging)';
  if (/^tokio|^core|temporal/i.test(name)) return 'SDK core (Rust, tokio)';
  if (/^V8 |^v8:/i.test(name)) return "V8's helpers (GC, compiler)";
  if (/^libuv|^uv/i.test(name)) return "libuv's pool";
  if (/^node$|^WorkerThread|^worker/i.test(name)) return WORKFLOW_THREADS;
  return `other (${name})`;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The module a frame belongs to: a package under node_modules, a file of this project, or V8/Node. */
function moduleOf(url: string): string {
  if (url === '') return '(V8: GC, program, idle, native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1] as string;
  if (url.startsWith('node:')) return 'node (built-in)';
  const own = /\/((?:src|bench|dev)\/[^?]+)/.exec(url);
  if (own) return own[1] as string;
  // The workflow bundle is one file: its frames are named by the bundle, not by their source.
  if (url.includes('workflow-bundle') || url.includes('bundle')) return 'workflow bundle';
  return url;
}

/** Self time (ms) by module and by function of one profile. */
function selfTimes(profile: CpuProfile): {
  total: number;
  byModule: Map<string, number>;
  byFunction: Map<string, number>;
} {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfMs = new Map<number, number>();
  profile.samples.forEach((id, i) =>
    selfMs.set(id, (selfMs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000),
  );
  const byModule = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  for (const [id, ms] of selfMs) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') continue;
    total += ms;
    const module = moduleOf(url);
    byModule.set(module, (byModule.get(module) ?? 0) + ms);
    const fn = `${functionName || '(anonymous)'} ${module}:${lineNumber + 1}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + ms);
  }
  return { total, byModule, byFunction };
}

function top(map: Map<string, number>, n: number, total: number): string[] {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(
      ([name, ms]) =>
        `  ${(ms / 1000).toFixed(2).padStart(8)} s ${((100 * ms) / total).toFixed(1).padStart(5)} %  ${name}`,
    );
}

/** The activity task queue's backlog, as the server counts it. */
async function activityBacklog(client: Client, taskQueue: string): Promise<{ count: number; ageMs: number }> {
  const answer = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    reportStats: true,
  });
  const stats = answer.stats;
  const age = stats?.approximateBacklogAge;
  return {
    count: Number(stats?.approximateBacklogCount ?? 0),
    ageMs: Number(age?.seconds ?? 0) * 1000 + Math.round((age?.nanos ?? 0) / 1e6),
  };
}

/** Jobs whose poll attempts {@link attemptTimes} follows. */
const ATTEMPT_SAMPLE = 50;

/** What the server shows of a workflow's pending poll activity between attempts, times in ms. */
interface PendingPoll {
  /** The next attempt. */
  attempt: number;
  /** When it is due. */
  dueAt: number;
  /** When the attempt before it ended (the server clears the start time between attempts). */
  lastEndedAt: number | null;
}

const ms = (time: Parameters<typeof timestampMs>[0]): number | null => (time ? timestampMs(time) : null);

async function pendingPolls(
  client: Client,
  jobs: Array<{ workflowId: string }>,
): Promise<Map<string, PendingPoll>> {
  const found = new Map<string, PendingPoll>();
  await mapLimit(jobs, 8, async ({ workflowId }) => {
    const described = await client.workflowService.describeWorkflowExecution({
      namespace: client.options.namespace,
      execution: { workflowId },
    });
    const pending = described.pendingActivities?.[0];
    const dueAt = ms(pending?.nextAttemptScheduleTime);
    if (!pending || dueAt === null) return;
    found.set(workflowId, {
      attempt: pending.attempt ?? 0,
      dueAt,
      lastEndedAt: ms(pending.lastAttemptCompleteTime),
    });
  });
  return found;
}

/**
 * From two looks a cadence apart: for each job seen waiting between attempts both times, one
 * attempt apart, the time from when that attempt was due to when it failed asking for the next: the
 * retry timer firing, matching, the worker taking the task, the GET and the worker's work around
 * it. The cadence plus this is the time between a job's polls. A job whose attempt was late by more
 * than the cadence ran none between the looks and is left out: {@link getsInWindow} shows those.
 */
function attemptTimes(first: Map<string, PendingPoll>, second: Map<string, PendingPoll>): string {
  const spans: number[] = [];
  for (const [id, before] of first) {
    const after = second.get(id);
    if (!after || after.attempt !== before.attempt + 1 || after.lastEndedAt === null) continue;
    spans.push(after.lastEndedAt - before.dueAt);
  }
  const at = (p: number) => Math.round(percentile(spans, p));
  return (
    `Poll attempts of ${spans.length} of ${first.size} sampled jobs, from due to failed (server clock): ` +
    `p50 ${at(50)} ms, p90 ${at(90)} ms, max ${at(100)} ms`
  );
}

/**
 * How many GETs each job had in the window: whether a shortfall of the rate is every job polling a
 * little late, or some jobs not polling at all.
 */
function getsInWindow(gets: Map<string, number>): string {
  const jobsByGets = new Map<number, number>();
  for (const count of gets.values()) jobsByGets.set(count, (jobsByGets.get(count) ?? 0) + 1);
  const counts = [...jobsByGets].sort((a, b) => a[0] - b[0]).map(([count, jobs]) => `${count}: ${jobs}`);
  return `GETs per job in the window (GETs: jobs): ${counts.join(', ')}`;
}

/**
 * The jobs polled least in the window (at most 5 with fewer than half the cadence's polls), with
 * their pending poll activity and the last events of their history: why a job went without polls.
 */
async function fewestPolled(client: Client, gets: Map<string, number>, cadences: number): Promise<string[]> {
  const few = [...gets]
    .map(([jobId, count]) => ({ jobId, gets: count }))
    .filter((job) => job.gets < cadences / 2)
    .sort((a, b) => a.gets - b.gets)
    .slice(0, 5);
  const lines: string[] = [];
  for (const { jobId, gets } of few) {
    const found = await client.workflowService.listWorkflowExecutions({
      namespace: client.options.namespace,
      query: `AgentJobId = '${jobId}'`,
      pageSize: 1,
    });
    const execution = found.executions?.[0]?.execution;
    if (!execution?.workflowId) continue;
    const handle = client.workflow.getHandle(execution.workflowId);
    const described = await client.workflowService.describeWorkflowExecution({
      namespace: client.options.namespace,
      execution: { workflowId: execution.workflowId },
    });
    const pending = described.pendingActivities?.[0];
    const now = Date.now();
    const ago = (time: Parameters<typeof ms>[0]) => {
      const at = ms(time);
      return at === null ? '-' : `${((now - at) / 1000).toFixed(1)} s ago`;
    };
    const events = (await handle.fetchHistory()).events ?? [];
    const kinds = events.map((e) => String(e.eventType ?? '').replace('EVENT_TYPE_', '')).slice(-12);
    lines.push(
      `  job ${jobId}: ${gets} GETs; pending activity attempt ${pending?.attempt ?? '-'}, state ${pending?.state ?? '-'}, ` +
        `last failure ${pending?.lastFailure?.message ?? '-'}; last started ${ago(pending?.lastStartedTime)}, ` +
        `ended ${ago(pending?.lastAttemptCompleteTime)}, next due ${ago(pending?.nextAttemptScheduleTime)}; ` +
        `the history's last events: ${kinds.join(' ')}`,
    );
  }
  return lines.length === 0 ? [] : ['Jobs polled least:', ...lines];
}

/**
 * Ends every job at a random moment of one cadence, as the load scenario's release does, waits for
 * every workflow to close, and splits the detection latency of a sample from the histories: from
 * the job's end to the start of the poll attempt that saw it (the wait for the next poll), that
 * attempt (the GET and the worker around it), the activity's completion to the workflow task that
 * reads it (the server and the worker's workflow-task queue), and that task to the close. The
 * sample is the one whose pending polls the window read. Also the worker's workflow-thread CPU over
 * the release, per job.
 */
async function release(
  env: Awaited<ReturnType<typeof startBenchEnvironment>>,
  project: string,
  jobs: number,
  sample: Array<{ workflowId: string }>,
  cadenceMs: number,
  workflowCpu: () => number,
): Promise<string[]> {
  const cpuBefore = workflowCpu();
  const jobIds = env.simulator
    .stats()
    .jobs.filter((job) => job.projectId === project)
    .map((job) => job.id);
  const timers = releaseWithinCadence(env, project, jobIds, cadenceMs);
  try {
    // Watched as the load scenario watches its release (a count a second), not with a long poll per
    // workflow, which would load the server while it detects.
    const late = await waitForClose(env.client, project, jobs, Date.now() + 10 * 60_000);
    if (late !== null) throw new Error(`release: ${late}`);
  } finally {
    for (const timer of timers) clearTimeout(timer);
  }
  const cpuPerJobMs = ((workflowCpu() - cpuBefore) * 1000) / jobs;
  const parts = await detectionSplit(env.client, sample, terminalTimes(env, project));
  const line = (name: string, values: number[]) =>
    `  ${name}: p50 ${Math.round(percentile(values, 50))} ms, p90 ${Math.round(percentile(values, 90))} ms, ` +
    `max ${Math.round(Math.max(...values))} ms`;
  return [
    `Release: every job ended within one cadence; detection of ${parts.wait.length} sampled jobs, split ` +
      `(server clock for the events, the simulator's for the end); workflow threads ${cpuPerJobMs.toFixed(2)} ms of CPU per job:`,
    line("the job's end to the start of the attempt that saw it", parts.wait),
    line('that attempt, to its completion', parts.attempt),
    line('the completion to the workflow task that reads it', parts.toTask),
    line('that workflow task to the close', parts.toClose),
  ];
}

async function main(): Promise<void> {
  const impl = workerImpl(values.impl);
  const jobs = Number(values.jobs);
  const cadenceMs = cadenceFlag(values.cadence);
  const cadences = Number(values.cadences);
  const topN = Number(values.top);
  const dir = values.keep ?? mkdtempSync(join(tmpdir(), 'agent-job-profile-'));
  const env = await startBenchEnvironment(say);
  try {
    const project = `profile-${Date.now()}`;
    env.simulator.setScenario(project, { durationMs: 6 * 60 * 60_000, outcome: 'pr' });
    // Node takes --cpu-prof on its command line only, not in NODE_OPTIONS.
    const worker = await spawnWorker(env, impl === 'worker' ? 'worker' : 'baselines', project, {}, [
      '--cpu-prof',
      `--cpu-prof-dir=${dir}`,
    ]);
    await worker.waitForLine('worker running', 60_000);
    say(`starting ${jobs} jobs of ${label(impl)} polled every ${cadenceMs / 1000} s`);
    const started = await mapLimit(
      Array.from({ length: jobs }, (_, i) => i),
      64,
      (i) => startLoadJob(env.client, { impl, cadenceMs }, project, i),
    );
    const created = () => env.simulator.stats().requestsPerProjectEndpoint[project]?.create ?? 0;
    await waitUntil({
      check: () => (created() >= jobs ? true : undefined),
      deadline: Date.now() + 10 * 60_000,
      everyMs: 200,
      late: () => {
        throw new Error(`only ${created()} of ${jobs} agent jobs created within 10 min`);
      },
    });
    await sleep(cadenceMs);
    const polls = () => env.simulator.stats().requestsPerProjectEndpoint[project]?.get ?? 0;
    const serverCpu = () => (env.serverPid === null ? Number.NaN : sampleProcess(env.serverPid).cpuSeconds);
    const getsPerJob = () =>
      new Map(
        env.simulator
          .stats()
          .jobs.filter((job) => job.projectId === project)
          .map((job) => [job.id, job.requests.get.count]),
      );
    const getsBefore = getsPerJob();
    const before = {
      threads: threadCpu(worker.pid),
      polls: polls(),
      at: Date.now(),
      server: serverCpu(),
      machine: machineTicks(),
    };
    say(`steady window: ${cadences} cadences`);
    const sampled = started.filter((_, i) => i % Math.max(1, Math.floor(jobs / ATTEMPT_SAMPLE)) === 0);
    const firstLook = await pendingPolls(env.client, sampled);
    await sleep(cadenceMs);
    const secondLook = await pendingPolls(env.client, sampled);
    await sleep((cadences - 1) * cadenceMs);
    const after = {
      threads: threadCpu(worker.pid),
      polls: polls(),
      at: Date.now(),
      server: serverCpu(),
      machine: machineTicks(),
    };
    const getsAfter = getsPerJob();
    const gets = new Map(
      [...getsAfter].map(([jobId, count]) => [jobId, count - (getsBefore.get(jobId) ?? 0)]),
    );
    const backlog = await activityBacklog(env.client, project);
    const fewest = await fewestPolled(env.client, gets, cadences);
    const workflowCpu = () =>
      [...threadCpu(worker.pid)]
        .filter(([tid, t]) => threadKind(t.name, tid === String(worker.pid)) === WORKFLOW_THREADS)
        .reduce((sum, [, t]) => sum + t.seconds, 0);
    const released = await release(env, project, jobs, sampled, cadenceMs, workflowCpu);
    await worker.stop();

    const steadyPolls = after.polls - before.polls;
    const byKind = new Map<string, number>();
    for (const [tid, t] of after.threads) {
      const kind = threadKind(t.name, tid === String(worker.pid));
      byKind.set(kind, (byKind.get(kind) ?? 0) + t.seconds - (before.threads.get(tid)?.seconds ?? 0));
    }
    const cpu = [...byKind.values()].reduce((s, v) => s + v, 0);
    const out: string[] = [];
    out.push(
      `Steady window: ${((after.at - before.at) / 1000).toFixed(0)} s, ${steadyPolls} polls ` +
        `(${(steadyPolls / ((after.at - before.at) / 1000)).toFixed(1)}/s), worker CPU ${cpu.toFixed(2)} s, ` +
        `${((1000 * cpu) / steadyPolls).toFixed(2)} ms per poll; the Temporal server ` +
        `${((1000 * (after.server - before.server)) / steadyPolls).toFixed(2)} ms per poll`,
    );
    const ticks = after.machine.total - before.machine.total;
    const share = (n: number) => `${((100 * n) / Math.max(1, ticks)).toFixed(1)} %`;
    out.push(
      `The machine in the window: busy ${share(ticks - (after.machine.idle - before.machine.idle))} of its CPUs, ` +
        `stolen by the host ${share(after.machine.steal - before.machine.steal)} (a figure per poll is only comparable between runs with little of either)`,
    );
    out.push(
      `Activity tasks waiting in the task queue at the window's end: ${backlog.count}, the oldest ${backlog.ageMs} ms ` +
        '(tasks the worker did not take at once: the server stores them and matches them later)',
    );
    out.push(attemptTimes(firstLook, secondLook));
    out.push(getsInWindow(gets), ...fewest, ...released);
    out.push('CPU per poll by thread kind:');
    for (const [kind, seconds] of [...byKind].sort((a, b) => b[1] - a[1])) {
      out.push(
        `  ${((1000 * seconds) / steadyPolls).toFixed(3).padStart(7)} ms ${((100 * seconds) / cpu).toFixed(1).padStart(5)} %  ${kind}`,
      );
    }
    for (const file of readdirSync(dir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .sort()) {
      const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
      const { total, byModule, byFunction } = selfTimes(profile);
      if (total < 100) continue;
      out.push(`\nProfile ${file}: ${(total / 1000).toFixed(2)} s of samples (whole life, idle left out)`);
      out.push('By module:', ...top(byModule, 12, total));
      out.push('By function:', ...top(byFunction, topN, total));
    }
    process.stdout.write(`${out.join('\n')}\n`);
    if (values.keep) say(`profiles kept in ${dir} (open them in Chrome DevTools' Performance panel)`);
  } finally {
    await env.close();
    if (!values.keep) rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`[profile] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
