/**
 * The workflow against an awkward but legal API: Retry-After 0 and dates in the past, outages at
 * every endpoint, stray 404s and maintenance pages, huge bodies, slow answers racing a follow-up
 * message, a cancellation while a create is on the wire. Real server, real worker, the real
 * simulator over HTTP; every fault is one the simulator injects. Each test holds a promise the
 * workflow makes: its deadline, its history bound, the API's limits, its result.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowFailedError, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import {
  FailureType,
  pollNowSignal,
  SearchAttributes,
  sendMessageUpdate,
  statusQuery,
  type AgentJobInput,
  type AgentJobResult,
  type LastApiError,
} from '../../src/contract.js';
import type { agentJobWorkflow } from '../../src/workflows/index.js';
import { FAST_POLL, startSimulatedSuite, waitFor, type TestWorker } from '../harness.js';
import { captureHistory } from '../capture-history.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const FAST = { ...FAST_POLL, backoffCoefficient: 1.5 };

const suite = await startSimulatedSuite('hostile');
const { env, sim, project } = suite;
const failingWorker = await suite.startWorker({ ambiguousCreatePolicy: 'fail' });

function start(input: Partial<AgentJobInput> & { projectId: string }, on: TestWorker = suite.worker) {
  return suite.startJob({ prompt: 'Document the API', poll: FAST, ...input }, { taskQueue: on.taskQueue });
}

/** How a workflow ended, and how long after `since` it did. */
async function outcome(
  handle: WorkflowHandle<typeof agentJobWorkflow>,
  since: number,
): Promise<{ result?: AgentJobResult; failure?: ApplicationFailure; cause?: unknown; ms: number }> {
  try {
    const result = await handle.result();
    return { result, ms: Date.now() - since };
  } catch (err) {
    const ms = Date.now() - since;
    assert.ok(err instanceof WorkflowFailedError, `expected WorkflowFailedError, got ${String(err)}`);
    if (err.cause instanceof ApplicationFailure) return { failure: err.cause, ms };
    return { cause: err.cause, ms };
  }
}

/** Asserts an `AgentJobTimedOut` that names the last API error, `ms` within `[lowMs, highMs]`. */
function assertTimedOutNaming(
  ended: Awaited<ReturnType<typeof outcome>>,
  error: { type: string; status: number },
  [lowMs, highMs]: [number, number],
): void {
  assert.equal(ended.failure?.type, FailureType.AgentJobTimedOut, String(ended.failure ?? ended.cause));
  assert.match(ended.failure.message, new RegExp(`last API error ${error.type} \\(HTTP ${error.status}\\)`));
  const lastError = (ended.failure.details?.[1] as { lastError: LastApiError }).lastError;
  assert.equal(lastError.type, error.type);
  assert.equal(lastError.status, error.status);
  assert.ok(
    ended.ms >= lowMs && ended.ms <= highMs,
    `ended after ${ended.ms} ms, not in [${lowMs}, ${highMs}]`,
  );
}

