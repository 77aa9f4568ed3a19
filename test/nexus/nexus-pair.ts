/**
 * A Nexus caller and handler on the suite's server, as the two teams would run them: the worker
 * process (`src/worker.ts`) serves the `agent-jobs` service in the handler namespace, an endpoint
 * made through the operator API routes to its task queue, and the example caller workflow
 * (examples/nexus-caller/workflows.ts) runs on a worker in a namespace of its own, made the same
 * way. Everything is removed by the suite's cleanup.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { Client, type WorkflowHandle } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { msToTs } from '@temporalio/common/lib/time.js';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { workflowBundleOptions } from '../../src/worker/bundle-options.js';
import type { docsUpdateWorkflow, DocsUpdateInput } from '../../examples/nexus-caller/workflows.js';
import { onCleanup, spawnTs, uniqueId, waitFor, type SimulatedWorld } from '../harness.js';

const CALLER_WORKFLOWS = fileURLToPath(new URL('../../examples/nexus-caller/workflows.ts', import.meta.url));

/** The caller's side of a {@link startNexusPair}: its namespace's client, and how to start the example. */
export interface NexusPair {
  /** A client of the caller's namespace (with the caller's data converter). */
  caller: Client;
  /** The handler worker's output so far. */
  handlerOutput: () => string;
  /** Starts the example caller workflow in the caller's namespace, through the pair's endpoint. */
  startCaller: (
    input: Omit<DocsUpdateInput, 'endpoint'>,
  ) => Promise<WorkflowHandle<typeof docsUpdateWorkflow>>;
}

/**
 * Starts a handler worker process (with `handlerEnv` added to its environment), a caller namespace,
 * an endpoint and a caller worker; `callerDataConverter` is the caller worker's and client's.
 */
export async function startNexusPair(
  world: SimulatedWorld,
  options: { handlerEnv?: Record<string, string>; callerDataConverter?: DataConverter } = {},
): Promise<NexusPair> {
  const { env } = world;
  // The handler side: the worker process as deployed, which registers the service itself.
  const worker = await world.workerEnv(options.handlerEnv);
  const handler = spawnTs('src/worker.ts', [], worker.vars);
  await handler.waitForOutput(/worker running/, 'the handler worker to run', 60_000);

  // The caller's namespace and the endpoint, made through the operator API as an operator would
  // (`temporal operator namespace create`, `temporal operator nexus endpoint create` send the same
  // requests), and removed afterwards (registered first, so they go after the caller's worker has
  // stopped).
  const { workflowService, operatorService } = env.client.connection;
  const callerNamespace = uniqueId('nexus-caller');
  const endpoint = uniqueId('agent-jobs');
  await workflowService.registerNamespace({
    namespace: callerNamespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  onCleanup(async () => {
    await operatorService.deleteNamespace({ namespace: callerNamespace });
  });
  const { endpoint: made } = await operatorService.createNexusEndpoint({
    spec: {
      name: endpoint,
      target: { worker: { namespace: env.namespace, taskQueue: worker.taskQueue } },
    },
  });
  assert.ok(made?.id, 'the server names the endpoint it made');
  onCleanup(async () => {
    await operatorService.deleteNexusEndpoint({ id: made.id, version: made.version });
  });

  // The caller side: the example workflow on a worker of the caller's namespace.
  const dataConverter = options.callerDataConverter;
  const caller = new Client({ connection: env.client.connection, namespace: callerNamespace, dataConverter });
  const callerTaskQueue = uniqueId('caller-tq');
  const { code } = await bundleWorkflowCode({
    ...workflowBundleOptions(CALLER_WORKFLOWS),
    logger: new DefaultLogger('ERROR'),
  });
  // A namespace just made may not be served yet by every service: the first worker waits for it.
  const callerWorker = await waitFor(
    () =>
      Worker.create({
        connection: env.nativeConnection,
        namespace: callerNamespace,
        taskQueue: callerTaskQueue,
        workflowBundle: { code },
        dataConverter,
      }),
    { what: 'a worker in the new caller namespace', timeoutMs: 30_000, intervalMs: 500 },
  );
  const running = callerWorker.run();
  onCleanup(async () => {
    if (callerWorker.getState() === 'RUNNING') callerWorker.shutdown();
    await running;
  });
  return {
    caller,
    handlerOutput: () => handler.stdout() + handler.stderr(),
    startCaller: (input) =>
      caller.workflow.start<typeof docsUpdateWorkflow>('docsUpdateWorkflow', {
        taskQueue: callerTaskQueue,
        workflowId: uniqueId('docs-update'),
        args: [{ endpoint, ...input }],
      }),
  };
}
