/**
 * The one test harness: a real Temporal server (from test/run.ts, or started here when a file runs
 * alone), a client, workers on unique task queues, unique IDs, and waiting on conditions.
 *
 * A test file opens its world once, at its top (`const { env, sim, worker } = await
 * startSimulatedSuite('name')`), and everything it opened is closed after its tests: a simulated
 * world ({@link startSimulatedWorld}) for tests that run worker processes, a suite
 * ({@link startSimulatedSuite}) when an in-process worker serves it, a quota setup
 * ({@link startQuotaSetup}) for one project under the quota. What stays in a test file is its
 * scenario, its faults and its assertions.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  Client,
  Connection,
  WorkflowFailedError,
  type WorkflowHandle,
  type WorkflowHandleWithFirstExecutionRunId,
} from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import {
  bundleWorkflowCode,
  DefaultLogger,
  NativeConnection,
  Runtime,
  Worker,
  type WorkerOptions,
  type WorkflowBundle,
} from '@temporalio/worker';
import { freePorts, startDevServer, type DevServer } from '../dev/dev-server.js';
import { workflowBundleOptions } from '../src/worker/bundle-options.js';
import { createActivities, type ActivityDeps, type AgentJobActivities } from '../src/activities/index.js';
import { AgentApiClient } from '../src/agent-api/index.js';
import { ProjectMetrics } from '../src/observability/project-metrics.js';
import { TRACING_OFF, type Tracing } from '../src/observability/tracing.js';
import { WORKFLOW_TYPE, type AgentJobInput, type AgentJobRecord } from '../src/contract.js';
import { projectQuotaWorkflowId, type QuotaLimit } from '../src/quota/messages.js';
import type { agentJobWorkflow, projectQuota } from '../src/workflows/index.js';
import { startSimulator, type RunningSimulator, type SimulatorOptions } from '../src/simulator/index.js';

/** Path of the workflows entry point that the worker bundles. */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../src/workflows/index.ts', import.meta.url));

/** Bundles the workflow code (once per suite in test/run.ts). */
export function bundleWorkflows(): Promise<WorkflowBundle> {
  return bundleWorkflowCode({ ...workflowBundleOptions(WORKFLOWS_PATH), logger: quietLogger() });
}

function quietLogger(): DefaultLogger {
  return new DefaultLogger('ERROR');
}

let runtimeQuieted = false;
/** Keeps SDK log noise out of test output; failures still surface through assertions. */
function quietRuntime(): void {
  if (runtimeQuieted) return;
  runtimeQuieted = true;
  Runtime.install({
    logger: quietLogger(),
    // Core warnings (for example the replay test's intended nondeterminism) go to the quiet logger.
    telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
  });
}

/** A connection to the suite's Temporal server. */
export interface TemporalTestEnv {
  address: string;
  namespace: string;
  client: Client;
  nativeConnection: NativeConnection;
  workflowBundle: WorkflowBundle;
}

let envPromise: Promise<TemporalTestEnv> | undefined;

// Everything a test file opens is closed once, after all its tests, newest first: a worker must
// shut down before the connection it holds is closed. Registered at import time, because hooks
// registered from inside other hooks do not attach to the file's root.
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Registers `fn` to run after the file's tests, before anything opened earlier is closed. */
export function onCleanup(fn: () => Promise<void> | void): void {
  cleanups.push(async () => {
    await fn();
  });
}

/**
 * The Temporal server for this test file: `target` when given (test:cluster passes its own),
 * else the suite's (TEMPORAL_ADDRESS), else a dev server started here. Everything it opens is
 * closed after the file's tests.
 */
export function temporalEnv(target?: { address: string; namespace: string }): Promise<TemporalTestEnv> {
  envPromise ??= openEnv(target);
  return envPromise;
}

