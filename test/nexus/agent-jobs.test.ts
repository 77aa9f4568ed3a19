/**
 * The `agent-jobs` Nexus service across two namespaces on the suite's dev server: the worker
 * process (`src/worker.ts`) serves it in the handler namespace, an endpoint made through the
 * operator API routes to its task queue, and the example caller workflow
 * (examples/nexus-caller/workflows.ts) runs in a namespace of its own, made the same way.
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { before, describe, test } from 'node:test';
import { Client, WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, NexusOperationFailure } from '@temporalio/common';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { msToTs } from '@temporalio/common/lib/time.js';
import { HandlerError } from 'nexus-rpc';
import { workflowBundleOptions } from '../../src/worker/bundle-options.js';
import { agentJobWorkflowId } from '../../src/client/index.js';
import { FailureType, SearchAttributes } from '../../src/contract.js';
import type { docsUpdateWorkflow, DocsUpdateInput } from '../../examples/nexus-caller/workflows.js';
import { FAST_POLL, onCleanup, spawnTs, startSimulatedWorld, uniqueId, waitFor } from '../harness.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const CALLER_WORKFLOWS = fileURLToPath(new URL('../../examples/nexus-caller/workflows.ts', import.meta.url));

const world = await startSimulatedWorld('nexus-test');
const { env, sim } = world;
/** A client of the caller's namespace. */
let caller: Client;
let callerTaskQueue: string;
let endpoint: string;

before(async () => {
  // The handler side: the worker process as deployed, which registers the service itself.
  const worker = await world.workerEnv();
  const handler = spawnTs('src/worker.ts', [], worker.vars);
  await handler.waitForOutput(/worker running/, 'the handler worker to run', 60_000);

  // The caller's namespace and the endpoint, made through the operator API as an operator would
  // (`temporal operator namespace create`, `temporal operator nexus endpoint create` send the same
  // requests), and removed afterwards (registered first, so they go after the caller's worker has
  // stopped).
  const { workflowService, operatorService } = env.client.connection;
  const callerNamespace = uniqueId('nexus-caller');
  endpoint = uniqueId('agent-jobs');
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
  caller = new Client({ connection: env.client.connection, namespace: callerNamespace });
  callerTaskQueue = uniqueId('caller-tq');
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
      }),
    { what: 'a worker in the new caller namespace', timeoutMs: 30_000, intervalMs: 500 },
  );
  const running = callerWorker.run();
  onCleanup(async () => {
    if (callerWorker.getState() === 'RUNNING') callerWorker.shutdown();
    await running;
  });
});

/** Starts the example caller workflow in the caller's namespace. */
function startCaller(
  input: Omit<DocsUpdateInput, 'endpoint'>,
): Promise<WorkflowHandle<typeof docsUpdateWorkflow>> {
  return caller.workflow.start<typeof docsUpdateWorkflow>('docsUpdateWorkflow', {
    taskQueue: callerTaskQueue,
    workflowId: uniqueId('docs-update'),
    args: [{ endpoint, ...input }],
  });
}

/** `promise`, or a failure naming `what` after `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** `err` and its causes, outermost first. */
function causes(err: unknown): Error[] {
  const chain: Error[] = [];
  for (let e = err; e instanceof Error; e = e.cause) chain.push(e);
  return chain;
}

/** The handler namespace's workflows of a project, by the project's search attribute. */
async function jobWorkflowIds(projectId: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const run of env.client.workflow.list({
    query: `${SearchAttributes.projectId.name} = '${projectId}'`,
  })) {
    ids.push(run.workflowId);
  }
  return ids.sort();
}

