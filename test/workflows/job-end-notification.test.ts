/**
 * Job-end notifications over the real server, the simulator and a real HTTP receiver: a notice
 * reaches the receiver for every end (completed, failed, timed out, cancelled), signed so the
 * receiver verifies it; one delivery ID however often the receiver answers 5xx; the target's URL
 * (a marker in its path) and its secret in no history (read decoded, as protobuf bytes) and no
 * failure; an unknown target refused before any create, on a create and an attach; a receiver
 * down past the bound ends the notification with a clear failure long after the job's workflow
 * returned its result.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import proto from '@temporalio/proto';
import { freePorts } from '../../dev/dev-server.js';
import { FailureType, statusQuery } from '../../src/contract.js';
import type { NotifyTarget } from '../../src/notify/targets.js';
import { fixedNotifyTargets } from '../../src/notify/targets.js';
import {
  jobEndNotificationId,
  type JobEndNotificationResult,
} from '../../src/workflows/job-end-notification/workflow.js';
import { FAST_POLL, startSimulatedSuite, uniqueId, waitFor, workflowFailure } from '../harness.js';
import { startNotifyReceiver, verifiedNotice } from '../notify-receiver.js';
import { captureHistory } from '../capture-history.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const receiver = await startNotifyReceiver();
/** In every target's URL path: found in no history, no failure. */
const MARKER = `url-marker-${randomUUID()}`;
const SECRET = `secret-marker-${randomUUID()}`;
const path = (name: string) => `/${MARKER}/${name}`;
const targets = new Map<string, NotifyTarget>([
  ['hook', { type: 'webhook', url: `${receiver.url}${path('hook')}`, secret: SECRET }],
  ['flaky', { type: 'webhook', url: `${receiver.url}${path('flaky')}`, secret: SECRET }],
  ['refusing', { type: 'webhook', url: `${receiver.url}${path('refusing')}`, secret: SECRET }],
  ['slack', { type: 'slack', url: `${receiver.url}${path('slack')}` }],
  ['removable', { type: 'webhook', url: `${receiver.url}${path('removable')}`, secret: SECRET }],
]);
/** Short waits between attempts, so a few 5xx take a second, not a minute. */
const FAST_BACKOFF = { initialIntervalMs: 100, backoffCoefficient: 2, maximumIntervalMs: 1_000 };
const suite = await startSimulatedSuite('notify', {
  activities: { notify: { targets: fixedNotifyTargets(targets), retryForMs: 60_000, backoff: FAST_BACKOFF } },
});
const { env, sim, project, startJob } = suite;

/** Every byte of a history as the server keeps it: payloads are raw JSON in the protobuf, not base64. */
async function historyBytes(handle: WorkflowHandle): Promise<Buffer> {
  const history = await handle.fetchHistory();
  return Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
}

/** The notification child of an agent-job workflow. */
function notificationOf(firstExecutionRunId: string): WorkflowHandle {
  return env.client.workflow.getHandle(jobEndNotificationId(firstExecutionRunId));
}

/** The requests to target `name` about `workflowId` so far. */
function noticesOf(name: string, workflowId: string) {
  return receiver.to(path(name)).filter((r) => r.body.includes(workflowId));
}

/** The requests to target `name` about `workflowId`, once one was answered 200. */
async function deliveredTo(name: string, workflowId: string) {
  return waitFor(
    () => {
      const requests = noticesOf(name, workflowId);
      return requests.some((r) => r.answered === 200) ? requests : null;
    },
    { what: `a notice of ${workflowId} at ${name}`, timeoutMs: 30_000 },
  );
}

/** Neither the URL marker nor the secret is in the history of `handle`; the target's name is (the check reads it). */
async function assertNoTargetSecrets(handle: WorkflowHandle, name: string): Promise<void> {
  const bytes = await historyBytes(handle);
  assert.notEqual(bytes.indexOf(JSON.stringify(name)), -1, `the history names target ${name}: it was read`);
  assert.equal(bytes.indexOf(MARKER), -1, 'the target URL is in no history event');
  assert.equal(bytes.indexOf(SECRET), -1, 'the target secret is in no history event');
}