async function openEnv(target: { address: string; namespace: string } | undefined): Promise<TemporalTestEnv> {
  quietRuntime();
  let server: DevServer | null = null;
  let address = target?.address ?? process.env.TEMPORAL_ADDRESS;
  const namespace = target?.namespace ?? process.env.TEMPORAL_NAMESPACE ?? 'default';
  if (!address) {
    server = await startDevServer();
    address = server.address;
  }
  const bundlePath = process.env.AGENT_TEST_WORKFLOW_BUNDLE;
  const workflowBundle = bundlePath ? { code: readFileSync(bundlePath, 'utf8') } : await bundleWorkflows();
  const connection = await Connection.connect({ address });
  const nativeConnection = await NativeConnection.connect({ address });
  const client = new Client({ connection, namespace });
  onCleanup(async () => {
    await nativeConnection.close();
    await connection.close();
    await server?.stop();
  });
  return { address, namespace, client, nativeConnection, workflowBundle };
}

/**
 * Runs test files under node:test in a child process with the spec reporter; resolves with its exit
 * code. `concurrency` and `timeoutMs` become --test-concurrency and --test-timeout when given.
 */
export async function runNodeTest(
  files: string[],
  options: { env?: NodeJS.ProcessEnv; concurrency?: number; timeoutMs?: number } = {},
): Promise<number> {
  const flags = [
    ...(options.concurrency === undefined ? [] : [`--test-concurrency=${options.concurrency}`]),
    ...(options.timeoutMs === undefined ? [] : [`--test-timeout=${options.timeoutMs}`]),
  ];
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-reporter=spec', ...flags, ...files],
    {
      stdio: 'inherit',
      env: options.env ?? process.env,
    },
  );
  const [code] = (await once(child, 'exit')) as [number | null];
  return code ?? 1;
}

/** A unique ID for workflows, task queues, projects and keys, so tests never collide. */
export function uniqueId(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** A worker polling its own unique task queue until the test file ends. */
export interface TestWorker {
  taskQueue: string;
  worker: Worker;
}

/** How a test worker differs from the usual one. */
export interface TestWorkerOptions {
  tracing?: Tracing;
  /** A task queue of the test's own (one with a backlog); a unique one by default. */
  taskQueue?: string;
  /** Task slots, to make a backlog wait on the worker. */
  slots?: Pick<WorkerOptions, 'maxConcurrentWorkflowTaskExecutions' | 'maxConcurrentActivityTaskExecutions'>;
}

/**
 * Starts an in-process worker on a unique task queue with the given activities; it is shut down
 * and awaited after the file's tests.
 */
export async function startTestWorker(
  env: TemporalTestEnv,
  activities: object,
  options: TestWorkerOptions = {},
): Promise<TestWorker> {
  const taskQueue = options.taskQueue ?? uniqueId('tq');
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace,
    taskQueue,
    workflowBundle: env.workflowBundle,
    activities,
    interceptors: (options.tracing ?? TRACING_OFF).worker.interceptors,
    sinks: new ProjectMetrics(Runtime.instance().metricMeter, 100).sinks(),
    ...options.slots,
  });
  const running = worker.run();
  onCleanup(async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running;
  });
  return { taskQueue, worker };
}

/** A simulator on a free loopback port, stopped after the file's tests. */
export async function startTestSimulator(
  options: Partial<SimulatorOptions> & { apiKeys: string[] },
): Promise<RunningSimulator> {
  const simulator = await startSimulator({ log: false, ...options });
  onCleanup(() => simulator.stop());
  return simulator;
}

/** What a test world's simulator is like: its jobs' length and any further options. */
export interface WorldOptions {
  /** How long jobs last unless a project's scenario says otherwise: 300 ms by default. */
  durationMs?: number;
  /**
   * Further simulator options, such as `honourIdempotencyKey: true` for tests about the key (the
   * simulator ignores it by default, as the live API does) or a `budget`; a `defaultScenario`
   * given here wins over `durationMs`.
   */
  simulator?: Omit<Partial<SimulatorOptions>, 'apiKeys'>;
  /** The bound on one request of the workers' API client: the production bound by default. */
  requestTimeoutMs?: number;
}

/**
 * The usual world of a test file: the suite's server, a simulator with a key of the file's own,
 * and what a test needs to wire workers and processes to them.
 */
