/**
 * The project quota against a real Temporal server, real workers and the real simulator over HTTP,
 * with short budgets (a few uses per few seconds) so each test takes seconds. Every test has its own
 * project (so its own quota workflow) and its own simulator (so its 429 counts are its own).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import {
  WithStartWorkflowOperation,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type WorkflowHandle,
} from '@temporalio/client';
import { CancelledFailure, defaultPayloadConverter } from '@temporalio/common';
import { SearchAttributes, sendMessageUpdate, statusQuery, type AgentJobResult } from '../../src/contract.js';
import {
  PROJECT_QUOTA_WORKFLOW_TYPE,
  projectQuotaWorkflowId,
  quotaTakeUpdate,
  type QuotaLimit,
} from '../../src/quota/messages.js';
import { quotaStatusQuery } from '../../src/workflows/project-quota/state.js';
import type { RunningSimulator } from '../../src/simulator/index.js';
import type { agentJobWorkflow, projectQuota } from '../../src/workflows/index.js';
import {
  activitiesFor,
  QUOTA_TEST_POLL,
  quotaWorkflow,
  spawnTs,
  startTestWorker,
  startQuotaJob,
  startQuotaSetup,
  waitFor,
  type QuotaSetup,
} from '../harness.js';
import { captureHistory } from '../capture-history.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';
import { edgeMarginMs } from '../../src/workflows/project-quota/state.js';

const API_KEY = `quota-test-key-${randomUUID()}`;
const JOB_MS = 500;
type Setup = QuotaSetup;

/** The lease of the tests' grants: also how often a queued job takes again without a grant. */
const LEASE_MS = 10_000;

/** A simulator with the API's real budget, and a worker whose quota is `configured`. */
function setUp(
  real: { uses: number; windowSeconds: number },
  configured: QuotaLimit,
  leaseMs = LEASE_MS,
): Promise<Setup> {
  return startQuotaSetup({
    apiKey: API_KEY,
    real: { uses: real.uses, windowMs: real.windowSeconds * 1000 },
    limit: configured,
    leaseMs,
    prefix: 'docs-quota',
    jobMs: JOB_MS,
  });
}

/**
 * Starts `count` jobs one after another, each once the quota workflow has heard the one before
 * (taken, queued or granted it), so arrival order at the quota is start order.
 */
async function startInOrder(setup: Setup, count: number) {
  const handles: WorkflowHandle<typeof agentJobWorkflow>[] = [];
  const arrivals: number[] = [];
  for (let i = 0; i < count; i++) {
    const handle = await startQuotaJob(setup, `Quota job ${i}`);
    await waitFor(
      async () => {
        const status = await quotaWorkflow(setup).query(quotaStatusQuery);
        return status.totals.taken + status.queueLength + status.leases.length >= i + 1;
      },
      { what: `job ${i} to reach the quota`, intervalMs: 20 },
    );
    arrivals.push(Date.now());
    handles.push(handle);
  }
  return Object.assign(handles, { arrivals });
}

/** The workflow IDs the quota workflow signalled grants to, in order, from its history. */
async function grantOrder(setup: Setup): Promise<string[]> {
  const history = await quotaWorkflow(setup).fetchHistory();
  return (history.events ?? [])
    .map((event) => event.signalExternalWorkflowExecutionInitiatedEventAttributes)
    .filter((attributes) => attributes?.signalName === 'quotaGrant')
    .map((attributes) => attributes?.workflowExecution?.workflowId ?? '');
}