test('a completed job: the notice reaches the webhook, signed, with the result, and the URL is in no history', async () => {
  const handle = await startJob({
    projectId: project({ outcome: 'pr' }),
    prompt: 'Add a page',
    poll: FAST_POLL,
    notify: 'hook',
  });
  const result = await handle.result();
  const [request] = await deliveredTo('hook', handle.workflowId);
  const notice = verifiedNotice(request!, SECRET);
  assert.equal(notice.type, 'agent-job.ended');
  assert.equal(notice.outcome, 'completed');
  assert.equal(notice.workflowId, handle.workflowId);
  assert.equal(notice.deliveryId, handle.firstExecutionRunId);
  assert.equal(notice.prLink, result.prLink);
  assert.match(notice.prLink ?? '', /^https:\/\/github\.com\//);
  assert.deepEqual(notice.job, result.job);
  assert.equal(notice.failure, null);
  const child = notificationOf(handle.firstExecutionRunId);
  const delivered = (await child.result()) as JobEndNotificationResult;
  assert.deepEqual(delivered, { deliveryId: handle.firstExecutionRunId, status: 200 });
  await assertNoTargetSecrets(handle, 'hook');
  await assertNoTargetSecrets(child, 'hook');
  await captureHistory(env, handle, 'notify-completed');
  await captureHistory(env, child, 'notify-delivered');
});

test('a failed job and a timed-out one: each notice names its outcome and the failure', async () => {
  const failed = await startJob({
    projectId: project({ outcome: 'failed' }),
    prompt: 'Fail',
    poll: FAST_POLL,
    notify: 'hook',
  });
  const timedOut = await startJob({
    projectId: project({ durationMs: 600_000 }),
    prompt: 'Take long',
    poll: { initialInterval: 200 },
    timeout: '2s',
    notify: 'hook',
  });
  assert.equal((await workflowFailure(failed)).type, FailureType.AgentJobFailed);
  assert.equal((await workflowFailure(timedOut)).type, FailureType.AgentJobTimedOut);
  const failedNotice = verifiedNotice((await deliveredTo('hook', failed.workflowId))[0]!, SECRET);
  assert.equal(failedNotice.outcome, 'failed');
  assert.equal(failedNotice.failure?.type, FailureType.AgentJobFailed);
  assert.equal(failedNotice.job?.status, 'failed');
  const timedOutNotice = verifiedNotice((await deliveredTo('hook', timedOut.workflowId))[0]!, SECRET);
  assert.equal(timedOutNotice.outcome, 'timed-out');
  assert.equal(timedOutNotice.failure?.type, FailureType.AgentJobTimedOut);
  assert.equal(timedOutNotice.job?.status, 'active');
  await captureHistory(env, failed, 'notify-failed');
});

test('a cancelled workflow still sends its notice', async () => {
  const handle = await startJob({
    projectId: project({ durationMs: 600_000 }),
    prompt: 'Cancel me',
    poll: FAST_POLL,
    notify: 'hook',
  });
  await waitFor(async () => (await handle.query(statusQuery)).jobId, {
    what: 'the job ID',
  });
  await handle.cancel();
  await assert.rejects(handle.result(), WorkflowFailedError);
  const notice = verifiedNotice((await deliveredTo('hook', handle.workflowId))[0]!, SECRET);
  assert.equal(notice.outcome, 'cancelled');
  assert.equal(notice.failure?.type, 'Cancelled');
});

test('a receiver that answers 5xx three times gets the same delivery ID each time, and one notice is delivered', async () => {
  receiver.answer(path('flaky'), [503, 500, 502]);
  const handle = await startJob({
    projectId: project({ outcome: 'pr' }),
    prompt: 'Retry me',
    poll: FAST_POLL,
    notify: 'flaky',
  });
  await handle.result();
  assert.deepEqual(await notificationOf(handle.firstExecutionRunId).result(), {
    deliveryId: handle.firstExecutionRunId,
    status: 200,
  });
  // Read once the notification has ended: a notice sent again after the 200 would be here.
  const requests = noticesOf('flaky', handle.workflowId);
  assert.deepEqual(
    requests.map((r) => r.answered),
    [503, 500, 502, 200],
  );
  const notices = requests.map((r) => verifiedNotice(r, SECRET));
  const ids = new Set(requests.map((r) => r.headers['x-agent-job-delivery']));
  assert.deepEqual([...ids], [handle.firstExecutionRunId], 'one delivery ID across the attempts');
  assert.ok(notices.every((n) => n.deliveryId === handle.firstExecutionRunId));
  await captureHistory(env, notificationOf(handle.firstExecutionRunId), 'notify-delivered-after-5xx');
});

test('across a worker restart mid-delivery the delivery ID stays the same, and one notice is delivered', async () => {
  const taskQueue = uniqueId('notify-restart');
  const notify = {
    targets: fixedNotifyTargets(
      new Map([['restart', { type: 'webhook', url: `${receiver.url}${path('restart')}`, secret: SECRET }]]),
    ),
    retryForMs: 60_000,
    backoff: { initialIntervalMs: 200, backoffCoefficient: 1, maximumIntervalMs: 200 },
  } as const;
  receiver.answer(
    path('restart'),
    Array.from({ length: 1_000 }, () => 503),
  );
  const first = await suite.startWorker({ notify }, { taskQueue });
  const handle = await startJob(
    { projectId: project({ outcome: 'pr' }), prompt: 'Restart me', poll: FAST_POLL, notify: 'restart' },
    { taskQueue },
  );
  await handle.result();
  await waitFor(() => receiver.to(path('restart')).length >= 2, { what: 'two attempts on the first worker' });
  first.worker.shutdown();
  await waitFor(() => first.worker.getState() === 'STOPPED', { what: 'the first worker to stop' });
  receiver.answer(path('restart'), []);
  await suite.startWorker({ notify }, { taskQueue });
  await notificationOf(handle.firstExecutionRunId).result();
  const requests = noticesOf('restart', handle.workflowId);
  assert.ok(requests.length >= 3, `attempts: ${requests.length}`);
  assert.equal(requests.filter((r) => r.answered === 200).length, 1, 'one notice delivered');
  const ids = new Set(requests.map((r) => verifiedNotice(r, SECRET).deliveryId));
  assert.deepEqual([...ids], [handle.firstExecutionRunId]);
});

test('a receiver that refuses the notice (404) is not tried again: the notification fails at once', async () => {
  receiver.answer(path('refusing'), [404, 404, 404]);
  const handle = await startJob({
    projectId: project({ outcome: 'pr' }),
    prompt: 'Refused',
    poll: FAST_POLL,
    notify: 'refusing',
  });
  await handle.result();
  const failure = await workflowFailure(notificationOf(handle.firstExecutionRunId));
  assert.equal(failure.type, FailureType.NoticeUndelivered);
  assert.match(failure.message, /target "refusing" refused the notice: HTTP 404/);
  assert.equal(receiver.to(path('refusing')).length, 1, 'one attempt');
});

test('a Slack target gets a Slack message: text with the pull request link, values as plain text', async () => {
  const handle = await startJob({
    projectId: project({ outcome: 'pr' }),
    prompt: 'Slack me',
    poll: FAST_POLL,
    notify: 'slack',
  });
  const result = await handle.result();
  const [request] = await deliveredTo('slack', handle.workflowId);
  const message = JSON.parse(request!.body) as {
    text: string;
    blocks: { type: string; fields?: { type: string; text: string }[] }[];
  };
  assert.match(message.text, /^Agent job completed in project /);
  assert.ok(message.text.includes(`<${result.prLink}|Pull request>`), message.text);
  const fields = message.blocks[0]?.fields ?? [];
  assert.ok(fields.every((f) => f.type === 'plain_text'));
  assert.ok(fields.some((f) => f.text === `Workflow: ${handle.workflowId}`));
  assert.equal(
    request!.headers['x-agent-job-signature'],
    undefined,
    'Slack requests are not signed: the URL is the secret',
  );
});

test('an unknown target is refused before any create or read, on a create and on an attach', async () => {
  const projectId = project({ outcome: 'pr' });
  const created = await startJob({ projectId, prompt: 'Never', poll: FAST_POLL, notify: 'nope' });
  const failure = await workflowFailure(created);
  assert.equal(failure.type, FailureType.UnknownNotifyTarget);
  assert.match(failure.message, /Notification target "nope" is unknown/);
  assert.equal(createdJobs(sim, projectId), 0, 'no agent job was created');
  assert.equal(requestsTo(sim, projectId, 'create'), 0, 'no create was sent');
  const job = await suite.completedJob(projectId);
  const reads = requestsTo(sim, projectId, 'get');
  const attached = await startJob({ projectId, jobId: job.id, notify: 'nope' });
  assert.equal((await workflowFailure(attached)).type, FailureType.UnknownNotifyTarget);
  assert.equal(requestsTo(sim, projectId, 'get'), reads, 'the job was not read');
  assert.equal(createdJobs(sim, projectId), 1, 'only the job made outside the workflow');
});

test('a target removed while the job runs: the job ends as usual, its notification fails UnknownNotifyTarget', async () => {
  const handle = await startJob({
    projectId: project({ durationMs: 1_500, outcome: 'pr' }),
    prompt: 'Outlive the target',
    poll: FAST_POLL,
    notify: 'removable',
  });
  await waitFor(async () => (await handle.query(statusQuery)).jobId, { what: 'the job ID' });
  targets.delete('removable');
  await handle.result();
  const failure = await workflowFailure(notificationOf(handle.firstExecutionRunId));
  assert.equal(failure.type, FailureType.UnknownNotifyTarget);
  assert.match(failure.message, /removed after the job started/);
  assert.equal(receiver.to(path('removable')).length, 0);
});

test('a name that is not a target name fails the input check', async () => {
  const handle = await startJob({ projectId: project(), prompt: 'Bad name', notify: 'no spaces allowed' });
  const failure = await workflowFailure(handle);
  assert.equal(failure.type, FailureType.InvalidInput);
  assert.match(failure.message, /notify: "no spaces allowed" is not a target name/);
});

test('a receiver down past the bound ends the notification with a clear failure, long after the job returned', async () => {
  const [closedPort] = await freePorts(1);
  const downUrl = `http://127.0.0.1:${closedPort}${path('down')}`;
  const worker = await suite.startWorker({
    notify: {
      targets: fixedNotifyTargets(new Map([['down', { type: 'webhook', url: downUrl, secret: SECRET }]])),
      retryForMs: 3_000,
      backoff: FAST_BACKOFF,
    },
  });
  const handle = await startJob(
    { projectId: project({ outcome: 'pr' }), prompt: 'Nobody listens', poll: FAST_POLL, notify: 'down' },
    { taskQueue: worker.taskQueue },
  );
  const result = await handle.result();
  assert.match(result.prLink ?? '', /^https:\/\//);
  const jobClosed = (await handle.describe()).closeTime;
  const child = notificationOf(handle.firstExecutionRunId);
  const failure = await workflowFailure(child);
  const childClosed = (await child.describe()).closeTime;
  assert.ok(
    jobClosed && childClosed && childClosed.getTime() - jobClosed.getTime() >= 1_000,
    'the job returned first',
  );
  assert.equal(failure.type, FailureType.NoticeUndelivered);
  assert.match(failure.message, /target "down" did not take the notice (of workflow \S+ )?within 3s/);
  assert.match(failure.message, /connection refused \(ECONNREFUSED\)|The worker logged each attempt/);
  for (const text of [failure.message, JSON.stringify(failure.details), String(failure.cause?.message)]) {
    assert.ok(!text.includes(MARKER) && !text.includes(String(closedPort)), `no URL in: ${text}`);
  }
  await assertNoTargetSecrets(child, 'down');
  assert.ok(failure instanceof ApplicationFailure);
});
