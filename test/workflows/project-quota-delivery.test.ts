/**
 * What the project quota must never lose or let break, against a real Temporal server, real
 * workers and the simulator: grants across continue-as-new, the signals a job sends just before it
 * closes, the quota workflow under malformed signals, and the requests a full queue turns away.
 * Every test has its own project (so its own quota workflow) and its own simulator.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { FailureType, statusQuery } from '../../src/contract.js';
import {
  PROJECT_QUOTA_WORKFLOW_TYPE,
  projectQuotaWorkflowId,
  quotaStatusQuery,
  quotaTakeUpdate,
  type QuotaLimit,
} from '../../src/quota/messages.js';
import { MAX_RETRY_AFTER_MS, RETRY_JITTER } from '../../src/agent-api/failure-policy.js';
import type { projectQuotaWorkflow } from '../../src/workflows/index.js';
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
  return setup.env.client.workflow.start<typeof projectQuotaWorkflow>(PROJECT_QUOTA_WORKFLOW_TYPE, {
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
    const N = 20;
    // A budget above the jobs: each request is granted as it arrives, so the pass that continues
    // as new (every 20 events, the fewest a run takes: a handful of takes or requests) is one that
    // grants too. Not 40: with one timer armed a take adds no timer events, and 20 jobs then fill
    // 40-event runs only twice.
    const setup = await setUp({ uses: 100, windowMs: 60_000 });
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
    assert.equal(status.totals.granted, N);
    await quota.terminate('test over');
  });

  test("a take whose answer was lost, then the same run's request for it: one use, counted once", async () => {
    const setup = await setUp({ uses: 2, windowMs: 60_000 });
    const quota = await startQuota(setup, {});
    // What a create activity does when the take's answer never reaches it (its 15 s ran out, or
    // the answer came after its margin): the quota took the use, the activity sent nothing, and the
    // workflow queues under the same request ID. The test is that activity, and drops the answer.
    const take = {
      requestId: 'lost/create-0-1',
      kind: 'create' as const,
      limit: setup.limit,
      runId: 'run-of-lost',
    };
    const answer = await quota.executeUpdate(quotaTakeUpdate, { args: [take] });
    assert.equal(answer.outcome, 'granted');
    // Its grant goes to a workflow that is not running, so the grant gives its use back at once.
    await quota.signal('quotaRequest', {
      ...take,
      workflowId: `gone-${randomUUID()}`,
      leaseMs: 60_000,
    });
    const status = await waitFor(
      async () => {
        const s = await quota.query(quotaStatusQuery);
        return s.totals.released + s.totals.declined > 0 ? s : null;
      },
      { what: 'the request to be granted or declined', timeoutMs: 10_000 },
    );
    // Before the fix: declined "used-before" (the workflow then asks under a new ID for a second
    // use) with the taken use still in the window.
    assert.deepEqual(
      { ...status.totals, usesInWindow: status.usesInWindow },
      { granted: 1, spent: 0, taken: 0, refused: 0, released: 1, expired: 0, declined: 0, usesInWindow: 0 },
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

  test('a create the API refuses as invalid is counted as spent before the job fails', async () => {
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
    // The use was spent (the API counted the request): it stays in the window, no lease is left.
    const status = await waitFor(
      async () => {
        const s = await quotaWorkflow(setup).query(quotaStatusQuery);
        return s.totals.spent === 1 ? s : null;
      },
      { what: 'the spent signal to reach the quota', timeoutMs: 10_000 },
    );
    assert.deepEqual(status.leases, []);
    assert.equal(status.usesInWindow, 1);
    await quotaWorkflow(setup).terminate('test over');
  });

  test('malformed and absurd signals leave the quota workflow working', async () => {
    const limit = { uses: 1, windowMs: 60_000 };
    const setup = await setUp(limit);
    const holder = await holdTheBudget(setup);
    const quota = quotaWorkflow(setup);
    const valid = { workflowId: holder.workflowId, kind: 'create', limit, leaseMs: 60_000 };
    const before = Date.now();
    // A 429 whose Retry-After is absurd: the pause is capped as every retry's is.
    await quota.signal('quotaRequest', {
      ...valid,
      requestId: 'absurd/create-0-1.2',
      refused: { requestId: 'absurd/create-0-1', retryAfterMs: 1e20 },
    });
    for (const body of [
      null,
      'create',
      { requestId: 42 },
      { ...valid, requestId: 'odd/1', limit: { uses: 'many', windowMs: 1 } },
      { ...valid, requestId: 'odd/2', kind: 'delete' },
      { ...valid, requestId: 'odd/3', leaseMs: Number.NaN },
      { ...valid, requestId: 'x'.repeat(5_000) },
      { ...valid, requestId: 'odd/4', refused: { requestId: 9, retryAfterMs: 'soon' } },
    ]) {
      await quota.signal('quotaRequest', body);
    }
    await quota.signal('quotaSpent', { requestId: 7, at: 'yesterday' });
    await quota.signal('quotaSpent', null);
    await quota.signal('quotaRelease', {});
    // A request with absurd numbers is clamped, not dropped: the queue takes it.
    await quota.signal('quotaRequest', {
      ...valid,
      requestId: 'probe/create-0-1',
      limit: { uses: 1e300, windowMs: 1e300 },
      leaseMs: -1,
    });
    const status = await waitFor(
      async () => {
        const s = await quota.query(quotaStatusQuery);
        return s.queueLength === 2 ? s : null;
      },
      { what: 'the quota to queue the two well-formed requests', timeoutMs: 10_000 },
    );
    assert.deepEqual(
      status.queueHead.map((e) => e.requestId),
      ['absurd/create-0-1.2', 'probe/create-0-1'],
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
    assert.equal(status.totals.granted, N);
    await quotaWorkflow(setup).terminate('test over');
  });
});
