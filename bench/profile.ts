/**
 * `npm run bench:profile`: where a worker's CPU goes per poll, with a profiler rather than guesses.
 *
 * Runs one worker (this project's, or baseline (b) or (c)) under V8's sampling profiler
 * (`--cpu-prof`, one profile per JavaScript thread), holds N jobs open at a fixed cadence, and
 * reads over a steady window of whole cadences: the CPU of each thread by kind, from /proc (the
 * SDK's Rust core is invisible to a JavaScript profiler); from the profiles, the self time by module
 * and function over the worker's whole life (the window is long enough that polls dominate); the
 * GETs per job and the activity task backlog (whether a rate short of asked is every poll a little
 * late, some jobs going long without one, or the server behind); how busy the machine was (per-poll
 * figures compare only between runs that did not run short of CPU).
 *
 *   npm run bench:profile -- [--impl worker|poll-by-retry|floor] [--jobs 1000] [--cadence 10s] [--cadences 6] [--top 25] [--keep DIR]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import proto from '@temporalio/proto';
import { startBenchEnvironment, type BenchEnvironment } from './environment.js';
import { cadenceFlag, label, workerImpl } from './catalogue.js';
import { startJobs, waitForCount } from './scenarios/load.js';
import { fixedSchedule } from './schedule.js';
import { cpuShares, cpuTimes, sampleProcess, threadCpu } from './resources.js';

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

/** What kind of work a thread does, from its name as Node, V8, libuv and tokio set it. */
function threadKind(name: string, isMain: boolean): string {
  if (isMain) return 'JavaScript main thread (activities, SDK bridge, logging)';
  if (/^tokio|^core|temporal/i.test(name)) return 'SDK core (Rust, tokio)';
  if (/^V8 |^v8:/i.test(name)) return "V8's helpers (GC, compiler)";
  if (/^libuv|^uv/i.test(name)) return "libuv's pool";
  if (/^node$|^WorkerThread|^worker/i.test(name)) return 'workflow threads (JavaScript)';
  return `other (${name})`;
}

/** A profile as `--cpu-prof` writes it, what of it is read here. */
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number } }>;
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
  if (url.includes('bundle')) return 'workflow bundle';
  return url;
}

/** Self time (ms) by module and by function of one profile, idle left out. */
function selfTimes(profile: CpuProfile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const byModule = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const frame = byId.get(id)?.callFrame;
    if (!frame || frame.functionName === '(idle)') return;
    const ms = (profile.timeDeltas[i] ?? 0) / 1000;
    const module = moduleOf(frame.url);
    const fn = `${frame.functionName || '(anonymous)'} ${module}:${frame.lineNumber + 1}`;
    total += ms;
    byModule.set(module, (byModule.get(module) ?? 0) + ms);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + ms);
  });
  return { total, byModule, byFunction };
}

/** The `n` largest of `map`, each as `figure` of its value and its share of `total`. */
function top(map: Map<string, number>, total: number, figure: (value: number) => string, n = map.size) {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(
      ([name, value]) => `  ${figure(value)} ${((100 * value) / total).toFixed(1).padStart(5)} %  ${name}`,
    );
}

/** The activity task queue's backlog, as the server counts it. */
async function activityBacklog(env: BenchEnvironment, taskQueue: string): Promise<string> {
  const { stats } = await env.client.workflowService.describeTaskQueue({
    namespace: env.temporal.namespace,
    taskQueue: { name: taskQueue },
    taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
    reportStats: true,
  });
  const age = stats?.approximateBacklogAge;
  const ageMs = Number(age?.seconds ?? 0) * 1000 + Math.round((age?.nanos ?? 0) / 1e6);
  return (
    `Activity tasks waiting in the task queue at the window's end: ${Number(stats?.approximateBacklogCount ?? 0)}, ` +
    `the oldest ${ageMs} ms (tasks the worker did not take at once: the server stores them and matches them later)`
  );
}

