/**
 * Worker start-up: from the spawn of the worker process to its first poll of an agent job. A
 * workflow that attaches to an existing agent job (it polls at once, with no create and no wait) is
 * started before the worker, so the first GET the simulator sees is the worker's first poll.
 *
 * Two ways to start, as people run the worker: `node` on the built entry beside the prebuilt bundle
 * (the image's lib/; here the scratch build), and `npm run worker`, i.e. `node --import tsx` on its source,
 * which bundles the workflow code with webpack at every start.
 */
import { randomUUID } from 'node:crypto';
import { startAgentJob } from '../../src/client/index.js';
import { AgentApiClient } from '../../src/agent-api/index.js';
import { WORKER_ENTRY } from '../build.js';
import { BENCH_API_KEY, startBenchSimulator, type BenchEnvironment } from '../environment.js';
import { spawnMeasured } from '../processes.js';
import { waitUntil } from '../wait.js';

/**
 * How the worker was started; `modules-only` is not a worker but `node` importing the SDK's
 * worker package and exiting: the floor under every start.
 */
export type StartupMode = 'prebuilt-bundle' | 'workflowsPath' | 'modules-only';

/** One start. Milliseconds from the spawn. */
export interface StartupRun {
  mode: StartupMode;
  /** The worker's own figure (process uptime) in its "worker running" line. */
  reportedStartupMs: number | null;
  /** Until the benchmark read the "worker running" line (or the probe exited). */
  runningMs: number;
  /** Until the simulator answered the first poll. */
  firstPollMs: number | null;
}

/** Starts the worker `repeats` times per mode, alternating modes, and times each start. */
export async function runStartup(
  env: BenchEnvironment,
  repeats: Record<'prebuilt-bundle' | 'workflowsPath', number>,
): Promise<StartupRun[]> {
  // A simulator of its own, whose request log tells the moment of the first poll.
  const firstPollAt = new Map<string, number>();
  const simulator = await startBenchSimulator({
    defaultScenario: { durationMs: 10 * 60_000, outcome: 'pr' },
    log: (line) => {
      const at = Date.now();
      const { method, path } = JSON.parse(line) as { method: string; path: string };
      const project = /^\/v2\/agent\/([^/]+)\/job\/[^/]+$/.exec(path)?.[1];
      const name = project && decodeURIComponent(project);
      if (method === 'GET' && name && !firstPollAt.has(name)) firstPollAt.set(name, at);
    },
  });
  try {
    const api = new AgentApiClient({ baseUrl: simulator.url, apiKey: BENCH_API_KEY });
    const runs: StartupRun[] = [];
    const order: StartupMode[] = [];
    for (let i = 0; i < Math.max(repeats['prebuilt-bundle'], repeats.workflowsPath); i++) {
      if (i < repeats['prebuilt-bundle']) order.push('modules-only', 'prebuilt-bundle');
      if (i < repeats.workflowsPath) order.push('workflowsPath');
    }
    for (const mode of order) {
      if (mode === 'modules-only') {
        runs.push(await timeModuleLoad());
        continue;
      }
      const project = `startup-${randomUUID().slice(0, 8)}`;
      const job = await api.createJob(project, 'Benchmark: start-up', { idempotencyKey: project });
      const handle = await startAgentJob(
        env.client,
        { projectId: project, jobId: job.id },
        { taskQueue: project },
      );
      const workerEnv = { ...(await env.workerEnv(project)), AGENT_API_BASE_URL: simulator.url };
      const entry =
        mode === 'prebuilt-bundle' ? [env.build.workerEntry] : ['--import', 'tsx', `src/${WORKER_ENTRY}.ts`];
      const proc = spawnMeasured(entry, workerEnv);
      try {
        const running = await proc.waitForLine('worker running', 120_000);
        if (running.line.workflowCode !== mode) {
          throw new Error(
            `expected workflow code from ${mode}, the worker used ${String(running.line.workflowCode)}`,
          );
        }
        const polledAt = await waitUntil({
          check: () => firstPollAt.get(project),
          deadline: Date.now() + 60_000,
          everyMs: 50,
          late: () => {
            throw new Error('no first poll within 60s of start-up');
          },
        });
        runs.push({
          mode,
          reportedStartupMs: Number(running.line.startupMs),
          runningMs: running.at - proc.spawnedAt,
          firstPollMs: polledAt - proc.spawnedAt,
        });
      } finally {
        await proc.stop();
        await handle.terminate('start-up measured');
      }
    }
    return runs;
  } finally {
    await simulator.stop();
  }
}

/** Spawns `node` that imports the SDK's worker package (its native core included) and exits. */
async function timeModuleLoad(): Promise<StartupRun> {
  const proc = spawnMeasured(['--input-type=module', '-e', "await import('@temporalio/worker');"], {});
  const code = await proc.exited;
  if (code !== 0) throw new Error(`importing @temporalio/worker failed (${code}):\n${proc.tail()}`);
  return {
    mode: 'modules-only',
    reportedStartupMs: null,
    runningMs: Date.now() - proc.spawnedAt,
    firstPollMs: null,
  };
}
