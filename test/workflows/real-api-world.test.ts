/**
 * The workflow in the API's real world: no `Idempotency-Key` honoured (the simulator's default),
 * answers that trickle in or stop mid-body, a worker killed while its create waits for an answer,
 * a run terminated after its job was made and started again under the same key, minutes of 404s
 * and maintenance pages during a failover, a lagging read after a follow-up message. Real server,
 * real worker, the real simulator over sockets; every count is of POSTs at the simulator.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { sendFollowUp, startAgentJob } from '../../src/client/index.js';
import { FailureType, statusQuery, type AgentJobInput, type AgentJobResult } from '../../src/contract.js';
import { FAST_POLL, startSimulatedSuite, startWorkerProcess, workflowFailure, waitFor } from '../harness.js';
import { captureHistory } from '../capture-history.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

/**
 * The HTTP client's bound on one request, shorter here than the production 60 s: long enough for a
 * trickle of a byte every 200 ms to bring the job ID (the first ~50 bytes, about 10 s: a margin of
 * 2.5 for a busy machine, whose timers lag), far shorter than the whole record (~40 s at that pace).
 */
const REQUEST_TIMEOUT_MS = 25_000;
/** The pace of a trickled answer: one byte per this many ms. */
const TRICKLE_MS = 200;

const suite = await startSimulatedSuite('real-world', {
  durationMs: 500,
  requestTimeoutMs: REQUEST_TIMEOUT_MS,
});
const { env, sim, worker, project } = suite;

function start(input: Partial<AgentJobInput> & { projectId: string }, taskQueue?: string) {
  return suite.startJob({ prompt: 'Document the API', poll: FAST_POLL, ...input }, { taskQueue });
}

describe('one agent job per workflow, whatever the answer to its create', { concurrency: 3 }, () => {
  test('a 2xx create whose body trickles in: the ID in the bytes that arrived is used, no second create', async () => {
    const projectId = project({
      faults: {
        rules: [{ endpoint: 'create', first: 1, kind: 'trickle', bytesPerChunk: 1, intervalMs: TRICKLE_MS }],
      },
    });
    const result = await (await start({ projectId })).result();
    assert.equal(result.status, 'completed');
    assert.equal(requestsTo(sim, projectId, 'create'), 1, 'POSTs to create');
    assert.equal(createdJobs(sim, projectId), 1);
    assert.equal(sim.stats().jobs.find((job) => job.projectId === projectId)?.id, result.job.id);
  });

  test('a 2xx create cut by a reset after its "id": the workflow goes on with that job', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', first: 1, kind: 'reset-mid-body' }] },
    });
    const result = await (await start({ projectId })).result();
    assert.equal(result.status, 'completed');
    assert.equal(requestsTo(sim, projectId, 'create'), 1, 'POSTs to create');
    assert.equal(createdJobs(sim, projectId), 1);
  });

  test('a create answered 502 under AGENT_API_AMBIGUOUS_CREATE=retry: sent again, and the workflow says so', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', first: 1, kind: 'truncated', status: 502 }] },
    });
    const handle = await start({ projectId });
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    assert.equal(requestsTo(sim, projectId, 'create'), 2, 'POSTs to create');
    const progress = await handle.query(statusQuery);
    assert.equal(progress.resent, 1, 'the status query counts the create sent again');
    assert.equal(result.resent, 1, 'and so does the result');
    const { currentDetails } = await handle.query<{ currentDetails: string }>('__temporal_workflow_metadata');
    assert.match(
      currentDetails,
      /completed: .*; 1 calls sent again after an unknown outcome/,
      'the final details keep it',
    );
    await captureHistory(env, handle, 'create-resent-after-502');
  });

  test('a run terminated after its job was made, started again under the same key: no second create', async () => {
    const projectId = project({ durationMs: 4_000 });
    const key = `key-${randomUUID()}`;
    const input = { projectId, prompt: 'Document the API', poll: FAST_POLL };
    const first = await startAgentJob(env.client, input, { key, taskQueue: worker.taskQueue });
    const jobId = await waitFor(async () => (await first.query(statusQuery)).jobId, {
      what: 'the first run to record its agent job',
    });
    const firstRun = env.client.workflow.getHandle(first.workflowId, (await first.describe()).runId);
    await firstRun.terminate('an operator stops it');
    const second = await startAgentJob(env.client, input, { key, taskQueue: worker.taskQueue });
    assert.equal((await firstRun.describe()).status.name, 'TERMINATED');
    assert.notEqual((await second.describe()).runId, (await firstRun.describe()).runId, 'a new run');
    const result: AgentJobResult = await second.result();
    assert.equal(result.job.id, jobId);
    assert.equal(result.status, 'completed');
    assert.equal(requestsTo(sim, projectId, 'create'), 1, 'POSTs to create');
  });
});