export interface SimulatedWorld {
  env: TemporalTestEnv;
  sim: RunningSimulator;
  apiKey: string;
  /** A client of the simulator with the world's key, to read what the workflows made. */
  api: AgentApiClient;
  /** A new project ID (`prefix-xxxxxxxx`) with its own scenario. */
  project: (scenario?: Parameters<RunningSimulator['setScenario']>[1], prefix?: string) => string;
  /** An agent job made outside any workflow, once its first turn has ended. */
  completedJob: (projectId: string) => Promise<AgentJobRecord>;
  /** The environment of a worker process wired to this world's server and simulator; `overrides` win. */
  workerEnv: (overrides?: NodeJS.ProcessEnv) => Promise<WorkerProcessEnv>;
  /**
   * An in-process worker on a task queue of its own (unless `options` names one), its activities
   * wired to the simulator with the world's key and `deps`.
   */
  startWorker: (deps?: Omit<ActivityDeps, 'api'>, options?: TestWorkerOptions) => Promise<TestWorker>;
}

/**
 * Starts a {@link SimulatedWorld} named `name` (the prefix of its key and project IDs), with no
 * worker: tests of worker processes start their own.
 */
export async function startSimulatedWorld(name: string, options: WorldOptions = {}): Promise<SimulatedWorld> {
  const env = await temporalEnv();
  const apiKey = `${name}-key-${randomUUID()}`;
  const sim = await startTestSimulator({
    defaultScenario: { durationMs: options.durationMs ?? 300 },
    ...options.simulator,
    apiKeys: [apiKey],
  });
  const api = new AgentApiClient({ baseUrl: sim.url, apiKey });
  return {
    env,
    sim,
    apiKey,
    api,
    project: (scenario = {}, prefix = name) => {
      const projectId = uniqueId(prefix);
      sim.setScenario(projectId, scenario);
      return projectId;
    },
    completedJob: async (projectId) => {
      const created = await api.createJob(projectId, 'Turn one', { idempotencyKey: uniqueId('key') });
      await waitFor(() => sim.stats().jobs.some((job) => job.id === created.id && job.terminalAt !== null), {
        what: 'turn 1 to end',
      });
      return api.getJob(projectId, created.id);
    },
    workerEnv: (overrides) => workerProcessEnv(env, { url: sim.url, apiKey }, overrides),
    startWorker: (deps = {}, workerOptions = {}) => {
      const client = new AgentApiClient({
        baseUrl: sim.url,
        apiKey,
        requestTimeoutMs: options.requestTimeoutMs,
      });
      return startTestWorker(env, createActivities({ api: client, ...deps }), workerOptions);
    },
  };
}

/** A {@link SimulatedWorld} with an in-process worker wired to its simulator. */
export interface SimulatedSuite extends SimulatedWorld {
  worker: TestWorker;
  /**
   * Starts an agent-job workflow with `input` as it is, on the suite's worker unless `taskQueue`
   * says otherwise, under a unique ID (`<name>-xxxxxxxx`) unless `workflowId` is given.
   */
  startJob: (
    input: AgentJobInput,
    options?: { taskQueue?: string; workflowId?: string },
  ) => Promise<WorkflowHandleWithFirstExecutionRunId<typeof agentJobWorkflow>>;
}

/** Starts a {@link SimulatedSuite}; `activities` wires its worker's activities (an ambiguous-create policy, a quota). */
export async function startSimulatedSuite(
  name: string,
  options: WorldOptions & { activities?: Omit<ActivityDeps, 'api'> } = {},
): Promise<SimulatedSuite> {
  const world = await startSimulatedWorld(name, options);
  const worker = await world.startWorker(options.activities);
  return {
    ...world,
    worker,
    startJob: (input, jobOptions = {}) =>
      world.env.client.workflow.start<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
        taskQueue: jobOptions.taskQueue ?? worker.taskQueue,
        workflowId: jobOptions.workflowId ?? uniqueId(name),
        args: [input],
      }),
  };
}

