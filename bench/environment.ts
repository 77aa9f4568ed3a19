/**
 * What every scenario runs against: the real Temporal dev server (from the project's CLI
 * resolver) with raised rate limits, or with `--server postgres` Temporal Server on PostgreSQL as
 * `npm run test:cluster` runs it; the API simulator without its create limit, a client, and the
 * scratch build of the measured processes, and the processes each scenario starts. Everything
 * started here is stopped by `close()`, newest first, also when a later step failed.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { payloadDataConverter } from '../src/payload-codec/index.js';
import { freePort, startDevServer } from '../dev/dev-server.js';
import { startCluster } from '../dev/temporal-cluster.js';
import {
  startSimulator,
  type Endpoint,
  type JobStats,
  type RunningSimulator,
  type SimulatorOptions,
} from '../src/simulator/index.js';
import type { PlainLoopOptions } from './baselines/plain-loop.js';
import { buildForBench, type Build } from './build.js';
import type { BenchServer, WorkerImplementation } from './catalogue.js';
import { spawnMeasured, type MeasuredProcess } from './processes.js';
import type { Schedule } from './schedule.js';

/** The bench's API key at the simulator; a made-up value that guards nothing. */
export const BENCH_API_KEY = 'bench-local-key';

/**
 * Dynamic config of the dev server: why each, and the defaults (the server's
 * common/dynamicconfig/constants.go), are docs/PERFORMANCE.md's "Dev server limits". The
 * measurement behind history.queueReaderStuckCriticalAttempts: 0, with bench:profile at N = 2,000:
 * the stuck-reader mitigation ran 300 to 400 times a run, moving seconds of timers to a second
 * reader that loads only within the shard's 20 loads a second (history.timerProcessorMaxPollRPS),
 * so they loaded mostly 10 to 20 s late, some 50 s: 6 jobs polled once and 112 twice in a 61 s
 * window where the cadence asks for 6 (178.5 polls/s); with it off, every job polled 5 to 7 times
 * (199.5/s). How often it trips on a cluster's several shards is not measured here.
 */
export const DYNAMIC_CONFIG: Record<string, number> = {
  'frontend.rps': 50_000,
  'frontend.namespaceRPS': 50_000,
  'frontend.persistenceMaxQPS': 50_000,
  'frontend.namespaceRPS.visibility': 200,
  'history.rps': 50_000,
  'matching.rps': 50_000,
  'history.queueReaderStuckCriticalAttempts': 0,
};

/** A Temporal server of either kind, with the bench's client to it; `stop()` closes both. */
type Temporal = Awaited<ReturnType<typeof startTemporal>>;

/**
 * The dev server with {@link DYNAMIC_CONFIG}, or Temporal Server on PostgreSQL as test:cluster
 * runs it (with the compose file's dynamic config, so the server's default limits), and a client.
 */