describe('the workflow against a hostile API', { concurrency: 6 }, () => {
  for (const [name, retryAfter] of [
    ['Retry-After: 0', { seconds: 0 }],
    ['a Retry-After date in the past', { seconds: -3600, form: 'http-date' as const }],
  ] as const) {
    test(`429 with ${name}: the policy's backoff still paces the retries`, async () => {
      const projectId = project({
        faults: { rules: [{ endpoint: 'get', first: 4, kind: 'status', status: 429, retryAfter }] },
      });
      const since = Date.now();
      const poll = { initialInterval: '1s', maxInterval: '4s', backoffCoefficient: 2 };
      const ended = await outcome(await start({ projectId, poll }), since);
      assert.equal(ended.result?.status, 'completed');
      // The poll activity's retries keep the schedule's pace: a 1 s first wait, then 2 s, 4 s and
      // 4 s after the refusals, at least 11 s for four (0.x took milliseconds and thousands of requests).
      assert.ok(ended.ms >= 8_000, `four refusals passed in ${ended.ms} ms`);
      const gets = requestsTo(sim, projectId, 'get');
      assert.ok(gets <= 4 + 3, `${gets} GETs: the four refused and a few that found the job`);
    });
  }

  test('an outage at create: AgentJobTimedOut at the deadline, naming the last API error', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'create', kind: 'status', status: 503 }] } });
    const since = Date.now();
    const ended = await outcome(await start({ projectId, timeout: '8s' }), since);
    assertTimedOutNaming(ended, { type: FailureType.ServiceUnavailable, status: 503 }, [7_500, 13_000]);
    assert.equal(createdJobs(sim, projectId), 0);
  });

  test('a Retry-After past the deadline while polling: ends at the deadline', async () => {
    const projectId = project({
      durationMs: 60_000,
      faults: {
        rules: [{ endpoint: 'get', kind: 'status', status: 503, retryAfter: { seconds: 45 } }],
      },
    });
    const since = Date.now();
    const ended = await outcome(await start({ projectId, timeout: '6s', poll: FAST }), since);
    assertTimedOutNaming(ended, { type: FailureType.ServiceUnavailable, status: 503 }, [5_500, 11_000]);
  });

  test('an outage at the follow-up message: the update and the workflow end at the deadline', async () => {
    const projectId = project({
      durationMs: 60_000,
      faults: { rules: [{ endpoint: 'message', kind: 'status', status: 503 }] },
    });
    const since = Date.now();
    // Time for the message's first attempts before the deadline, even on a busy machine.
    const handle = await start({ projectId, timeout: '10s' });
    await waitFor(async () => (await handle.query(statusQuery)).jobId, { what: 'the agent job' });
    const update = await handle.executeUpdate(sendMessageUpdate, { args: ['Also document errors'] }).then(
      () => assert.fail('the update should fail'),
      (err: unknown) => err,
    );
    assert.ok(update instanceof WorkflowUpdateFailedError, String(update));
    assert.ok(update.cause instanceof ApplicationFailure);
    assert.equal(update.cause.type, FailureType.AgentJobTimedOut);
    assert.match(update.cause.message, /ServiceUnavailable \(HTTP 503\)/);
    assertTimedOutNaming(
      await outcome(handle, since),
      { type: FailureType.ServiceUnavailable, status: 503 },
      [9_500, 15_000],
    );
    await captureHistory(env, handle, 'timed-out-during-message');
  });

  test('an outage while polling: the server retries the poll activity, and the history does not grow', async () => {
    const projectId = project({
      durationMs: 60_000,
      faults: { rules: [{ endpoint: 'get', kind: 'status', status: 503, retryAfter: { seconds: 1 } }] },
    });
    const handle = await start({ projectId, poll: { initialInterval: 1_000, maxInterval: 2_000 } });
    await waitFor(() => requestsTo(sim, projectId, 'get') >= 2, { what: 'two failed polls' });
    const before = (await handle.fetchHistory()).events?.length ?? 0;
    await waitFor(() => requestsTo(sim, projectId, 'get') >= 5, { what: 'five failed polls' });
    const after = (await handle.fetchHistory()).events?.length ?? 0;
    assert.equal(after, before, 'no event per failed poll');
    // Operators see the outage on the pending activity: its attempts and the last failure.
    const pending = (await handle.describe()).raw.pendingActivities ?? [];
    const poll = pending.find((a) => a.activityType?.name === 'pollAgentJob');
    assert.ok((poll?.attempt ?? 0) >= 4, `attempt ${poll?.attempt}`);
    assert.match(poll?.lastFailure?.message ?? '', /503/);
    assert.equal(createdJobs(sim, projectId), 1);
    await handle.cancel();
  });

  test('a Retry-After beyond the longest poll wait comes back to the workflow: such polls count towards continue-as-new', async () => {
    const projectId = project({
      durationMs: 60_000,
      faults: { rules: [{ endpoint: 'get', kind: 'status', status: 503, retryAfter: { seconds: 3 } }] },
    });
    const handle = await start({
      projectId,
      poll: { initialInterval: 1_000, maxInterval: 2_000 },
      continueAsNewAfterPolls: 2,
    });
    const firstRunId = (await handle.describe()).runId;
    await waitFor(async () => (await handle.describe()).runId !== firstRunId, {
      what: 'continue-as-new during the outage',
      timeoutMs: 40_000,
    });
    const events =
      (await env.client.workflow.getHandle(handle.workflowId, firstRunId).fetchHistory()).events ?? [];
    assert.ok(events.some((event) => event.workflowExecutionContinuedAsNewEventAttributes));
    const timers = events.filter((e) => e.timerStartedEventAttributes).length;
    assert.ok(timers >= 2, `${timers} timers: the workflow waited the Retry-After itself`);
    const status = await handle.query(statusQuery);
    assert.equal(status.lastError?.status, 503, 'the status shows the outage');
    assert.equal(createdJobs(sim, projectId), 1);
    await handle.cancel();
  });

  for (const [name, odd] of [
    ['404 (read lag)', { kind: 'status', status: 404 }],
    ['maintenance page', { kind: 'html', status: 200 }],
  ] as const) {
    test(`five 503s, then one ${name}: the job still completes (bounds count answers in a row)`, async () => {
      const projectId = project({
        faults: {
          rules: [
            { endpoint: 'get', first: 5, kind: 'status', status: 503 },
            { endpoint: 'get', first: 1, ...odd },
          ],
        },
      });
      const ended = await outcome(await start({ projectId }), Date.now());
      assert.equal(ended.result?.status, 'completed', String(ended.failure ?? ended.cause));
    });
  }

  test('404s in a row for a job never answered (a jobId with a typo) end the workflow with JobNotFound after the bound', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'get', kind: 'status', status: 404 }] } });
    const ended = await outcome(await start({ projectId, jobId: 'job_typo', prompt: undefined }), Date.now());
    assert.equal(ended.failure?.type, FailureType.JobNotFound);
    assert.match(ended.failure.message, /5 such answers in a row/);
    assert.equal(requestsTo(sim, projectId, 'get'), 5);
  });

  test('a 3 MB body is refused by the client, retried, and the workflow completes', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'get', first: 1, kind: 'oversized', bytes: 3 * 1024 * 1024 }] },
    });
    const ended = await outcome(await start({ projectId, timeout: '30s' }), Date.now());
    assert.equal(ended.result?.status, 'completed', String(ended.failure ?? ended.cause));
  });

  test('a record with 100 KB of unknown fields keeps its documented fields, within the record budget', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'any', kind: 'oversized', bytes: 100_000 }] },
    });
    const ended = await outcome(await start({ projectId, timeout: '30s' }), Date.now());
    assert.equal(ended.result?.status, 'completed', String(ended.failure ?? ended.cause));
    assert.equal(ended.result.job.padding, undefined);
    assert.match(ended.result.prLink ?? '', /^https:\/\/github\.com\//);
  });

  test('a follow-up that arrives while a slow poll reads the ended turn: the new turn ends the workflow', async () => {
    // Every read is answered 1.5 s after it was made, with the state when it was made, so the read in
    // flight when the message arrives carries turn 1's end. Polls happen only on pollNow here.
    const projectId = project({ faults: { rules: [{ endpoint: 'get', kind: 'slow', ms: 1_500 }] } });
    const handle = await start({
      projectId,
      poll: { initialInterval: '1h', maxInterval: '1h' },
    });
    const jobId = await waitFor(async () => (await handle.query(statusQuery)).jobId, { what: 'the job' });
    const turnIs = (turns: number) => {
      const job = sim.stats().jobs.find((j) => j.id === jobId);
      return job?.status === 'completed' && job.turns === turns;
    };
    await waitFor(() => turnIs(1), { what: 'turn 1 to end' });
    const turnOne = await suite.api.getJob(projectId, jobId);
    assert.ok(turnOne.prLink);
    await handle.signal(pollNowSignal);
    await waitFor(() => requestsTo(sim, projectId, 'get') >= 2, { what: "the workflow's slow read" });
    const answered = await handle.executeUpdate(sendMessageUpdate, { args: ['Also document errors'] });
    assert.equal(answered.status, 'active');
    await waitFor(() => turnIs(2), { what: 'turn 2 to end' });
    await handle.signal(pollNowSignal);
    const ended = await outcome(handle, Date.now());
    assert.equal(ended.result?.turns, 2, String(ended.failure ?? ended.cause));
    assert.equal(ended.result.status, 'completed');
    assert.notEqual(ended.result.prLink, turnOne.prLink, "turn 2's pull request, not turn 1's");
  });

  test('cancelled while the create is on the wire: the agent job it made is recorded', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'create', kind: 'slow', ms: 2_000 }] } });
    const handle = await start({ projectId });
    await waitFor(() => requestsTo(sim, projectId, 'create') >= 1, { what: 'the create request' });
    await handle.cancel();
    const ended = await outcome(handle, Date.now());
    assert.ok(
      ended.cause instanceof CancelledFailure,
      `ended with ${ended.failure?.type ?? typeof ended.cause}`,
    );
    const made = sim.stats().jobs.filter((job) => job.projectId === projectId);
    assert.equal(made.length, 1, 'the create landed');
    const attributes = (await handle.describe()).typedSearchAttributes;
    assert.equal(attributes.get(SearchAttributes.jobId), made[0]?.id);
    assert.equal((await handle.query(statusQuery)).jobId, made[0]?.id);
  });

  test('a failed follow-up message does not lend its idempotency key to the next one', async () => {
    // The first message is stored, then the connection resets: under the "fail" policy the update
    // fails with MessageOutcomeUnknown. The next message, with another prompt, must start a turn.
    const projectId = project({
      durationMs: 200,
      faults: { rules: [{ endpoint: 'message', first: 1, kind: 'reset-after-store' }] },
    });
    const handle = await start(
      { projectId, poll: { initialInterval: '1h', maxInterval: '1h' } },
      failingWorker,
    );
    const jobId = await waitFor(async () => (await handle.query(statusQuery)).jobId, { what: 'the job' });
    const first = await handle.executeUpdate(sendMessageUpdate, { args: ['First follow-up'] }).then(
      () => assert.fail('the first message should fail'),
      (err: unknown) => err,
    );
    assert.ok(first instanceof WorkflowUpdateFailedError);
    assert.equal((first.cause as ApplicationFailure).type, FailureType.MessageOutcomeUnknown);
    await handle.executeUpdate(sendMessageUpdate, { args: ['Second follow-up, another prompt'] });
    const job = sim.stats().jobs.find((j) => j.id === jobId);
    assert.equal(job?.turns, 3, 'both messages started a turn');
    await waitFor(() => sim.stats().jobs.find((j) => j.id === jobId)?.status === 'completed', {
      what: 'turn 3 to end',
    });
    await handle.signal(pollNowSignal);
    assert.equal(
      (await outcome(handle, Date.now())).result?.turns,
      2,
      'the workflow counts the turn it saw answered',
    );
  });
});