/**
 * The `ApplicationFailure` a workflow failed with; fails the test if it completed, or failed with
 * anything else.
 */
export async function workflowFailure(handle: WorkflowHandle): Promise<ApplicationFailure> {
  const err = await handle.result().then(
    (result: unknown) => assert.fail(`the workflow completed: ${JSON.stringify(result)?.slice(0, 500)}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof WorkflowFailedError, `expected WorkflowFailedError, got ${String(err)}`);
  assert.ok(err.cause instanceof ApplicationFailure, `expected ApplicationFailure, got ${String(err.cause)}`);
  return err.cause;
}

/** The activities wired to an API client for `simulator`, as the worker wires them. */
export function activitiesFor(
  simulator: RunningSimulator,
  apiKey: string,
  deps: Omit<ActivityDeps, 'api'> = {},
): AgentJobActivities {
  return createActivities({ api: new AgentApiClient({ baseUrl: simulator.url, apiKey }), ...deps });
}

/** A poll schedule for tests: the first poll after 50 ms, at most 200 ms apart. */
export const FAST_POLL = { initialInterval: 50, maxInterval: 200 } as const;

/** Waits until `check` returns a truthy value, polling every `intervalMs`, or fails at the deadline. */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; what: string },
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 15_000);
  let lastError: unknown = null;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
    } catch (err) {
      lastError = err;
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
  throw new Error(`timed out waiting for ${options.what}`, { cause: lastError });
}

/** A child process started by a test: its output is kept, and it is killed after the file's tests. */
export interface TestProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /**
   * Waits until stdout or stderr matches `pattern`, 120 s by default: a worker process bundles its
   * workflow code as it starts, which took past 30 s on a loaded two-core machine (the bound
   * {@link startWorkerProcess} gives readiness too). A deadline, not a wait: a match returns at once.
   */
  waitForOutput(pattern: RegExp, what: string, timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  exited: Promise<number | string>;
}

/** Repository root, for spawning the project's entry points. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Spawns `node --import tsx <script> ...args` from the repository root; `stdin` is written to it. */
export function spawnTs(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  options: { stdin?: string } = {},
): TestProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], {
    cwd: ROOT,
    env,
    stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  child.stdin?.end(options.stdin);
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitForOutput: (pattern, what, timeoutMs = 120_000) =>
      waitFor(() => pattern.test(out) || pattern.test(err) || child.exitCode !== null, {
        what,
        timeoutMs,
      }).then(() => {
        if (!pattern.test(out) && !pattern.test(err)) {
          throw new Error(`process exited with ${child.exitCode} before ${what}:\n${out}\n${err}`);
        }
      }),
  };
}

/** The environment of a worker process (`src/worker.ts`) for the suite's server and a simulator. */
export interface WorkerProcessEnv {
  vars: NodeJS.ProcessEnv;
  taskQueue: string;
  healthPort: number;
  metricsPort: number;
}

/**
 * Builds a worker process's environment from scratch (nothing inherited but PATH and HOME), on a
 * unique task queue and free health and metrics ports; `overrides` win.
 */
export async function workerProcessEnv(
  env: TemporalTestEnv,
  api: { url: string; apiKey: string },
  overrides: NodeJS.ProcessEnv = {},
): Promise<WorkerProcessEnv> {
  const [healthPort, metricsPort] = (await freePorts(2)) as [number, number];
  const taskQueue = overrides.TEMPORAL_TASK_QUEUE ?? uniqueId('tq');
  const vars: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TEMPORAL_ADDRESS: env.address,
    TEMPORAL_NAMESPACE: env.namespace,
    TEMPORAL_TASK_QUEUE: taskQueue,
    AGENT_API_BASE_URL: api.url,
    AGENT_API_KEY: api.apiKey,
    HEALTH_ADDRESS: `127.0.0.1:${healthPort}`,
    METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
    // Off unless a test sets it: the default (100 uses per project per hour) would hold back tests
    // that run hundreds of jobs in one project against an unlimited simulator.
    AGENT_API_PROJECT_QUOTA: 'off',
    ...overrides,
  };
  return { vars, taskQueue, healthPort, metricsPort };
}

/**
 * Spawns a worker process (`src/worker.ts` unless `script` says otherwise) with `worker`'s
 * environment and waits until its /readyz answers 200.
 */
export async function startWorkerProcess(
  worker: Pick<WorkerProcessEnv, 'vars' | 'healthPort'>,
  options: { what?: string; timeoutMs?: number; script?: string } = {},
): Promise<TestProcess> {
  const child = spawnTs(options.script ?? 'src/worker.ts', [], worker.vars);
  await waitFor(
    async () => (await fetch(`http://127.0.0.1:${worker.healthPort}/readyz`).catch(() => null))?.ok,
    {
      what: `${options.what ?? 'the worker'} to be ready`,
      timeoutMs: options.timeoutMs ?? 120_000,
      intervalMs: 200,
    },
  );
  return child;
}

/** The environment of a starter process (`src/starter.ts`): nothing inherited but PATH and HOME. */
export function starterProcessEnv(env: TemporalTestEnv, taskQueue: string): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    TEMPORAL_ADDRESS: env.address,
    TEMPORAL_NAMESPACE: env.namespace,
    TEMPORAL_TASK_QUEUE: taskQueue,
  };
}