describe('the agent-jobs Nexus service', { concurrency: 4 }, () => {
  test('a caller in another namespace runs an agent job to its prLink, then a follow-up turn', async () => {
    const projectId = uniqueId('nexus');
    const handle = await startCaller({
      job: { projectId, prompt: 'Add a Quickstart page', poll: FAST_POLL },
      followUp: { prompt: 'Add a troubleshooting section' },
    });
    const { first, followUp } = await handle.result();

    assert.equal(first.status, 'completed');
    assert.match(first.prLink ?? '', /^https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+$/);
    assert.equal(first.created, true);
    assert.equal(first.resent, 0, 'nothing was sent again');
    assert.ok(followUp !== null);
    assert.equal(followUp.job.id, first.job.id, 'the follow-up continues the same agent job');
    assert.equal(followUp.turns, 2);
    assert.equal(followUp.status, 'completed');
    assert.equal(createdJobs(sim, projectId), 1, 'one create at the API');
    assert.equal(requestsTo(sim, projectId, 'message'), 1, 'one follow-up message at the API');
    // Without a key, the operation's request ID made the workflow ID; the follow-up ran on the
    // workflow that drives the job.
    const ids = await waitFor(
      async () => ((await jobWorkflowIds(projectId)).length === 2 ? jobWorkflowIds(projectId) : null),
      {
        what: 'both job workflows in visibility',
      },
    );
    assert.deepEqual(
      ids.map((id) => id.replace(/nexus-[0-9a-f-]{36}$/, 'nexus-<request ID>')),
      [`agent-job/${projectId}/job/${first.job.id}`, `agent-job/${projectId}/nexus-<request ID>`],
    );
  });

  test('two callers with the same key share one agent job and both get its result', async () => {
    const projectId = uniqueId('nexus-key');
    const job = { projectId, prompt: 'Rewrite the install page', key: uniqueId('release'), poll: FAST_POLL };
    const [a, b] = await Promise.all([startCaller({ job }), startCaller({ job })]);
    const [resultA, resultB] = await Promise.all([a.result(), b.result()]);
    assert.equal(resultA.first.job.id, resultB.first.job.id);
    assert.match(resultA.first.prLink ?? '', /\/pull\/\d+$/);
    assert.equal(createdJobs(sim, projectId), 1);
  });

  test('cancelling the caller cancels the job workflow in the other namespace', async () => {
    const projectId = uniqueId('nexus-cancel');
    sim.setScenario(projectId, { durationMs: 10 * 60_000 });
    const key = uniqueId('cancel-me');
    const handle = await startCaller({ job: { projectId, prompt: 'A long rewrite', key, poll: FAST_POLL } });
    const jobWorkflow = env.client.workflow.getHandle(agentJobWorkflowId(projectId, key));
    // Cancel once the agent job exists and the workflow polls it.
    await waitFor(
      async () => (await jobWorkflow.describe()).typedSearchAttributes.get(SearchAttributes.jobId),
      { what: 'the job workflow to record its agent job', timeoutMs: 30_000 },
    );
    await handle.cancel();

    // The caller ends only once the job workflow has (the default cancellation type); a
    // cancellation that never reaches it would hold the caller open.
    const err = await within(
      handle.result().then(
        () => assert.fail('the caller completed'),
        (e: unknown) => e,
      ),
      30_000,
      'the cancelled caller to end',
    );
    assert.ok(err instanceof WorkflowFailedError, String(err));
    assert.ok(err.cause instanceof CancelledFailure, `caller cancelled, got ${String(err.cause)}`);
    assert.equal((await handle.describe()).status.name, 'CANCELLED');
    // The default cancellation type waits for the operation's cancellation to complete: by then the
    // job workflow has ended, cancelled.
    assert.equal((await jobWorkflow.describe()).status.name, 'CANCELLED');
    assert.equal(createdJobs(sim, projectId), 1);
  });

  test('invalid input fails the operation with BAD_REQUEST and the InvalidInput failure, and makes no job', async () => {
    const projectId = uniqueId('nexus-bad');
    const handle = await startCaller({ job: { projectId, prompt: '   ' } });
    const err = await handle.result().then(
      () => assert.fail('the caller completed'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowFailedError, String(err));
    assert.ok(err.cause instanceof NexusOperationFailure, `got ${String(err.cause)}`);
    assert.equal(err.cause.operation, 'runAgentJob');
    // The server may wrap the handler's error in one of its own (Server 1.29 does): what a caller
    // matches on is the first handler error in the chain and the failure type under it.
    const chain = causes(err.cause);
    const handlerError = chain.find((e) => e instanceof HandlerError);
    assert.ok(handlerError instanceof HandlerError, `no handler error in ${chain.map(String).join(' <- ')}`);
    assert.equal(handlerError.type, 'BAD_REQUEST');
    assert.equal(handlerError.retryable, false);
    const failure = chain.find((e) => e instanceof ApplicationFailure);
    assert.ok(failure instanceof ApplicationFailure, `no failure in ${chain.map(String).join(' <- ')}`);
    assert.equal(failure.type, FailureType.InvalidInput);
    assert.match(failure.message, /^prompt: is required/);
    assert.equal(createdJobs(sim, projectId), 0);
    assert.deepEqual(await jobWorkflowIds(projectId), []);
  });
});
