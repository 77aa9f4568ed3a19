/**
 * What the project quota must never lose or let break, against a real Temporal server, real
 * workers and the simulator: grants across continue-as-new, a take whose answer was lost, the
 * release a job sends just before it closes, the quota workflow under malformed messages, and the
 * takes a full queue turns away.
 * Every test has its own project (so its own quota workflow) and its own simulator.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType, statusQuery } from '../../src/contract.js';
import {
  PROJECT_QUOTA_WORKFLOW_TYPE,
  projectQuotaWorkflowId,
  quotaTakeUpdate,
  type QuotaLimit,
} from '../../src/quota/messages.js';
import { quotaStatusQuery } from '../../src/workflows/project-quota/state.js';
import { MAX_RETRY_AFTER_MS, RETRY_JITTER } from '../../src/failure-policy/backoff.js';
import type { projectQuota } from '../../src/workflows/index.js';
import { quotaWorkflow, startQuotaJob, startQuotaSetup, waitFor, type QuotaSetup } from '../harness.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const API_KEY = `quota-delivery-key-${randomUUID()}`;
interface Setup extends QuotaSetup {
  limit: QuotaLimit;
}

/** A simulator whose budget is the worker's quota, and a worker with that quota. */
async function setUp(limit: QuotaLimit, leaseMs = 60_000): Promise<Setup> {
  const setup = await startQuotaSetup({
    apiKey: API_KEY,
    real: limit,
    limit,
    leaseMs,
    prefix: 'docs-quota-delivery',
  });
  return { ...setup, limit };
}

/** Starts the project's quota workflow before any job asks, with settings only its input can set. */
async function startQuota(setup: Setup, tuning: { eventsPerRun?: number; maxQueue?: number }) {
  return setup.env.client.workflow.start<typeof projectQuota>(PROJECT_QUOTA_WORKFLOW_TYPE, {
    taskQueue: setup.taskQueue,
    workflowId: projectQuotaWorkflowId(setup.projectId),
    args: [{ projectId: setup.projectId, limit: setup.limit, ...tuning }],
  });
}

/** The runs of the quota workflow's chain, first to current, by following continue-as-new. */
async function runsOf(setup: Setup, firstRunId: string): Promise<number> {
  let runs = 1;
  for (let runId = firstRunId; ; runs++) {
    const handle = setup.env.client.workflow.getHandle(projectQuotaWorkflowId(setup.projectId), runId);
    const { events } = await handle.fetchHistory();
    const next = events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
    if (!next) return runs;
    runId = next;
  }
}

/** Holds the project's only use: it creates its agent job, then polls once an hour. */
async function holdTheBudget(setup: Setup) {
  const holder = await startQuotaJob(setup, 'Holds the budget', { poll: { initialInterval: '1h' } });
  await waitFor(async () => (await holder.query(statusQuery)).jobId, {
    what: 'the holder to create its job',
  });
  return holder;
}