/** What a process printed and how it ended. */
export interface ProcessRun {
  code: number | string;
  stdout: string;
  stderr: string;
}

/** Runs the starter with `args` to its exit, for the server and task queue `vars` name. */
export async function runStarter(
  args: string[],
  vars: NodeJS.ProcessEnv,
  options: { stdin?: string } = {},
): Promise<ProcessRun> {
  const run = spawnTs('src/starter.ts', args, vars, options);
  const code = await run.exited;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

/** Polls every 200 ms, fixed, so the time a job is seen done is close to the time it ended. */
export const QUOTA_TEST_POLL = { initialInterval: 200, maxInterval: 200, backoffCoefficient: 1 } as const;

/** One project under the project quota: the server, a simulator with a budget, a worker with the quota. */
export interface QuotaSetup {
  env: TemporalTestEnv;
  sim: RunningSimulator;
  taskQueue: string;
  projectId: string;
}

/**
 * A simulator whose budget is `real` (the API's), and a worker whose quota is `limit` with grants
 * of `leaseMs`; a new project named `<prefix>-xxxxxxxx`, whose jobs last `jobMs`.
 */
export async function startQuotaSetup(options: {
  apiKey: string;
  real: QuotaLimit;
  limit: QuotaLimit;
  leaseMs: number;
  prefix: string;
  jobMs?: number;
}): Promise<QuotaSetup> {
  const env = await temporalEnv();
  const sim = await startTestSimulator({
    apiKeys: [options.apiKey],
    budget: { uses: options.real.uses, windowSeconds: options.real.windowMs / 1000 },
    retryAfter: false,
    defaultScenario: { durationMs: options.jobMs ?? 300 },
  });
  const projectQuota = { defaultLimit: options.limit, overrides: {}, leaseMs: options.leaseMs };
  const { taskQueue } = await startTestWorker(env, activitiesFor(sim, options.apiKey, { projectQuota }));
  return { env, sim, taskQueue, projectId: uniqueId(options.prefix) };
}

/** Starts an agent-job workflow in the setup's project, on its worker, polling every 200 ms. */
export function startQuotaJob(setup: QuotaSetup, prompt: string, input: Partial<AgentJobInput> = {}) {
  return setup.env.client.workflow.start<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
    taskQueue: setup.taskQueue,
    workflowId: uniqueId('agent-job-quota'),
    args: [{ projectId: setup.projectId, prompt, poll: QUOTA_TEST_POLL, ...input }],
  });
}

/** The handle of the setup's project quota workflow. */
export function quotaWorkflow(setup: QuotaSetup) {
  return setup.env.client.workflow.getHandle<typeof projectQuota>(projectQuotaWorkflowId(setup.projectId));
}