test('a worker SIGKILLed while its create waits for the answer, policy fail: no second POST, CreateOutcomeUnknown', async () => {
  // The create is applied at once and answered 40 s later: the worker dies in between.
  const projectId = project({
    faults: { rules: [{ endpoint: 'create', first: 1, kind: 'slow', ms: 40_000 }] },
  });
  const victimEnv = await suite.workerEnv({ AGENT_API_AMBIGUOUS_CREATE: 'fail' });
  const { taskQueue } = victimEnv;
  const victim = await startWorkerProcess(victimEnv, { what: 'the worker process' });
  try {
    const handle = await start({ projectId }, taskQueue);
    await waitFor(() => createdJobs(sim, projectId) === 1, { what: 'the create to reach the API' });
    victim.child.kill('SIGKILL');
    await victim.exited;
    // Another worker with the same policy takes over the task queue.
    await suite.startWorker({ ambiguousCreatePolicy: 'fail' }, { taskQueue });
    const failure = await workflowFailure(handle);
    assert.equal(failure.type, FailureType.CreateOutcomeUnknown, failure.message);
    assert.match(failure.message, /stopped heartbeating/);
    assert.equal(requestsTo(sim, projectId, 'create'), 1, 'POSTs to create');
  } finally {
    if (victim.child.exitCode === null && victim.child.signalCode === null) victim.child.kill('SIGKILL');
    await victim.exited;
  }
});

describe('blips do not fail a job the API has answered', { concurrency: 3 }, () => {
  for (const [name, fault] of [
    ['404s on GET for 25 s (a failover)', { kind: 'status', status: 404 }],
    ['200 text/html maintenance pages on GET for 25 s', { kind: 'html', status: 200 }],
  ] as const) {
    test(`${name}: a fleet of 10 workflows rides them out, one create each`, async () => {
      const projectId = project({
        durationMs: 1_000,
        faults: { rules: [{ endpoint: 'get', forMs: 25_000, ...fault }] },
      });
      const handles = await Promise.all(Array.from({ length: 10 }, () => start({ projectId })));
      const results = await Promise.all(handles.map((handle) => handle.result()));
      await captureHistory(env, handles[0] as (typeof handles)[number], `blip-${fault.kind}`);
      assert.deepEqual(
        results.map((result) => result.status),
        Array(10).fill('completed'),
      );
      assert.equal(requestsTo(sim, projectId, 'create'), 10, 'POSTs to create');
      assert.ok(requestsTo(sim, projectId, 'get') > 10 * 5, 'more blips than the old bound of 5 in a row');
    });
  }

  test('the same blip past the input blipTolerance fails, naming it', async () => {
    const projectId = project({
      durationMs: 1_000,
      faults: { rules: [{ endpoint: 'get', forMs: 60_000, kind: 'status', status: 404 }] },
    });
    const failure = await workflowFailure(await start({ projectId, blipTolerance: '8s' }));
    assert.equal(failure.type, FailureType.JobNotFound, failure.message);
    assert.match(failure.message, /past the blip tolerance of 8s/);
  });
});

/** Sends one follow-up through the library and waits for its turn's result. */
async function followUp(projectId: string, jobId: string): Promise<AgentJobResult> {
  const sent = await sendFollowUp(
    env.client,
    { projectId, jobId, prompt: 'Also document the errors', poll: FAST_POLL },
    { taskQueue: worker.taskQueue },
  );
  return sent.result();
}

test('a follow-up whose 2xx answer trickles past the request bound: one message, and the new turn ends', async () => {
  const projectId = project({ durationMs: 500 });
  const first = await (await start({ projectId })).result();
  sim.setScenario(projectId, {
    durationMs: 500,
    faults: {
      rules: [{ endpoint: 'message', first: 1, kind: 'trickle', bytesPerChunk: 1, intervalMs: TRICKLE_MS }],
    },
  });
  const second = await followUp(projectId, first.job.id);
  assert.equal(second.status, 'completed');
  assert.notEqual(second.prLink, first.prLink);
  assert.equal(requestsTo(sim, projectId, 'message'), 1, 'POSTs to message');
});

test("a read of the previous turn's end right after a follow-up was answered is not the new turn's end", async () => {
  const projectId = project({ durationMs: 500, faults: { staleReadsAfterAnsweredMessage: 2 } });
  const first = await (await start({ projectId })).result();
  assert.ok(first.prLink, 'the first turn opened a pull request');
  const second = await followUp(projectId, first.job.id);
  assert.equal(second.status, 'completed');
  assert.notEqual(second.prLink, first.prLink, "the follow-up returned the previous turn's prLink");
});

test('a create that waited in the quota queue gets the time left when it is sent: it ends at the deadline', async () => {
  // One use per 8 s: the second job waits about 8 s in the queue, then its create hangs.
  const projectQuota = { defaultLimit: { uses: 1, windowMs: 8_000 }, overrides: {}, leaseMs: 10_000 };
  const quoted = await suite.startWorker({ projectQuota });
  const projectId = project({
    durationMs: 500,
    faults: { rules: [{ endpoint: 'create', skip: 1, kind: 'hang' }] },
  });
  const first = await start({ projectId }, quoted.taskQueue);
  await waitFor(() => createdJobs(sim, projectId) === 1, { what: 'the first job to take the one use' });
  const since = Date.now();
  const second = await start({ projectId, timeout: '10s' }, quoted.taskQueue);
  const failure = await workflowFailure(second);
  const endedAfterMs = Date.now() - since;
  assert.equal(failure.type, FailureType.AgentJobTimedOut, failure.message);
  // Main gave the create the 10 s left before the queue, and ended about 18 s after the start.
  assert.ok(endedAfterMs < 14_000, `ended ${endedAfterMs} ms after its start, for a 10 s deadline`);
  assert.equal(requestsTo(sim, projectId, 'create'), 2, 'POSTs to create');
  assert.equal((await first.result()).status, 'completed');
});