describe('project quota deliveries', { concurrency: 2 }, () => {
  test('a busy project whose quota workflow continues as new while granting: every job is created', async () => {
    const N = 16;
    // A budget of 4 per 2 s: 12 of the jobs queue, and their grants go out across runs of 20
    // events (the fewest a run takes: a handful of takes and grants), so passes that continue as
    // new are ones with grants owed.
    const setup = await setUp({ uses: 4, windowMs: 2_000 });
    const quota = await startQuota(setup, { eventsPerRun: 20 });
    const handles = [];
    for (let i = 0; i < N; i++) {
      handles.push(await startQuotaJob(setup, `Busy job ${i}`, { timeout: '60s' }));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const results = await Promise.all(handles.map((h) => h.result()));
    for (const result of results) assert.equal(result.status, 'completed');
    assert.equal(createdJobs(setup.sim, setup.projectId), N, 'one agent job per workflow');
    const runs = await runsOf(setup, quota.firstExecutionRunId);
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    process.stdout.write(
      `# quota continue-as-new: ${N} jobs over ${runs} runs; ${JSON.stringify(status.totals)}\n`,
    );
    assert.ok(runs >= 3, `the quota workflow ran ${runs} runs`);
    assert.equal(status.totals.taken, N);
    assert.ok(status.totals.granted >= N / 2, `granted ${status.totals.granted}`);
    assert.equal(status.totals.granted, status.totals.queued, 'every queued take was granted');
    await quota.terminate('test over');
  });

  test('a take whose answer was lost, taken again by the same run: one use, counted once; by another run: used before', async () => {
    const setup = await setUp({ uses: 2, windowMs: 60_000 });
    const quota = await startQuota(setup, {});
    // What a create activity does when the take's answer never reaches it (its 15 s ran out, or
    // the answer came after its margin): the quota took the use, the activity sent nothing, and the
    // workflow runs the call again under the same request ID. The test is that activity.
    const take = {
      requestId: 'lost/create-0-1',
      workflowId: 'lost',
      kind: 'create' as const,
      limit: setup.limit,
      leaseMs: 60_000,
      runId: 'run-of-lost',
    };
    assert.equal((await quota.executeUpdate(quotaTakeUpdate, { args: [take] })).outcome, 'granted');
    assert.equal((await quota.executeUpdate(quotaTakeUpdate, { args: [take] })).outcome, 'granted');
    const reset = await quota.executeUpdate(quotaTakeUpdate, {
      args: [{ ...take, runId: 'run-after-reset' }],
    });
    assert.equal(reset.outcome, 'used-before', 'a reset run, whose past may have sent the call');
    const status = await quota.query(quotaStatusQuery);
    assert.deepEqual(
      { ...status.totals, usesInWindow: status.usesInWindow },
      { taken: 1, queued: 0, granted: 0, refused: 0, released: 0, expired: 0, declined: 0, usesInWindow: 1 },
    );
    await quota.terminate('test over');
  });

  test('a job that reaches its deadline while queued leaves the queue', async () => {
    const setup = await setUp({ uses: 1, windowMs: 60_000 });
    const holder = await holdTheBudget(setup);
    const late = await startQuotaJob(setup, 'Gives up in the queue', { timeout: '4s' });
    const err = await late.result().then(
      () => assert.fail('the job should reach its deadline'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure, String(err));
    assert.equal(err.cause.type, FailureType.AgentJobTimedOut);
    // What the job shows at its end: timed out, no longer in a queue.
    const progress = await late.query(statusQuery);
    assert.equal(progress.phase, 'timed-out');
    assert.equal(progress.queue, null, `a place in a queue it left: ${JSON.stringify(progress.queue)}`);
    // The release left before the run closed: the quota drops the request at once.
    const status = await waitFor(
      async () => {
        const s = await quotaWorkflow(setup).query(quotaStatusQuery);
        return s.totals.released === 1 ? s : null;
      },
      { what: 'the release to reach the quota', timeoutMs: 10_000 },
    );
    assert.equal(status.queueLength, 0);
    assert.equal(requestsTo(setup.sim, setup.projectId, 'create'), 1, 'only the holder created');
    await holder.terminate('test over');
    await quotaWorkflow(setup).terminate('test over');
  });

  test('a create the API refuses as invalid stays counted when the job fails', async () => {
    const setup = await setUp({ uses: 2, windowMs: 60_000 });
    setup.sim.setScenario(setup.projectId, {
      durationMs: 300,
      faults: { rules: [{ endpoint: 'create', kind: 'status', status: 422 }] },
    });
    const job = await startQuotaJob(setup, 'Refused as invalid');
    const err = await job.result().then(
      () => assert.fail('the job should fail'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure, String(err));
    assert.equal(err.cause.type, FailureType.InvalidRequest);
    // The take counted the use (the API counted the request): it stays in the window.
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    assert.equal(status.totals.taken, 1);
    assert.deepEqual(status.leases, []);
    assert.equal(status.usesInWindow, 1);
    await quotaWorkflow(setup).terminate('test over');
  });

  test('malformed and absurd messages leave the quota workflow working', async () => {
    const limit = { uses: 1, windowMs: 60_000 };
    const setup = await setUp(limit);
    const holder = await holdTheBudget(setup);
    const quota = quotaWorkflow(setup);
    const valid = { workflowId: holder.workflowId, kind: 'create', limit, leaseMs: 60_000, runId: 'r' };
    const before = Date.now();
    // A 429 whose Retry-After is absurd: the pause is capped as every retry's is.
    const absurd = await quota.executeUpdate(quotaTakeUpdate, {
      args: [
        {
          ...valid,
          kind: 'create',
          requestId: `${holder.workflowId}/absurd.2`,
          refused: { requestId: `${holder.workflowId}/absurd`, retryAfterMs: 1e20 },
        },
      ],
    });
    assert.equal(absurd.outcome, 'queued');
    // Malformed takes are rejected by the validator: no event, no change.
    for (const body of [
      null,
      'create',
      { requestId: 42 },
      { ...valid, requestId: `${holder.workflowId}/odd-1`, limit: { uses: 'many', windowMs: 1 } },
      { ...valid, requestId: `${holder.workflowId}/odd-2`, kind: 'delete' },
      { ...valid, requestId: `${holder.workflowId}/odd-3`, leaseMs: Number.NaN },
      { ...valid, requestId: 'x'.repeat(5_000) },
      { ...valid, requestId: 'elsewhere/odd-4' },
      { ...valid, requestId: `${holder.workflowId}/odd-5`, refused: { requestId: 9, retryAfterMs: 'soon' } },
    ]) {
      await assert.rejects(
        quota.executeUpdate('quotaTake', { args: [body] }),
        WorkflowUpdateFailedError,
        JSON.stringify(body)?.slice(0, 80),
      );
    }
    await quota.signal('quotaRelease', {});
    await quota.signal('quotaRelease', null);
    // A take with absurd numbers is clamped, not refused: the queue takes it.
    const clamped = await quota.executeUpdate('quotaTake', {
      args: [
        {
          ...valid,
          requestId: `${holder.workflowId}/probe`,
          limit: { uses: 1e300, windowMs: 1e300 },
          leaseMs: -1,
        },
      ],
    });
    assert.equal((clamped as { outcome: string }).outcome, 'queued');
    const status = await quota.query(quotaStatusQuery);
    assert.deepEqual(
      status.queueHead.map((e) => e.requestId),
      [`${holder.workflowId}/absurd.2`, `${holder.workflowId}/probe`],
    );
    assert.ok(status.pausedUntil !== null, 'the 429 paused the project');
    const pausedMs = Date.parse(status.pausedUntil) - before;
    assert.ok(
      pausedMs <= MAX_RETRY_AFTER_MS * (1 + RETRY_JITTER) + 5_000,
      `paused for ${pausedMs}ms, beyond the cap`,
    );
    const events = (await quota.fetchHistory()).events ?? [];
    assert.equal(
      events.filter((e) => e.workflowTaskFailedEventAttributes).length,
      0,
      'no workflow task of the quota workflow failed',
    );
    assert.equal(
      events.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes).length,
      3,
      "only the well-formed takes were accepted: the holder's create's, the 429's, the clamped one",
    );
    await quota.terminate('test over');
    await holder.terminate('test over');
  });

  test('a full queue declines; the declined jobs ask again until each is created', async () => {
    const N = 6;
    const setup = await setUp({ uses: 1, windowMs: 2_000 });
    await startQuota(setup, { maxQueue: 2 });
    const handles = await Promise.all(
      Array.from({ length: N }, (_, i) => startQuotaJob(setup, `Turned away ${i}`, { timeout: '2m' })),
    );
    const results = await Promise.all(handles.map((h) => h.result()));
    for (const result of results) assert.equal(result.status, 'completed');
    assert.equal(createdJobs(setup.sim, setup.projectId), N, 'one agent job per workflow');
    assert.equal(setup.sim.stats().requestsPerStatus['429'] ?? 0, 0, 'no 429');
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    process.stdout.write(`# quota queue cap 2: ${N} jobs; ${JSON.stringify(status.totals)}\n`);
    assert.ok(status.totals.declined >= N - 3, `declined ${status.totals.declined}`);
    assert.equal(status.totals.taken, N);
    await quotaWorkflow(setup).terminate('test over');
  });
});