try {
  const impl = workerImpl(values.impl);
  const jobs = Number(values.jobs);
  const cadenceMs = cadenceFlag(values.cadence);
  const cadences = Number(values.cadences);
  const dir = values.keep ?? mkdtempSync(join(tmpdir(), 'agent-job-profile-'));
  const env = await startBenchEnvironment(say);
  try {
    const project = env.newProject('profile');
    // Node takes --cpu-prof on its command line only, not in NODE_OPTIONS.
    const nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${dir}`];
    const worker = await env.startWorker(impl, project, { nodeArgs });
    say(`starting ${jobs} jobs of ${label(impl)} polled every ${cadenceMs / 1000} s`);
    await startJobs(
      env.client,
      { impl, taskQueue: project, schedule: fixedSchedule(cadenceMs) },
      project,
      jobs,
    );
    const created = () => env.requestsOf(project).create ?? 0;
    const short = await waitForCount(created, jobs, 'created', Date.now() + 10 * 60_000, worker);
    if (short !== null) throw new Error(short);
    await sleep(cadenceMs);
    const read = () => ({
      threads: threadCpu(worker.pid),
      polls: env.requestsOf(project).get ?? 0,
      gets: new Map(env.jobsOf(project).map((job) => [job.id, job.requests.get.count])),
      at: Date.now(),
      server: env.temporal.pid === null ? Number.NaN : sampleProcess(env.temporal.pid).cpuSeconds,
      machine: cpuTimes(),
    });
    say(`steady window: ${cadences} cadences`);
    const before = read();
    await sleep(cadences * cadenceMs);
    const after = read();
    const backlog = await activityBacklog(env, project);
    await worker.stop();

    const steadyPolls = after.polls - before.polls;
    const seconds = (after.at - before.at) / 1000;
    const byKind = new Map<string, number>();
    for (const [tid, t] of after.threads) {
      const kind = threadKind(t.name, tid === String(worker.pid));
      byKind.set(kind, (byKind.get(kind) ?? 0) + t.cpuSeconds - (before.threads.get(tid)?.cpuSeconds ?? 0));
    }
    const cpu = [...byKind.values()].reduce((s, v) => s + v, 0);
    const machine = cpuShares(before.machine, after.machine);
    // Whether a shortfall of the rate is every job polling a little late, or some jobs not at all.
    const jobsByGets = new Map<number, number>();
    for (const [jobId, count] of after.gets) {
      const gets = count - (before.gets.get(jobId) ?? 0);
      jobsByGets.set(gets, (jobsByGets.get(gets) ?? 0) + 1);
    }
    const out = [
      `Steady window: ${seconds.toFixed(0)} s, ${steadyPolls} polls (${(steadyPolls / seconds).toFixed(1)}/s), ` +
        `worker CPU ${cpu.toFixed(2)} s, ${((1000 * cpu) / steadyPolls).toFixed(2)} ms per poll; the Temporal server ` +
        `${((1000 * (after.server - before.server)) / steadyPolls).toFixed(2)} ms per poll`,
      `The machine in the window: busy ${machine.busy.toFixed(1)} % of its CPUs, stolen by the host ` +
        `${machine.steal.toFixed(1)} % (a figure per poll is only comparable between runs with little of either)`,
      backlog,
      `GETs per job in the window (GETs: jobs): ${[...jobsByGets]
        .sort((a, b) => a[0] - b[0])
        .map(([gets, count]) => `${gets}: ${count}`)
        .join(', ')}`,
      'CPU per poll by thread kind:',
      ...top(byKind, cpu, (s) => `${((1000 * s) / steadyPolls).toFixed(3).padStart(7)} ms`),
    ];
    for (const file of readdirSync(dir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .sort()) {
      const { total, byModule, byFunction } = selfTimes(
        JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile,
      );
      if (total < 100) continue;
      out.push(`\nProfile ${file}: ${(total / 1000).toFixed(2)} s of samples (whole life, idle left out)`);
      const inSeconds = (ms: number) => `${(ms / 1000).toFixed(2).padStart(8)} s`;
      out.push('By module:', ...top(byModule, total, inSeconds, 12));
      out.push('By function:', ...top(byFunction, total, inSeconds, Number(values.top)));
    }
    process.stdout.write(`${out.join('\n')}\n`);
    if (values.keep) say(`profiles kept in ${dir} (open them in Chrome DevTools' Performance panel)`);
  } finally {
    await env.close();
    if (!values.keep) rmSync(dir, { recursive: true, force: true });
  }
} catch (err) {
  process.stderr.write(`[profile] ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
}
// Ends the process with the code set above, whatever handles are left open.
process.exit();
