/**
 * The `agent-jobs` Nexus service across two namespaces on the suite's server, as
 * ./nexus-pair.ts sets them up: the worker process serves it, the example caller workflow calls it.
 */
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, NexusOperationFailure } from '@temporalio/common';
import { HandlerError } from 'nexus-rpc';
import { agentJobWorkflowId } from '../../src/client/index.js';
import { FailureType, SearchAttributes } from '../../src/contract.js';
import { FAST_POLL, startSimulatedWorld, uniqueId, waitFor } from '../harness.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';
import { startNexusPair, type NexusPair } from './nexus-pair.js';

const world = await startSimulatedWorld('nexus-test');
const { env, sim } = world;
let startCaller: NexusPair['startCaller'];

before(async () => {
  ({ startCaller } = await startNexusPair(world));
});

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