async function startTemporal(kind: BenchServer, log: (line: string) => void) {
  const server =
    kind === 'dev'
      ? await startDevServer({ dynamicConfig: DYNAMIC_CONFIG, log: (line) => log(`[dev-server] ${line}`) })
      : await startCluster({ log: (line) => log(`[cluster] ${line}`) }).then((c) => ({
          ...c,
          pid: c.serverPid(),
        }));
  let connection: Connection | undefined;
  const stop = async (): Promise<void> => {
    try {
      await connection?.close();
    } finally {
      await server.stop();
    }
  };
  try {
    connection = await Connection.connect({ address: server.address });
    const info = await connection.workflowService.getSystemInfo({});
    const client = new Client({ connection, namespace: server.namespace });
    const { address, namespace, pid } = server;
    return { address, namespace, pid, client, version: info.serverVersion || 'unknown', stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A simulator for the benchmark: its key, and no create limit (the API's 100 per project per hour would be the bottleneck of every run). */
export function startBenchSimulator(
  options: Omit<SimulatorOptions, 'apiKeys'> = {},
): Promise<RunningSimulator> {
  return startSimulator({ apiKeys: [BENCH_API_KEY], createsPerProjectPerHour: 0, log: false, ...options });
}

/**
 * What every scenario runs against, started by {@link startBenchEnvironment}. The server changes
 * when {@link BenchEnvironment.renewServer} replaces it: read {@link temporal} at the time of use,
 * and start workers after a renewal, not before.
 */
export class BenchEnvironment {
  #temporal: Temporal | null;
  #payloadKeysDir: string | null = null;
  /** The processes started and not yet stopped by {@link stopProcesses}. */
  #processes: MeasuredProcess[] = [];

  constructor(
    private readonly serverKind: BenchServer,
    private readonly log: (line: string) => void,
    temporal: Temporal,
    readonly simulator: RunningSimulator,
    readonly build: Build,
    /** Milliseconds to start the first server, emit and bundle. */
    readonly setupMs: { server: number; emit: number; bundle: number },
  ) {
    this.#temporal = temporal;
  }

  /** The current server. */
  get temporal(): Temporal {
    if (this.#temporal === null)
      throw new Error('the bench environment has no Temporal server: its renewal failed');
    return this.#temporal;
  }

  /** A client of the current server. */
  get client(): Client {
    return this.temporal.client;
  }

  /**
   * A project of its own at the simulator, named `prefix` and a random tail, whose jobs end with a
   * PR after `durationMs`; by default they stay active past any run (that only bounds a run that
   * lost its end). Its name serves as the task queue of the run too.
   */
  newProject(prefix: string, durationMs = 6 * 60 * 60_000): string {
    const project = `${prefix}-${randomUUID().slice(0, 8)}`;
    this.simulator.setScenario(project, { durationMs, outcome: 'pr' });
    return project;
  }

  /** The simulator's jobs of `project`, with their request counts. */
  jobsOf(project: string): JobStats[] {
    return this.simulator.stats().jobs.filter((job) => job.projectId === project);
  }

  /** The simulator's requests of `project`, by endpoint. */
  requestsOf(project: string): Partial<Record<Endpoint, number>> {
    return this.simulator.stats().requestsPerProjectEndpoint[project] ?? {};
  }

  /**
   * A payload key ring file of one fresh key (TEMPORAL_PAYLOAD_KEYS_FILE), made on first use and
   * removed by {@link close}: for the runs with the payload codec on.
   */
  get payloadKeysFile(): string {
    const made = this.#payloadKeysDir !== null;
    this.#payloadKeysDir ??= mkdtempSync(join(tmpdir(), 'bench-payload-keys-'));
    const file = join(this.#payloadKeysDir, 'payload-keys');
    if (!made) writeFileSync(file, `bench-1 ${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    return file;
  }

  /**
   * A client of the current server; with `sealed`, one that seals with the ring of
   * {@link payloadKeysFile} (a keyed worker refuses unsealed input).
   */
  clientOf(sealed: boolean): Client {
    if (!sealed) return this.client;
    return new Client({
      connection: this.client.connection,
      namespace: this.temporal.namespace,
      dataConverter: payloadDataConverter(this.payloadKeysFile),
    });
  }

  /** Environment of a worker process on `taskQueue` (ours or the baselines'), before overrides. */
  async workerEnv(taskQueue: string, overrides: Record<string, string> = {}): Promise<NodeJS.ProcessEnv> {
    return {
      TEMPORAL_ADDRESS: this.temporal.address,
      TEMPORAL_NAMESPACE: this.temporal.namespace,
      TEMPORAL_TASK_QUEUE: taskQueue,
      AGENT_API_BASE_URL: this.simulator.url,
      AGENT_API_KEY: BENCH_API_KEY,
      HEALTH_ADDRESS: `127.0.0.1:${await freePort()}`,
      METRICS_ADDRESS: 'off',
      // INFO, as in production: the worker's own log lines are part of its cost.
      LOG_LEVEL: 'INFO',
      // The simulator here is unlimited and a load point runs up to 10,000 jobs in one project;
      // the default quota (100 per project per hour) would measure the quota, not the worker.
      AGENT_API_PROJECT_QUOTA: 'off',
      ...overrides,
    };
  }

  /**
   * Starts a worker on `taskQueue` (this project's, or for (b) and (c) the benchmark's own, both on
   * a prebuilt bundle) and waits for its "worker running" line. `overrides` are worker settings,
   * `sealed` gives it the payload codec's ring, `nodeArgs` go to node before the entry. It runs
   * until {@link stopProcesses}.
   */
  async startWorker(
    impl: WorkerImplementation,
    taskQueue: string,
    options: { overrides?: Record<string, string>; sealed?: boolean; nodeArgs?: string[] } = {},
  ): Promise<MeasuredProcess & { runningAt: number }> {
    const { overrides = {}, sealed = false, nodeArgs = [] } = options;
    const env = await this.workerEnv(taskQueue, {
      ...overrides,
      ...(sealed && { TEMPORAL_PAYLOAD_KEYS_FILE: this.payloadKeysFile }),
      ...(impl !== 'worker' && { BENCH_WORKFLOW_BUNDLE: this.build.baselineBundlePath }),
    });
    const entry = impl === 'worker' ? this.build.workerEntry : this.build.baselineWorkerEntry;
    const proc = this.#spawn([...nodeArgs, entry], env);
    return { ...proc, runningAt: (await proc.waitForLine('worker running', 60_000)).at };
  }

  /** Starts (a), the plain loop, ready for `runPlainLoop` (./processes.ts); it runs until {@link stopProcesses}. */
  async startPlainLoop(
    simulatorUrl: string,
    project: string,
    jobs: number,
    schedule: Schedule,
  ): Promise<MeasuredProcess> {
    const options: PlainLoopOptions = { baseUrl: simulatorUrl, projectId: project, jobs, schedule };
    const proc = this.#spawn(
      [this.build.plainLoopEntry, JSON.stringify(options)],
      { AGENT_API_KEY: BENCH_API_KEY },
      { stdin: 'pipe' },
    );
    await proc.waitForLine('ready', 60_000);
    return proc;
  }

  #spawn(...args: Parameters<typeof spawnMeasured>): MeasuredProcess {
    const proc = spawnMeasured(...args);
    this.#processes.push(proc);
    return proc;
  }

  /** Stops every process started since the last call, in the order they were started. */
  async stopProcesses(): Promise<void> {
    const processes = this.#processes.splice(0);
    for (const proc of processes) await proc.stop();
  }

  /** Runs one scenario, then stops the processes it started, also when it broke. */
  async scenario<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } finally {
      await this.stopProcesses();
    }
  }

  /**
   * Stops the Temporal server and starts a fresh one of the same kind and settings (the simulator
   * and the build stay), so that a load run measures the implementation, not the runs before it (why:
   * docs/PERFORMANCE.md, "How the figures are taken"). Nothing may run on the old server then.
   */
  async renewServer(): Promise<void> {
    const old = this.temporal;
    this.#temporal = null;
    await old.stop();
    this.#temporal = await startTemporal(this.serverKind, this.log);
  }

  /** Stops everything started, newest first, each also when one before it failed. */
  async close(): Promise<void> {
    const errors: unknown[] = [];
    const stops: Array<() => unknown> = [
      () => this.stopProcesses(),
      () => this.build.remove(),
      () => this.#payloadKeysDir && rmSync(this.#payloadKeysDir, { recursive: true, force: true }),
      () => this.simulator.stop(),
      () => this.#temporal?.stop(),
    ];
    for (const stop of stops) {
      try {
        await stop();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length > 0) throw new AggregateError(errors, 'stopping the bench environment failed');
  }
}

/** Starts the Temporal server, the simulator and the build. `log` receives progress lines. */
export async function startBenchEnvironment(
  log: (line: string) => void,
  serverKind: BenchServer = 'dev',
): Promise<BenchEnvironment> {
  const started = Date.now();
  const temporal = await startTemporal(serverKind, log);
  const serverMs = Date.now() - started;
  let simulator: RunningSimulator | undefined;
  try {
    simulator = await startBenchSimulator({ defaultScenario: { durationMs: 5_000, outcome: 'pr' } });
    log('emitting the sources and bundling the workflow code');
    const build = await buildForBench();
    log(
      `build ready in ${build.emitMs + build.bundleMs}ms (emit ${build.emitMs}ms, bundles ${build.bundleMs}ms)`,
    );
    const setupMs = { server: serverMs, emit: build.emitMs, bundle: build.bundleMs };
    return new BenchEnvironment(serverKind, log, temporal, simulator, build, setupMs);
  } catch (err) {
    await simulator?.stop();
    await temporal.stop();
    throw err;
  }
}