/** Takes a use from the project's quota workflow, as the create activity does (it queues when busy). */
function take(
  setup: Setup,
  body: { requestId: string; workflowId: string; limit: QuotaLimit; leaseMs: number },
) {
  return setup.env.client.workflow.executeUpdateWithStart(quotaTakeUpdate, {
    args: [{ ...body, kind: 'create', runId: 'test' }],
    startWorkflowOperation: new WithStartWorkflowOperation<typeof projectQuota>(PROJECT_QUOTA_WORKFLOW_TYPE, {
      workflowId: projectQuotaWorkflowId(setup.projectId),
      taskQueue: setup.taskQueue,
      args: [{ projectId: setup.projectId, limit: body.limit }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    }),
  });
}

type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;

/**
 * Everything in a job's history that the quota's queue writes: a call that failed with
 * `ProjectQuotaQueue` (queued, nothing sent), the quota's signals either way, a timer without a
 * summary (the requester's wait; every timer of the job's own carries one) and the `queued` status.
 * A take granted at once writes none of these.
 */
function quotaTraces(history: History): string[] {
  const traces: string[] = [];
  for (const event of history.events ?? []) {
    const failure = event.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type;
    if (failure === 'ProjectQuotaQueue') traces.push('queued by a take');
    const received = event.workflowExecutionSignaledEventAttributes?.signalName;
    if (received?.startsWith('quota')) traces.push(`signal ${received}`);
    const sent = event.signalExternalWorkflowExecutionInitiatedEventAttributes?.signalName;
    if (sent?.startsWith('quota')) traces.push(`sent ${sent}`);
    if (event.timerStartedEventAttributes && !event.userMetadata?.summary) {
      traces.push(`timer ${String(event.eventId)} without a summary`);
    }
    const status =
      event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields?.[
        SearchAttributes.status.name
      ];
    if (status && defaultPayloadConverter.fromPayload(status) === 'queued') traces.push('status queued');
  }
  return traces;
}

/** The request IDs of the takes the quota workflow accepted, in order, from its history. */
async function acceptedTakes(setup: Setup): Promise<string[]> {
  const history = await quotaWorkflow(setup).fetchHistory();
  return (history.events ?? [])
    .map((event) => event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input)
    .filter((input) => input?.name === quotaTakeUpdate.name)
    .map((input) => {
      const payload = input?.args?.payloads?.[0];
      return payload ? defaultPayloadConverter.fromPayload<{ requestId: string }>(payload).requestId : '';
    });
}

function refused(sim: RunningSimulator): number {
  return sim.stats().requestsPerStatus['429'] ?? 0;
}

describe('project quota', { concurrency: 2 }, () => {
  test('a job with room takes its uses at once: nothing of the quota in its history, each use counted in the window as one accepted update', async () => {
    const setup = await setUp({ uses: 10, windowSeconds: 60 }, { uses: 5, windowMs: 60_000 });
    // A turn long enough for a follow-up message to reach it while it runs.
    setup.sim.setScenario(setup.projectId, { durationMs: 2_000 });
    const job = await startQuotaJob(setup, 'Never waits');
    await waitFor(async () => (await job.query(statusQuery)).jobId, { what: 'the job to be created' });
    const record = await job.executeUpdate(sendMessageUpdate, { args: ['One more thing'] });
    assert.equal(record.status, 'active');
    const result = await job.result();
    assert.equal(result.status, 'completed');
    assert.equal(requestsTo(setup.sim, setup.projectId, 'create'), 1);
    assert.equal(requestsTo(setup.sim, setup.projectId, 'message'), 1);

    // The job's history: the create and the message, and nothing of the quota.
    assert.deepEqual(quotaTraces(await job.fetchHistory()), []);
    // The quota counted both, taken at once: in the window, nothing queued, no lease to confirm.
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    assert.deepEqual(
      { ...status.totals, usesInWindow: status.usesInWindow, queueLength: status.queueLength },
      {
        taken: 2,
        queued: 0,
        granted: 0,
        refused: 0,
        released: 0,
        expired: 0,
        declined: 0,
        usesInWindow: 2,
        queueLength: 0,
      },
    );
    assert.deepEqual(status.leases, []);
    // Each use is one accepted update in the quota workflow's history (one action), and no signal.
    const takes = await acceptedTakes(setup);
    assert.equal(takes.length, 2, JSON.stringify(takes));
    assert.ok(takes[0]?.startsWith(`${job.workflowId}/create-`), takes[0]);
    assert.ok(takes[1]?.startsWith(`${job.workflowId}/message-`), takes[1]);
    const quotaEvents = (await quotaWorkflow(setup).fetchHistory()).events ?? [];
    assert.deepEqual(
      quotaEvents.filter((e) => e.workflowExecutionSignaledEventAttributes),
      [],
      'no signal reached the quota workflow',
    );
    await quotaWorkflow(setup).terminate('test over');
  });

  test('quota off on the worker: the job sends at once, and no quota workflow is started for its project', async () => {
    const setup = await setUp({ uses: 10, windowSeconds: 60 }, { uses: 5, windowMs: 60_000 });
    const off = await startTestWorker(setup.env, activitiesFor(setup.sim, API_KEY));
    const job = await startQuotaJob({ ...setup, taskQueue: off.taskQueue }, 'No quota here');
    const result = await job.result();
    assert.equal(result.status, 'completed');
    assert.equal(createdJobs(setup.sim, setup.projectId), 1);
    assert.deepEqual(quotaTraces(await job.fetchHistory()), []);
    // No take reached a quota workflow: none was ever started for the project.
    await assert.rejects(quotaWorkflow(setup).describe(), WorkflowNotFoundError);
  });

  test('N jobs against a budget of K per W seconds without Retry-After: N creates, no 429, first come first served, on time', async () => {
    // A window of 15 s: each window loses the time from a grant to the API call and from the
    // answer back to the quota (up to a second on a busy machine), which 10 % of 4 s cannot hold.
    const [N, K, W] = [9, 3, 15];
    const setup = await setUp({ uses: K, windowSeconds: W }, { uses: K, windowMs: W * 1000 });
    const handles = await startInOrder(setup, N);

    // Visible while it waits: the last job is queued, with its place and the earliest start.
    const last = handles[N - 1] as WorkflowHandle<typeof agentJobWorkflow>;
    const progress = await waitFor(
      async () => {
        const p = await last.query(statusQuery);
        return p.phase === 'queued' ? p : null;
      },
      { what: `the last of ${N} jobs to show it waits for the budget` },
    );
    assert.ok(progress.queue, 'a queued job shows its place');
    assert.ok(
      progress.queue.position >= 1 && progress.queue.position <= N - K,
      `position ${progress.queue.position}`,
    );
    const startsIn = Date.parse(progress.queue.earliestStartAt) - Date.now();
    const lastWindowMs = (Math.ceil(N / K) - 1) * W * 1000;
    assert.ok(startsIn > 0 && startsIn <= lastWindowMs + 1_000, `starts in ${startsIn}ms`);
    const described = await last.describe();
    assert.equal(described.typedSearchAttributes.get(SearchAttributes.status), 'queued');

    let lastDoneAt = 0;
    const results: AgentJobResult[] = await Promise.all(
      handles.map((h) => h.result().finally(() => (lastDoneAt = Math.max(lastDoneAt, Date.now())))),
    );
    for (const result of results) assert.equal(result.status, 'completed');
    // Granted, the job no longer shows as queued.
    assert.equal((await last.describe()).typedSearchAttributes.get(SearchAttributes.status), undefined);
    assert.equal(requestsTo(setup.sim, setup.projectId, 'create'), N, 'exactly N create requests');
    assert.equal(createdJobs(setup.sim, setup.projectId), N);
    assert.equal(refused(setup.sim), 0, 'no 429');

    // First come, first served: the first K took their uses at once (no grant signal), the others
    // queued and were granted in start order, and no job of a later window was created before one
    // of an earlier window.
    const { totals } = await quotaWorkflow(setup).query(quotaStatusQuery);
    assert.deepEqual([totals.taken, totals.queued, totals.granted], [N, N - K, N - K]);
    assert.deepEqual(
      await grantOrder(setup),
      handles.slice(K).map((h) => h.workflowId),
    );
    // Each job's own history says the same: a taker's has nothing of the quota, a queued job's its
    // queued take (and one more per lease it waited without a grant) and its grant. No job started
    // while others waited took a use ahead of them.
    const createdOf = new Map(setup.sim.stats().jobs.map((job) => [job.id, job.createdAt]));
    for (const [i, handle] of handles.entries()) {
      const traces = quotaTraces(await handle.fetchHistory());
      if (i < K) assert.deepEqual(traces, [], `job ${i} took its use at once`);
      else {
        const waitedMs = (createdOf.get(results[i]?.job.id ?? '') ?? NaN) - (handles.arrivals[i] ?? NaN);
        const takes = traces.filter((t) => t === 'queued by a take').length;
        const most = 1 + Math.floor(waitedMs / LEASE_MS);
        assert.ok(
          takes >= 1 && takes <= most,
          `job ${i}: ${takes} queued takes in ${waitedMs} ms: ${traces.join()}`,
        );
        assert.ok(traces.includes('signal quotaGrant'), `job ${i}: ${traces.join()}`);
      }
    }
    const createdAt = new Map(setup.sim.stats().jobs.map((job) => [job.id, job.createdAt]));
    const times = results.map((r) => createdAt.get(r.job.id) as number);
    for (let i = 0; i < N; i++) {
      for (let j = 0; j < N; j++) {
        if (Math.floor(i / K) < Math.floor(j / K))
          assert.ok(times[i]! <= times[j]!, `job ${i} created before job ${j}`);
      }
    }

    // Ideal: each job created when it arrives or when the use of the job K places ahead has left
    // the window, whichever is later; seen done one job and one poll after. From the first arrival.
    const t0 = handles.arrivals[0] as number;
    const ideal: number[] = [];
    handles.arrivals.forEach((arrival, i) =>
      ideal.push(Math.max(arrival - t0, i >= K ? ideal[i - K]! + W * 1000 : 0)),
    );
    const idealMs = Math.max(...ideal) + JOB_MS + QUOTA_TEST_POLL.initialInterval;
    const lastDoneMs = lastDoneAt - t0;
    const offsets = times.map((t) => ((t - t0) / 1000).toFixed(2)).join(' ');
    // On time, measured at the simulator, one step at a time: each job is created once it has
    // arrived and the real create of the job K places ahead has left the window, plus what a grant
    // takes to become a create (the window edge, the grant signal, the job's workflow task, the
    // POST). A step's lateness does not carry into the next, so a loaded machine cannot add it up
    // across windows (the end-to-end figure, printed, also holds each job's run and its result's
    // trip to this client); a use granted a window late is W s late, three times the margin.
    const STEP_MARGIN_MS = (W * 1000) / 3;
    const late = times.map(
      (t, i) => t - Math.max(handles.arrivals[i] as number, i >= K ? (times[i - K] as number) + W * 1000 : 0),
    );
    process.stdout.write(
      `# quota FIFO: N=${N} K=${K} W=${W}s: ${N} creates, 0 429s, creates at ${offsets} s, ` +
        `each ${(Math.max(...late) / 1000).toFixed(2)}s late at most (margin ${STEP_MARGIN_MS / 1000}s); ` +
        `last job done at ${(lastDoneMs / 1000).toFixed(1)}s, ideal ${(idealMs / 1000).toFixed(1)}s ` +
        `(${((lastDoneMs / idealMs - 1) * 100).toFixed(1)}% over)\n`,
    );
    assert.ok(
      Math.max(...late) <= STEP_MARGIN_MS,
      `creates later than their use freed, ms: ${late.map((ms) => Math.round(ms)).join(' ')}`,
    );
    await captureHistory(setup.env, last, 'quota-queued-create');
    // A new name: quota-workflow*.json stay as the earlier builds' quota workflow made them, for replay.
    await captureHistory(setup.env, quotaWorkflow(setup), 'quota-one-way', {
      waitForClose: false,
    });
  });

  test('the API allows fewer uses than configured: about one 429 per window, every job completes', async () => {
    const [N, realK, configuredK, W] = [9, 3, 6, 4];
    const setup = await setUp({ uses: realK, windowSeconds: W }, { uses: configuredK, windowMs: W * 1000 });
    const startedAt = Date.now();
    const handles = await Promise.all(
      Array.from({ length: N }, (_, i) => startQuotaJob(setup, `Tight job ${i}`)),
    );
    const results = await Promise.all(handles.map((h) => h.result()));
    const elapsedMs = Date.now() - startedAt;
    for (const result of results) assert.equal(result.status, 'completed');
    assert.equal(createdJobs(setup.sim, setup.projectId), N, 'one agent job per workflow');
    const windows = Math.ceil(elapsedMs / (W * 1000));
    const refusals = refused(setup.sim);
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    process.stdout.write(
      `# quota learns: N=${N}, API ${realK}/${W}s, configured ${configuredK}/${W}s: ${refusals} 429s over ${windows} windows ` +
        `in ${(elapsedMs / 1000).toFixed(1)}s; learnt ${status.effectiveUses} uses per window\n`,
    );
    // The first burst finds the difference (configured − real); after that, at most one a window.
    assert.ok(refusals >= 1, 'the API did refuse some');
    assert.ok(refusals <= configuredK - realK + windows, `${refusals} 429s over ${windows} windows`);
    for (const handle of handles) {
      // A job refused once took again after the 429, under a new request ID.
      const events = (await handle.fetchHistory()).events ?? [];
      const refusedCall = events.some(
        (e) => e.activityTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type === 'RateLimited',
      );
      if (refusedCall) {
        await captureHistory(setup.env, handle, 'quota-refused-429');
        break;
      }
    }
  });

  test('a 429 for a use taken at once pauses the budget, the create queues at the head, and a job started meanwhile queues behind it', async () => {
    const setup = await setUp({ uses: 10, windowSeconds: 60 }, { uses: 5, windowMs: 60_000 });
    // The API refuses the first create, with a Retry-After: the budget has room, the API does not.
    setup.sim.setScenario(setup.projectId, {
      durationMs: JOB_MS,
      faults: {
        rules: [{ endpoint: 'create', kind: 'status', status: 429, first: 1, retryAfter: { seconds: 3 } }],
      },
    });
    const refusedJob = await startQuotaJob(setup, 'Refused once');
    const paused = await waitFor(
      async () => (await quotaWorkflow(setup).query(quotaStatusQuery)).pausedUntil,
      { what: 'the quota to pause after the 429', intervalMs: 20 },
    );
    // While it pauses the budget has room, but the refused create waits in the queue: a new job
    // must not take a use ahead of it.
    const later = await startQuotaJob(setup, 'Started during the pause');
    const [a, b] = await Promise.all([refusedJob.result(), later.result()]);
    assert.equal(a.status, 'completed');
    assert.equal(b.status, 'completed');
    assert.equal(
      requestsTo(setup.sim, setup.projectId, 'create'),
      3,
      'the refused create, its resend, the later job',
    );
    assert.equal(createdJobs(setup.sim, setup.projectId), 2, 'one agent job per workflow');
    assert.equal(refused(setup.sim), 1, 'only the injected 429');

    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    assert.deepEqual(
      [status.totals.taken, status.totals.queued, status.totals.refused],
      [2, 2, 1],
      'the refused use out of the count; the take after the 429 and the later job queued',
    );
    // The refused job took again after the 429, queued at the head and was granted; so was the
    // job started meanwhile, after it, and both only once the pause was over.
    const traces = quotaTraces(await refusedJob.fetchHistory());
    assert.equal(traces.filter((t) => t === 'queued by a take').length, 1, traces.join());
    assert.ok(traces.includes('signal quotaGrant'), traces.join());
    assert.ok(quotaTraces(await later.fetchHistory()).includes('queued by a take'));
    assert.deepEqual(await grantOrder(setup), [refusedJob.workflowId, later.workflowId]);
    const created = new Map(setup.sim.stats().jobs.map((job) => [job.id, job.createdAt]));
    const pausedUntilMs = Date.parse(paused);
    for (const { job } of [a, b]) {
      const at = created.get(job.id) as number;
      assert.ok(at >= pausedUntilMs, `created at ${at}, the pause ran to ${pausedUntilMs}`);
    }
    await quotaWorkflow(setup).terminate('test over');
  });

  test('a 429 that answers long after the take (longer than a lease) still sends the job back to the head of the queue', async () => {
    // Slow answers outlive a 1 s lease: a taken use counts in the window whatever the lease, and
    // the 429 finds it. The job must take again all the same.
    const [N, W, leaseMs] = [3, 4, 1_000];
    const setup = await setUp({ uses: 1, windowSeconds: W }, { uses: N, windowMs: W * 1000 }, leaseMs);
    setup.sim.setScenario(setup.projectId, { durationMs: JOB_MS, latencyMs: 2 * leaseMs });
    const handles = await Promise.all(
      Array.from({ length: N }, (_, i) => startQuotaJob(setup, `Late 429 ${i}`)),
    );
    const results = await Promise.all(handles.map((h) => h.result()));
    for (const result of results) assert.equal(result.status, 'completed');
    assert.equal(createdJobs(setup.sim, setup.projectId), N, 'one agent job per workflow');
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    assert.ok(
      refused(setup.sim) >= 1 && status.totals.refused === refused(setup.sim),
      JSON.stringify(status.totals),
    );
    assert.deepEqual(status.leases, []);
    assert.equal(status.queueLength, 0);
  });

  test('a queued job that is cancelled leaves the queue without an API request', async () => {
    const W = 4;
    const setup = await setUp({ uses: 1, windowSeconds: W }, { uses: 1, windowMs: W * 1000 });
    const [first, second, third] = await startInOrder(setup, 3);
    assert.ok(first && second && third);
    await waitFor(async () => (await third.query(statusQuery)).phase === 'queued', {
      what: 'the third job to show it is queued',
    });
    await third.cancel();
    const err = await third.result().then(
      () => assert.fail('the cancelled job should not complete'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure, String(err));
    await waitFor(async () => (await quotaWorkflow(setup).query(quotaStatusQuery)).totals.released === 1, {
      what: 'the quota to see the job leave',
    });
    await first.result();
    await second.result();
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    assert.equal(status.queueLength, 0);
    assert.deepEqual([status.totals.taken, status.totals.released], [2, 1]);
    assert.equal(requestsTo(setup.sim, setup.projectId, 'create'), 2, 'no create for the cancelled job');
    await captureHistory(setup.env, third, 'quota-cancelled-while-queued');
  });

  test('a grant nobody takes returns to the budget when its lease ends', async () => {
    const leaseMs = 8_000;
    const W = 3;
    const limit = { uses: 1, windowMs: W * 1000 };
    const setup = await setUp({ uses: 10, windowSeconds: 60 }, limit, leaseMs);
    // The holder creates its agent job (the window's one use), then polls for an hour: the grant
    // the test takes in its name below reaches it, and it never takes it.
    const holder = await startQuotaJob(setup, 'Holds a stray grant', { poll: { initialInterval: '1h' } });
    await waitFor(async () => (await holder.query(statusQuery)).jobId, {
      what: 'the holder to create its job',
    });
    const quota = quotaWorkflow(setup);
    const requestId = `${holder.workflowId}/stray`;
    const answer = await take(setup, { requestId, workflowId: holder.workflowId, limit, leaseMs });
    assert.equal(answer.outcome, 'queued', 'the window is full');
    const stray = await waitFor(
      async () => (await quota.query(quotaStatusQuery)).leases.find((l) => l.requestId === requestId),
      { what: 'the queued take to be granted when the window frees, and never taken' },
    );
    // The grant holds the window's use until its lease ends; a new job waits for it to come back.
    const waiting = await startQuotaJob(setup, 'Waits for the lease');
    const result = await waiting.result();
    assert.equal(result.status, 'completed');
    const status = await quota.query(quotaStatusQuery);
    assert.equal(status.totals.expired, 1, 'the stray grant expired');
    assert.equal(Date.parse(stray.expiresAt) - Date.parse(stray.grantedAt), leaseMs, 'the lease granted');
    // Timed at the simulator: the waiting job's create comes no sooner than the lease's end, and
    // soon after it (room for a loaded machine), not a window later.
    const createdAt = setup.sim.stats().jobs.find((job) => job.id === result.job.id)?.createdAt as number;
    const afterMs = createdAt - Date.parse(stray.expiresAt);
    process.stdout.write(
      `# quota lease: the waiting job created ${afterMs}ms after the lease of ${leaseMs}ms ended\n`,
    );
    assert.ok(afterMs >= -edgeMarginMs(limit), `created ${-afterMs}ms before the lease ended`);
    assert.ok(afterMs <= 20_000, `created ${afterMs}ms after the lease ended`);
    await holder.terminate('test over');
  });

  test('a follow-up message waits for the budget and goes ahead of queued creates', async () => {
    const W = 4;
    const setup = await setUp({ uses: 1, windowSeconds: W }, { uses: 1, windowMs: W * 1000 });
    setup.sim.setScenario(setup.projectId, { durationMs: 3_000 });
    const [first, second] = await startInOrder(setup, 2);
    assert.ok(first && second);
    await waitFor(async () => (await first.query(statusQuery)).phase === 'polling', {
      what: 'the first job created',
    });
    await waitFor(async () => (await second.query(statusQuery)).phase === 'queued', {
      what: 'the second job to show it is queued',
    });
    const message = first.executeUpdate(sendMessageUpdate, { args: ['One more thing'] });
    await waitFor(async () => (await first.query(statusQuery)).phase === 'queued', {
      what: 'the message to queue',
    });
    const progress = await first.query(statusQuery);
    assert.equal(progress.queue?.position, 1, 'the message is ahead of the queued create');
    const record = await message;
    assert.equal(record.status, 'active');
    await Promise.all([first.result(), second.result()]);
    assert.equal(refused(setup.sim), 0);
    // The first create took its use at once; the message queued behind nothing but the budget.
    assert.deepEqual(await grantOrder(setup), [first.workflowId, second.workflowId]);
    await captureHistory(setup.env, first, 'quota-queued-message');
  });

  test("the starter's progress shows a queued job's place and earliest start", async () => {
    // A window longer than the starter takes to start (several seconds on a busy machine).
    const W = 20;
    const setup = await setUp({ uses: 1, windowSeconds: W }, { uses: 1, windowMs: W * 1000 });
    const [first] = await startInOrder(setup, 1);
    assert.ok(first);
    const run = spawnTs(
      'src/starter.ts',
      ['--project', setup.projectId, '--prompt', 'Wait your turn', '--wait', '--poll-interval', '200ms'],
      {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        TEMPORAL_ADDRESS: setup.env.address,
        TEMPORAL_NAMESPACE: setup.env.namespace,
        TEMPORAL_TASK_QUEUE: setup.taskQueue,
      },
    );
    assert.equal(await run.exited, 0, run.stderr());
    assert.match(
      run.stdout(),
      /\[queued\] waiting for the project's API budget: position 1 of 1, earliest start \d{4}-\d\d-\d\dT/,
    );
    assert.match(run.stdout(), /prLink: https:\/\/github\.com\//);
    await first.result();
  });

  test('a thousand takes queued for one project: the queue survives continue-as-new, and each can leave it', async () => {
    const limit = { uses: 2, windowMs: 3_600_000 };
    const setup = await setUp({ uses: 10, windowSeconds: 3600 }, limit);
    const quota = quotaWorkflow(setup);
    const REQUESTS = 1_000;
    // Every take names one running job that ignores what it is sent (it polls once an hour). Its
    // own create takes one use, the first take the other: all the other takes queue.
    const holder = await startQuotaJob(setup, 'Receives the grants', { poll: { initialInterval: '1h' } });
    await waitFor(async () => (await holder.query(statusQuery)).jobId, {
      what: 'the holder to create its job',
    });
    const body = (i: number) => ({
      requestId: `${holder.workflowId}/bulk-${i}`,
      workflowId: holder.workflowId,
      limit,
      leaseMs: 3_600_000,
    });
    assert.equal((await take(setup, body(0))).outcome, 'granted');
    const firstRunId = (await quota.describe()).runId;
    const startedAt = Date.now();
    let next = 1;
    // Fewer callers than the server's updates in flight per workflow (10 by default).
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < REQUESTS) {
          const answer = await take(setup, body(next++));
          assert.equal(answer.outcome, 'queued');
        }
      }),
    );
    const enqueueMs = Date.now() - startedAt;
    const status = await quota.query(quotaStatusQuery);
    assert.equal(status.queueLength, REQUESTS - 1);
    assert.equal(status.totals.taken, 2, "the holder's own create, then the first take");

    // The takes' events run the history past QUOTA_EVENTS_PER_RUN: the run continues as new,
    // carrying the whole queue.
    const described = await waitFor(
      async () => {
        const d = await quota.describe();
        return d.runId !== firstRunId ? d : null;
      },
      { what: 'the quota workflow to continue as new', timeoutMs: 60_000, intervalMs: 200 },
    );
    const carried = await quota.query(quotaStatusQuery);
    assert.equal(carried.queueLength, REQUESTS - 1, 'the queue carried into the new run');
    assert.ok(
      (described.historyLength ?? 0) < 2_500,
      `history of the current run: ${described.historyLength} events`,
    );

    // Every queued take leaves (as a cancelled job would); the queue empties, nothing is granted.
    await Promise.all(
      Array.from({ length: REQUESTS - 1 }, (_, i) =>
        quota.signal('quotaRelease', { requestId: body(i + 1).requestId }),
      ),
    );
    const emptied = await waitFor(
      async () => {
        const s = await quota.query(quotaStatusQuery);
        return s.queueLength === 0 ? s : null;
      },
      { what: 'the queue to empty', timeoutMs: 60_000 },
    );
    // Each release found its take, across the continue-as-new in between: the queue was carried whole.
    assert.equal(emptied.totals.released, REQUESTS - 1);
    assert.equal(emptied.totals.granted, 0);
    process.stdout.write(
      `# quota 1000 queued: ${REQUESTS - 1} takes queued in ${(enqueueMs / 1000).toFixed(1)}s; ` +
        `continued as new, the new run at ${described.historyLength} events\n`,
    );
    await quota.terminate('test over');
    await holder.terminate('test over');
  });
});
