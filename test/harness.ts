/**
 * The one test harness: a real Temporal server (from test/run.ts, or started here when a file runs
 * alone), a client, workers on unique task queues, unique IDs, and waiting on conditions.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Runtime, Worker, type WorkflowBundle } from '@temporalio/worker';
import type { DefaultLogger as DefaultLoggerType } from '@temporalio/worker';
import { DefaultLogger } from '@temporalio/worker';
import { startDevServer, type DevServer } from '../dev/dev-server.js';

/** Path of the workflows entry point that the worker bundles. */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../src/workflows/index.ts', import.meta.url));

/** Bundles the workflow code (once per suite in test/run.ts). */
export function bundleWorkflows(): Promise<WorkflowBundle> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger() });
}

function quietLogger(): DefaultLoggerType {
  return new DefaultLogger('WARN');
}

let runtimeQuieted = false;
/** Keeps SDK log noise out of test output; failures still surface through assertions. */
function quietRuntime(): void {
  if (runtimeQuieted) return;
  runtimeQuieted = true;
  Runtime.install({ logger: quietLogger() });
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

/**
 * The Temporal server for this test file: the suite's (TEMPORAL_ADDRESS) or one started here.
 * Everything it opens is closed after the file's tests.
 */
export function temporalEnv(): Promise<TemporalTestEnv> {
  envPromise ??= openEnv();
  return envPromise;
}

async function openEnv(): Promise<TemporalTestEnv> {
  quietRuntime();
  let server: DevServer | null = null;
  let address = process.env.TEMPORAL_ADDRESS;
  const namespace = process.env.TEMPORAL_NAMESPACE ?? 'default';
  if (!address) {
    server = await startDevServer();
    address = server.address;
  }
  const bundlePath = process.env.AGENT_TEST_WORKFLOW_BUNDLE;
  const workflowBundle = bundlePath ? { code: readFileSync(bundlePath, 'utf8') } : await bundleWorkflows();
  const connection = await Connection.connect({ address });
  const nativeConnection = await NativeConnection.connect({ address });
  const client = new Client({ connection, namespace });
  after(async () => {
    await nativeConnection.close();
    await connection.close();
    await server?.stop();
  });
  return { address, namespace, client, nativeConnection, workflowBundle };
}

/** A unique ID for workflows, task queues, projects and keys, so tests never collide. */
export function uniqueId(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** Runs `fn` while a worker polls `taskQueue`, then shuts the worker down and waits for it. */
export async function withWorker<T>(
  env: TemporalTestEnv,
  options: { taskQueue: string; activities: object; maxCachedWorkflows?: number },
  fn: (worker: Worker) => Promise<T>,
): Promise<T> {
  const worker = await Worker.create({
    connection: env.nativeConnection,
    namespace: env.namespace,
    taskQueue: options.taskQueue,
    workflowBundle: env.workflowBundle,
    activities: options.activities,
    maxCachedWorkflows: options.maxCachedWorkflows,
  });
  return worker.runUntil(() => fn(worker));
}

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
      if (value) return value as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
  throw new Error(`timed out waiting for ${options.what}`, { cause: lastError });
}
