/**
 * A worker stopped (SIGTERM, a Kubernetes rollout) while a create or a follow-up message is on the
 * wire sends nothing twice. The stopping worker lets the request it sent finish within its shutdown
 * grace; an attempt that ends without an answer all the same is one that may have been applied,
 * so the next worker's attempt follows `AGENT_API_AMBIGUOUS_CREATE` instead of sending again as if
 * nothing had left. Real worker processes, the real server and the simulator over HTTP; the
 * simulator holds the request past the 1 s grace.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  FailureType,
  sendMessageUpdate,
  statusQuery,
  WORKFLOW_TYPE,
  type AgentJobInput,
} from '../../src/contract.js';
import type { agentJobWorkflow } from '../../src/workflows/index.js';
import {
  FAST_POLL,
  startSimulatedWorld,
  startWorkerProcess,
  uniqueId,
  waitFor,
  workflowFailure,
  type TestProcess,
} from '../harness.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const world = await startSimulatedWorld('shutdown');
const { env, sim, project } = world;

/** A worker process on `taskQueue` that stops within 1 s of SIGTERM, under `fail`. */
async function worker(taskQueue: string): Promise<TestProcess> {
  const vars = await world.workerEnv({
    TEMPORAL_TASK_QUEUE: taskQueue,
    WORKER_SHUTDOWN_GRACE: '1s',
    AGENT_API_AMBIGUOUS_CREATE: 'fail',
  });
  return startWorkerProcess(vars);
}

function start(taskQueue: string, input: AgentJobInput) {
  return env.client.workflow.start<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
    taskQueue,
    workflowId: uniqueId('shutdown'),
    args: [input],
  });
}

/** Stops `stopping` with SIGTERM and starts its successor on the same task queue. */
async function rollOver(stopping: TestProcess, taskQueue: string): Promise<TestProcess> {
  stopping.child.kill('SIGTERM');
  return worker(taskQueue);
}

test('a follow-up message on the wire at SIGTERM is let finish: one message, no resend', async () => {
  const taskQueue = uniqueId('tq');
  const projectId = project({
    durationMs: 1_000,
    // The message is applied at once and answered 4 s later: past the 1 s grace, within the drain.
    faults: { rules: [{ endpoint: 'message', first: 1, kind: 'slow', ms: 4_000 }] },
  });
  const first = await worker(taskQueue);
  const handle = await start(taskQueue, { projectId, prompt: 'Turn one', poll: FAST_POLL });
  // The workflow's own record of the job, not the simulator's: the job exists at the simulator a
  // moment before the create's answer reaches the workflow, and a message sent in between is
  // refused ("not created yet"), as it should be.
  await waitFor(async () => (await handle.query(statusQuery)).jobId, {
    what: 'the workflow to record its job',
  });
  assert.equal(createdJobs(sim, projectId), 1);
  const sent = handle.executeUpdate(sendMessageUpdate, { args: ['Turn two'] });
  await waitFor(() => requestsTo(sim, projectId, 'message') === 1, { what: 'the message on the wire' });
  const second = await rollOver(first, taskQueue);

  const record = await sent;
  assert.equal(record.status, 'active', 'the message answered with the new turn');
  const result = await handle.result();
  assert.equal(result.turns, 2);
  assert.equal(requestsTo(sim, projectId, 'message'), 1, 'the message was sent once');
  assert.equal(await first.exited, 0);
  second.child.kill('SIGTERM');
});

test('a create whose answer is lost after SIGTERM is ambiguous: under "fail", CreateOutcomeUnknown, one job', async () => {
  const taskQueue = uniqueId('tq');
  const projectId = project({
    // Stored at once; the connection is reset 4 s later, after the grace: the answer is lost.
    faults: { rules: [{ endpoint: 'create', first: 1, kind: 'reset-after-store', afterMs: 4_000 }] },
  });
  const first = await worker(taskQueue);
  const handle = await start(taskQueue, { projectId, prompt: 'Create once', poll: FAST_POLL });
  await waitFor(() => requestsTo(sim, projectId, 'create') === 1, { what: 'the create on the wire' });
  const second = await rollOver(first, taskQueue);

  const failure = await workflowFailure(handle);
  assert.equal(failure.type, FailureType.CreateOutcomeUnknown, failure.message);
  assert.equal(requestsTo(sim, projectId, 'create'), 1, 'the create was sent once');
  assert.equal(createdJobs(sim, projectId), 1);
  second.child.kill('SIGTERM');
});
