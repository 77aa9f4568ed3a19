/**
 * The agent-job workflow against a real Temporal server, real workers, the real API client and the
 * real simulator over HTTP. Poll intervals are injected short, so no test waits long in real time.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import { WorkflowFailedError, WorkflowUpdateFailedError, type WorkflowHandle } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import {
  FailureType,
  MAX_PROMPT_LENGTH,
  pollNowSignal,
  SearchAttributes,
  sendMessageUpdate,
  statusQuery,
  type AgentJobInput,
  type AgentJobResult,
} from '../../src/contract.js';
import {
  FAST_POLL,
  activitiesFor,
  startSimulatedSuite,
  startTestWorker,
  uniqueId,
  waitFor,
  workflowFailure,
} from '../harness.js';
import { captureHistory } from '../capture-history.js';
import { POLL_PAST_DEADLINE } from '../../src/poll-schedule.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const FAST = { ...FAST_POLL, backoffCoefficient: 1.5 };

const suite = await startSimulatedSuite('agent-job-test');
const { env, sim, project } = suite;
const handles: WorkflowHandle[] = [];

async function start(input: Partial<AgentJobInput> & Record<string, unknown>, workflowId?: string) {
  // Cast: some tests start the workflow with input the contract refuses.
  const handle = await suite.startJob(input as AgentJobInput, { workflowId });
  handles.push(handle);
  return handle;
}

async function jobIdOf(handle: WorkflowHandle): Promise<string> {
  return waitFor(async () => (await handle.query(statusQuery)).jobId, { what: 'the agent job ID' });
}

describe('agent-job workflow', { concurrency: 4 }, () => {
  after(async () => {
    // Secrets never enter workflow inputs, results or history: check every workflow this file ran.
    for (const handle of handles) {
      const history = JSON.stringify(await handle.fetchHistory());
      assert.ok(!history.includes(suite.apiKey), `history of ${handle.workflowId} holds the API key`);
    }
    assert.ok(handles.length >= 15, 'the secret check covered the workflows of this file');
  });

  test('completes with the pull request link and creates exactly one agent job', async () => {
    const projectId = project({ outcome: 'pr' });
    const handle = await start({ projectId, prompt: 'Document the CLI flags', poll: FAST });
    const result: AgentJobResult = await handle.result();
    assert.equal(result.status, 'completed');
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+$/);
    assert.equal(result.job.prLink, result.prLink);
    assert.equal(result.created, true);
    assert.ok(result.polls >= 1);
    assert.equal(createdJobs(sim, projectId), 1);
    const described = await handle.describe();
    assert.equal(described.typedSearchAttributes.get(SearchAttributes.jobId), result.job.id);
    assert.equal(described.typedSearchAttributes.get(SearchAttributes.projectId), projectId);
    // The job's status is in the result, not a search attribute: the job's ID is upserted once, and
    // (this test's start sets no attributes) the project.
    assert.equal(described.typedSearchAttributes.get(SearchAttributes.status), undefined);
    const { events } = await handle.fetchHistory();
    const upserted = (events ?? []).flatMap((e) =>
      Object.keys(e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields ?? {}),
    );
    assert.deepEqual(upserted.sort(), [SearchAttributes.jobId.name, SearchAttributes.projectId.name]);
    await captureHistory(env, handle, 'completed-with-pr');
  });

  test('a wait is one poll activity: the server retries it once per poll, and writes nothing per poll', async () => {
    // Long enough for several polls: the dev server fires retry timers on a 1 s tick.
    const projectId = project({ durationMs: 6_000 });
    const handle = await start({
      projectId,
      prompt: 'Poll by retry',
      poll: { initialInterval: 200, backoffCoefficient: 1 },
    });
    const { polls } = await handle.result();
    const events = (await handle.fetchHistory()).events ?? [];
    const scheduled = events.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
    const gets = requestsTo(sim, projectId, 'get');
    assert.ok(gets >= 4, `the server retried the poll activity ${gets} times`);
    // Every GET was one attempt of the one poll activity, and the workflow counted them all.
    assert.equal(polls, gets);
    // The quota has room: the create took its use itself, with nothing in this history.
    assert.deepEqual(scheduled, ['createAgentJob', 'pollAgentJob']);
    const pollScheduled = events.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'pollAgentJob',
    );
    const pollStarted = events.find(
      (e) =>
        Number(e.activityTaskStartedEventAttributes?.scheduledEventId ?? -1) ===
        Number(pollScheduled?.eventId),
    );
    assert.equal(
      pollStarted?.activityTaskStartedEventAttributes?.attempt,
      gets,
      'its one started event names the last attempt',
    );
    assert.equal(events.filter((e) => e.timerStartedEventAttributes).length, 1, 'one timer: the first wait');
    assert.ok(events.length < 50, `${events.length} events for ${polls} polls`);
    await captureHistory(env, handle, 'poll-by-retry');
  });

  test('a workflow ID with spaces and Unicode still gives a valid Idempotency-Key', async () => {
    const projectId = project();
    const handle = await start(
      { projectId, prompt: 'Any ID', poll: FAST },
      uniqueId('docs job \u00e9t\u00e9 \u2713'),
    );
    assert.equal((await handle.result()).status, 'completed');
    assert.equal(createdJobs(sim, projectId), 1);
    const keys = Object.keys(sim.stats().jobsPerIdempotencyKey);
    assert.ok(
      keys.includes(encodeURIComponent(handle.workflowId)),
      'the key is the percent-encoded workflow ID',
    );
  });

  test('a completed job with prLink null (no files changed) is a success', async () => {
    const projectId = project({ outcome: 'no-changes' });
    const result = await (await start({ projectId, prompt: 'Check the spelling', poll: FAST })).result();
    assert.equal(result.status, 'completed');
    assert.equal(result.prLink, null);
  });

  test('an archived job is a success with status archived', async () => {
    const projectId = project({ durationMs: 60_000 });
    const handle = await start({ projectId, prompt: 'Archive me', poll: { initialInterval: 60_000 } });
    const jobId = await jobIdOf(handle);
    sim.archiveJob(projectId, jobId);
    await handle.signal(pollNowSignal);
    const result = await handle.result();
    assert.equal(result.status, 'archived');
    assert.equal(result.job.status, 'archived');
    assert.ok(result.job.archivedAt);
  });

  test('a failed job fails the workflow with AgentJobFailed and the final record', async () => {
    const projectId = project({ outcome: 'failed' });
    const handle = await start({ projectId, prompt: 'Break things', poll: FAST });
    const failure = await workflowFailure(handle);
    assert.equal(failure.type, FailureType.AgentJobFailed);
    assert.equal(failure.nonRetryable, true);
    const record = failure.details?.[0] as { status: string; id: string };
    assert.equal(record.status, 'failed');
    assert.match(failure.message, new RegExp(record.id));
    await captureHistory(env, handle, 'failed');
  });

  test('transient errors on create and get are retried and the job completes', async () => {
    const projectId = project({
      faults: {
        rules: [
          { endpoint: 'create', first: 1, kind: 'status', status: 503 },
          { endpoint: 'get', first: 1, kind: 'status', status: 502 },
          // A 404 goes back to the workflow, which waits on its own timer: that path is in the
          // captured history too.
          { endpoint: 'get', first: 1, kind: 'status', status: 404 },
        ],
      },
    });
    const handle = await start({ projectId, prompt: 'Survive', poll: FAST });
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    await captureHistory(env, handle, 'transient-errors');
    // 503 surely did not create anything; the retried create made the one job.
    assert.equal(createdJobs(sim, projectId), 1);
    assert.ok(requestsTo(sim, projectId, 'create') >= 2);
  });

  test('Retry-After on 429 sets the wait before the next attempt', async () => {
    const projectId = project({
      faults: {
        rules: [{ endpoint: 'get', first: 1, kind: 'status', status: 429, retryAfter: { seconds: 2 } }],
      },
    });
    const handle = await start({ projectId, prompt: 'Slow down', poll: FAST });
    const startedAt = Date.now();
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    // Without Retry-After the activity's own first retry comes after 1s.
    assert.ok(
      Date.now() - startedAt >= 2_000,
      `finished after ${Date.now() - startedAt}ms, before Retry-After`,
    );
  });

  test('a final API error fails fast with its own type: Unauthorized, no key in the message', async () => {
    const wrongKeyWorker = await startTestWorker(env, activitiesFor(sim, 'not-the-right-key'));
    const projectId = project();
    const handle = await suite.startJob(
      { projectId, prompt: 'No entry', poll: FAST },
      { taskQueue: wrongKeyWorker.taskQueue },
    );
    handles.push(handle);
    const failure = await workflowFailure(handle);
    assert.equal(failure.type, FailureType.Unauthorized);
    assert.match(failure.message, /API key/);
    assert.ok(!failure.message.includes('not-the-right-key'));
    // Counted at the simulator, which counts a request before it checks the key: one POST, answered
    // 401, and nothing sent after it, neither by Temporal nor by the workflow. (A time bound could
    // not tell: a retry 1 s later fits in any bound a busy machine leaves room for.)
    assert.equal(requestsTo(sim, projectId, 'create'), 1, 'a final error is not retried: POSTs to create');
    assert.equal(requestsTo(sim, projectId, 'get'), 0);
    assert.equal(createdJobs(sim, projectId), 0);
  });

  test('create on an unknown project fails with ProjectNotFound', async () => {
    const projectId = project({ projectExists: false });
    const failure = await workflowFailure(await start({ projectId, prompt: 'Nowhere', poll: FAST }));
    assert.equal(failure.type, FailureType.ProjectNotFound);
    assert.equal(createdJobs(sim, projectId), 0);
  });

  test('a job still active at the deadline fails with AgentJobTimedOut and the last record', async () => {
    const projectId = project({ durationMs: 600_000 });
    const handle = await start({
      projectId,
      prompt: 'Take forever',
      poll: { initialInterval: 200 },
      timeout: '2s',
    });
    const failure = await workflowFailure(handle);
    assert.equal(failure.type, FailureType.AgentJobTimedOut);
    assert.equal((failure.details?.[0] as { status: string }).status, 'active');
    assert.equal((await handle.query(statusQuery)).phase, 'timed-out');
    await captureHistory(env, handle, 'timed-out');
  });

  test('a poll attempt that starts after the deadline sends nothing and ends the workflow as timed out', async () => {
    // A worker that stalls (or dies, and the server retries the attempt 30 s on) can start a poll
    // attempt after the deadline: the poll activity itself sees it and fails with the final
    // POLL_PAST_DEADLINE, which the workflow reads as its deadline.
    const projectId = project({ durationMs: 600_000 });
    const activities = activitiesFor(sim, suite.apiKey);
    const { taskQueue } = await startTestWorker(env, {
      ...activities,
      pollAgentJob: async (input: Parameters<typeof activities.pollAgentJob>[0]) => {
        await sleep(Math.max(0, (input.deadlineMs ?? 0) - Date.now()) + 100);
        return activities.pollAgentJob(input);
      },
    });
    const handle = await suite.startJob(
      { projectId, prompt: 'Late attempt', poll: { initialInterval: 200 }, timeout: '2s' },
      { taskQueue },
    );
    handles.push(handle);
    const failure = await workflowFailure(handle);
    assert.equal(failure.type, FailureType.AgentJobTimedOut);
    assert.equal((failure.details?.[0] as { status: string }).status, 'active');
    assert.equal(requestsTo(sim, projectId, 'get'), 0, 'the late attempt sent no GET');
    // Read as the deadline, not as an API error: the status shows none.
    assert.deepEqual((await handle.query(statusQuery)).lastError, null);
    const { events } = await handle.fetchHistory();
    const cause = events?.find((e) => e.activityTaskFailedEventAttributes)?.activityTaskFailedEventAttributes;
    assert.equal(cause?.failure?.applicationFailureInfo?.type, POLL_PAST_DEADLINE);
  });

  test('continue-as-new keeps the history bounded and never creates a second job', async () => {
    const projectId = project({ durationMs: 600_000 });
    const handle = await start({
      projectId,
      prompt: 'Long one',
      poll: { initialInterval: 50, backoffCoefficient: 1 },
      continueAsNewAfterPolls: 2,
    });
    // A job that stays active adds nothing to the history while its poll activity waits on the
    // server; each pollNow ends one poll activity, and every two the run continues as new.
    await waitFor(
      async () => {
        const executions = [];
        for await (const execution of env.client.workflow.list({
          query: `WorkflowId = '${handle.workflowId}'`,
        })) {
          executions.push(execution);
        }
        if (executions.length < 3) await handle.signal(pollNowSignal);
        return executions.length >= 3;
      },
      { what: 'three runs of the workflow', intervalMs: 200 },
    );
    const jobId = await jobIdOf(handle);
    sim.archiveJob(projectId, jobId);
    const result = await handle.result();
    assert.equal(result.status, 'archived');
    assert.ok(result.polls > 4, `polls ${result.polls} span more than two runs`);
    assert.equal(result.created, true);
    assert.equal(createdJobs(sim, projectId), 1);
    const firstRun = env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
    const events = (await firstRun.fetchHistory()).events ?? [];
    assert.ok(
      events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes,
      'the first run continued as new',
    );
    assert.ok(events.length < 60, `the first run stayed small (${events.length} events)`);
    await captureHistory(env, handle, 'continued-as-new', { runId: handle.firstExecutionRunId });
  });

  test('jobId attaches to an existing agent job without creating one', async () => {
    const projectId = project({ durationMs: 200 });
    const created = await suite.api.createJob(projectId, 'made elsewhere', {
      idempotencyKey: uniqueId('key'),
    });
    const result = await (await start({ projectId, jobId: created.id, poll: FAST })).result();
    assert.equal(result.job.id, created.id);
    assert.equal(result.created, false);
    assert.equal(result.turns, 1);
    assert.equal(createdJobs(sim, projectId), 1);
    assert.equal(requestsTo(sim, projectId, 'message'), 0, 'watching sends no message');
  });

  test('jobId with a prompt on a completed job sends one follow-up and returns the new turn\u2019s prLink', async () => {
    // The message response and the next 2 reads still show turn 1's record, as a lagging service would.
    const projectId = project({ durationMs: 200, faults: { staleReadsAfterMessage: 2 } });
    const turnOne = await suite.completedJob(projectId);
    assert.equal(turnOne.status, 'completed');
    assert.ok(turnOne.prLink);
    const handle = await start({ projectId, jobId: turnOne.id, prompt: 'Now add examples', poll: FAST });
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    assert.equal(result.job.id, turnOne.id);
    assert.equal(result.turns, 2);
    assert.equal(result.created, false);
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\//);
    assert.notEqual(result.prLink, turnOne.prLink, 'the result is turn 2\u2019s, with its own pull request');
    assert.equal(requestsTo(sim, projectId, 'message'), 1, 'exactly one follow-up message');
    assert.equal(createdJobs(sim, projectId), 1, 'no agent job created');
    await captureHistory(env, handle, 'follow-up-at-start');
  });

  test('pollNow polls at once instead of waiting for the timer', async () => {
    const projectId = project({ durationMs: 100 });
    const handle = await start({ projectId, prompt: 'Webhook', poll: { initialInterval: '1 hour' } });
    await jobIdOf(handle);
    const status = await handle.query(statusQuery);
    assert.ok(status.nextPollAt, 'a poll is scheduled');
    await waitFor(
      () => sim.stats().jobs.some((job) => job.projectId === projectId && job.terminalAt !== null),
      {
        what: 'the agent job to end',
      },
    );
    await handle.signal(pollNowSignal);
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    assert.equal(result.polls, 1);
    await captureHistory(env, handle, 'poll-now');
  });

  test('pollNow cancels the waiting poll activity and polls at once, every time', async () => {
    const projectId = project({ durationMs: 600_000 });
    const handle = await start({
      projectId,
      prompt: 'Thrice',
      poll: { initialInterval: '30 minutes', maxInterval: '1 hour' },
    });
    await jobIdOf(handle);
    for (const gets of [1, 2, 3]) {
      const signalledAt = Date.now();
      await handle.signal(pollNowSignal);
      await waitFor(() => requestsTo(sim, projectId, 'get') === gets, { what: `GET ${gets}` });
      // Far below the half hour the schedule waits: the request, not a retry, made the GET.
      assert.ok(Date.now() - signalledAt < 10_000);
    }
    // The poll activity the last pollNow started waits on the server for its next attempt.
    await waitFor(
      async () => {
        const pending = (await handle.describe()).raw.pendingActivities ?? [];
        return pending.some((a) => a.activityType?.name === 'pollAgentJob' && (a.attempt ?? 0) >= 2);
      },
      { what: 'the poll activity to wait for its second attempt' },
    );
    const pending = (await handle.describe()).raw.pendingActivities ?? [];
    const next = Number(pending[0]?.nextAttemptScheduleTime?.seconds ?? 0) * 1000;
    assert.ok(
      next - Date.now() > 20 * 60_000,
      'the next poll is the schedule\u2019s, a half hour or more away',
    );
    // What the server keeps of each "still active" attempt: the answer, not where the code was.
    const lastFailure = pending[0]?.lastFailure;
    assert.match(lastFailure?.message ?? '', /is "active"; polling again in \d+s$/);
    assert.doesNotMatch(lastFailure?.stackTrace ?? '', /\n\s+at /, 'no stack is captured per poll');
    assert.equal(requestsTo(sim, projectId, 'get'), 3, 'no poll besides the three asked for');
    const status = await handle.query(statusQuery);
    assert.equal(status.phase, 'polling');
    assert.equal((await handle.describe()).status.name, 'RUNNING');
    await handle.cancel();
    await captureHistory(env, handle, 'poll-now-repeated');
  });

  test('sendMessage after a turn ended: the previous turn\u2019s completed is not taken for the new turn\u2019s end', async () => {
    // The message response and the next 2 reads still show turn 1's record, as a lagging service would.
    const projectId = project({ durationMs: 200, faults: { staleReadsAfterMessage: 2 } });
    const handle = await start({ projectId, prompt: 'Turn one', poll: { initialInterval: '1 hour' } });
    const jobId = await jobIdOf(handle);
    await waitFor(() => sim.stats().jobs.some((job) => job.id === jobId && job.terminalAt !== null), {
      what: 'turn 1 to end',
    });
    const stale = await handle.executeUpdate(sendMessageUpdate, { args: ['Now add examples'] });
    assert.equal(stale.status, 'completed', 'the simulator answered with the previous turn\u2019s record');
    const turnOnePrLink = stale.prLink;
    assert.ok(turnOnePrLink);
    // Each pollNow makes one poll; keep asking until the workflow has seen the real end of turn 2.
    let closed = false;
    const result = handle.result().finally(() => (closed = true));
    await waitFor(
      async () => {
        if (!closed) await handle.signal(pollNowSignal).catch(() => undefined);
        return closed;
      },
      { what: 'the new turn to end', intervalMs: 100 },
    );
    const final = await result;
    assert.equal(final.turns, 2);
    assert.equal(final.status, 'completed');
    assert.ok(
      final.prLink && final.prLink !== turnOnePrLink,
      'the result is turn 2\u2019s, with its own pull request',
    );
    assert.ok(final.polls >= 3, 'the stale reads were polled through');
    await captureHistory(env, handle, 'send-message-after-turn');
  });

  test('sendMessage during a turn resumes polling until the new turn ends', async () => {
    const projectId = project({ durationMs: 300, faults: { staleReadsAfterMessage: 2 } });
    const handle = await start({
      projectId,
      prompt: 'Turn one',
      poll: { initialInterval: 100, backoffCoefficient: 1 },
    });
    await jobIdOf(handle);
    const record = await handle.executeUpdate(sendMessageUpdate, { args: ['Now add examples'] });
    assert.equal(record.id, (await handle.query(statusQuery)).jobId);
    const result = await handle.result();
    assert.equal(result.turns, 2);
    assert.equal(result.status, 'completed');
    assert.equal(requestsTo(sim, projectId, 'message'), 1);
    // The result is the new turn's: the simulator ended turn 2 after the message, not before it.
    const job = sim.stats().jobs.find((j) => j.id === record.id);
    assert.ok(job && job.terminalAt !== null);
    await captureHistory(env, handle, 'send-message');
  });

  test('sendMessage is rejected by its validator when it cannot apply, and nothing is sent', async () => {
    const projectId = project({ durationMs: 60_000 });
    const handle = await start({ projectId, prompt: 'Busy', poll: { initialInterval: '1 hour' } });
    await jobIdOf(handle);
    await assert.rejects(
      handle.executeUpdate(sendMessageUpdate, { args: ['   '] }),
      WorkflowUpdateFailedError,
    );
    await assert.rejects(
      handle.executeUpdate(sendMessageUpdate, { args: ['x'.repeat(MAX_PROMPT_LENGTH + 1)] }),
      WorkflowUpdateFailedError,
    );
    assert.equal(requestsTo(sim, projectId, 'message'), 0);
    await handle.cancel();
  });

  test('cancelling stops polling promptly and ends the workflow as cancelled', async () => {
    const projectId = project({ durationMs: 600_000 });
    const handle = await start({ projectId, prompt: 'Never mind', poll: { initialInterval: '1 hour' } });
    const jobId = await jobIdOf(handle);
    const startedAt = Date.now();
    await handle.cancel();
    const err = await handle.result().then(
      () => assert.fail('the workflow should have been cancelled'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure);
    assert.ok(Date.now() - startedAt < 5_000);
    assert.equal((await handle.describe()).status.name, 'CANCELLED');
    // The agent job is still findable by its search attribute.
    assert.equal((await handle.describe()).typedSearchAttributes.get(SearchAttributes.jobId), jobId);
    await captureHistory(env, handle, 'cancelled');
  });

  const invalidInputs: Array<[string, Record<string, unknown>, string]> = [
    ['missing projectId', { prompt: 'p' }, 'projectId'],
    ['blank projectId', { projectId: '  ', prompt: 'p' }, 'projectId'],
    ['missing prompt', { projectId: 'x' }, 'prompt'],
    ['blank prompt', { projectId: 'x', prompt: ' \n ' }, 'prompt'],
    ['prompt over the limit', { projectId: 'x', prompt: 'y'.repeat(MAX_PROMPT_LENGTH + 1) }, 'prompt'],
    [
      'backoff below 1',
      { projectId: 'x', prompt: 'p', poll: { backoffCoefficient: 0.5 } },
      'poll.backoffCoefficient',
    ],
    [
      'max below initial',
      { projectId: 'x', prompt: 'p', poll: { initialInterval: '10s', maxInterval: '1s' } },
      'poll.maxInterval',
    ],
    [
      'nonsense interval',
      { projectId: 'x', prompt: 'p', poll: { initialInterval: 'soon' } },
      'poll.initialInterval',
    ],
    ['nonsense timeout', { projectId: 'x', prompt: 'p', timeout: -5 }, 'timeout'],
  ];
  for (const [name, input, field] of invalidInputs) {
    test(`invalid input (${name}) fails with InvalidInput naming ${field} and creates no job`, async () => {
      const projectId = typeof input.projectId === 'string' && input.projectId.trim() ? project() : undefined;
      const handle = await start({ ...input, ...(projectId ? { projectId } : {}) });
      const failure = await workflowFailure(handle);
      assert.equal(failure.type, FailureType.InvalidInput);
      assert.match(failure.message, new RegExp(field.replace('.', '\\.')));
      assert.equal((failure.details?.[0] as { field: string }).field, field);
      if (projectId) assert.equal(requestsTo(sim, projectId, 'create'), 0);
      const events = (await handle.fetchHistory()).events ?? [];
      assert.ok(
        !events.some((e) => e.activityTaskScheduledEventAttributes || e.markerRecordedEventAttributes),
        'no activity ran, local or regular',
      );
    });
  }
});
