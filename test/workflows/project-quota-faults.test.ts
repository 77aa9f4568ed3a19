/**
 * The project quota under faults, against a real Temporal server, real workers and the simulator:
 * a create that retries through an outage past its lease, a quota workflow terminated while jobs
 * wait in its queue (and started again by another job's ask), and a job workflow reset to before
 * its create. Every test has its own project
 * (so its own quota workflow) and its own simulator.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { statusQuery } from '../../src/contract.js';
import type { QuotaLimit } from '../../src/quota/messages.js';
import { quotaStatusQuery } from '../../src/workflows/project-quota/state.js';
import type { RunningSimulator } from '../../src/simulator/index.js';
import type { agentJobWorkflow } from '../../src/workflows/index.js';
import { QUOTA_REASK_MS } from '../../src/workflows/project-quota/requester.js';
import { quotaWorkflow, startQuotaJob, startQuotaSetup, waitFor, type QuotaSetup } from '../harness.js';
import { requestsTo } from '../simulator-stats.js';

const API_KEY = `quota-faults-key-${randomUUID()}`;
type Setup = QuotaSetup;

/** A simulator whose budget is `real`, and a worker whose quota is `limit` with grants of `leaseMs`. */
function setUp(real: QuotaLimit, limit: QuotaLimit, leaseMs: number): Promise<Setup> {
  return startQuotaSetup({ apiKey: API_KEY, real, limit, leaseMs, prefix: 'docs-quota-faults' });
}

function refused(sim: RunningSimulator): number {
  return sim.stats().requestsPerStatus['429'] ?? 0;
}

/** When the simulator created each agent job, by job ID. */
function createdAt(sim: RunningSimulator): Map<string, number> {
  return new Map(sim.stats().jobs.map((job) => [job.id, job.createdAt]));
}

/** A job that polls only an hour after its create: it holds its use while the test runs. */
const HOLD = { poll: { initialInterval: '1h' } };

/**
 * One use an hour: a job that holds it, and one queued behind it (its estimated start an hour
 * away) when an operator terminates the quota workflow.
 */
async function oneQueuedThenTerminated(leaseMs: number) {
  const setup = await setUp({ uses: 10, windowMs: 3_600_000 }, { uses: 1, windowMs: 3_600_000 }, leaseMs);
  const holder = await startQuotaJob(setup, 'Holds the budget', HOLD);
  await waitFor(async () => (await holder.query(statusQuery)).jobId, {
    what: 'the holder to create its job',
  });
  const waiting = await startQuotaJob(setup, 'Waits in the queue');
  const place = await waitFor(async () => (await waiting.query(statusQuery)).queue, {
    what: 'the second job to hear its place',
  });
  assert.ok(Date.parse(place.earliestStartAt) - Date.now() > 50 * 60_000, place.earliestStartAt);
  await quotaWorkflow(setup).terminate('an operator ends the quota workflow');
  return { setup, holder, waiting };
}

describe('project quota under faults', { concurrency: 3 }, () => {
  test('a create that retries through an outage past its lease keeps its use: the next job waits for the window, no 429', async () => {
    // One use per 5 s; a lease of 2 s. The first three creates answer 503: the first job's create
    // retries for about 14 s (2 s, 4 s, 8 s), far past its lease.
    const W = 5_000;
    const setup = await setUp({ uses: 1, windowMs: W }, { uses: 1, windowMs: W }, 2_000);
    setup.sim.setScenario(setup.projectId, {
      durationMs: 300,
      faults: { rules: [{ endpoint: 'create', kind: 'status', status: 503, first: 3 }] },
    });
    const first = await startQuotaJob(setup, 'Retries through an outage');
    await waitFor(async () => (await quotaWorkflow(setup).query(quotaStatusQuery)).totals.taken === 1, {
      what: 'the first take',
    });
    const second = await startQuotaJob(setup, 'Waits for the window');
    const [a, b] = await Promise.all([first.result(), second.result()]);
    assert.equal(a.status, 'completed');
    assert.equal(b.status, 'completed');
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    assert.equal(refused(setup.sim), 0, 'no 429: the use was never handed out twice');
    assert.equal(status.totals.refused, 0, 'the quota heard of no 429 either');
    // The first create took its use at once, and each retry takes it on again; a retry that comes
    // after its use left the window queues behind the second job. Either way the two creates are
    // a window apart: one use, never handed out twice.
    const created = createdAt(setup.sim);
    const gapMs = Math.abs((created.get(b.job.id) as number) - (created.get(a.job.id) as number));
    assert.ok(gapMs >= W, `the two jobs created ${gapMs}ms apart, a window or more`);
    await quotaWorkflow(setup).terminate('test over');
  });

  test('a terminated quota workflow: the job waiting in its queue takes again within a lease (at most QUOTA_REASK_MS), not at its estimated start an hour later', async () => {
    const { setup, holder, waiting } = await oneQueuedThenTerminated(60_000);
    const terminatedAt = Date.now();
    const progress = await waitFor(
      async () => {
        const p = await waiting.query(statusQuery);
        return p.jobId === null ? null : p;
      },
      {
        what: 'the waiting job to create its agent job',
        timeoutMs: QUOTA_REASK_MS + 45_000,
        intervalMs: 500,
      },
    );
    const waitedMs = Date.now() - terminatedAt;
    process.stdout.write(
      `# quota terminated: the queued job created ${(waitedMs / 1000).toFixed(1)}s later\n`,
    );
    assert.ok(progress.jobId);
    assert.equal(requestsTo(setup.sim, setup.projectId, 'create'), 2);
    await waiting.terminate('test over');
    await holder.terminate('test over');
    await quotaWorkflow(setup).terminate('test over');
  });

  test("a quota workflow terminated, then started again by another job's take: the job waiting in the old queue is queued in the new run within a lease, not at its estimated start", async () => {
    const leaseMs = 30_000;
    const { setup, holder, waiting } = await oneQueuedThenTerminated(leaseMs);
    // Another job asks at once: its take starts a new quota run, with a budget of its own, and uses it.
    const newcomer = await startQuotaJob(setup, 'Asks after the termination', HOLD);
    await waitFor(async () => (await newcomer.query(statusQuery)).jobId, {
      what: 'the newcomer to create its job through a new quota run',
    });
    const restartedAt = Date.now();
    // The waiting job takes again a lease after its last answer: the new run, which never heard of
    // it, queues it.
    const status = await waitFor(
      async () => {
        const s = await quotaWorkflow(setup).query(quotaStatusQuery);
        return s.queueHead.some((e) => e.workflowId === waiting.workflowId) ? s : null;
      },
      {
        what: 'the waiting job to be queued in the new run',
        timeoutMs: leaseMs + 45_000,
        intervalMs: 500,
      },
    );
    const heard = await waitFor(
      async () => {
        const { queue } = await waiting.query(statusQuery);
        return queue !== null && Date.parse(queue.asOf) >= restartedAt ? queue : null;
      },
      { what: 'the waiting job to hear its place in the new run' },
    );
    process.stdout.write(
      `# quota restarted by another job: the waiting job queued there ${((Date.now() - restartedAt) / 1000).toFixed(1)}s later\n`,
    );
    assert.equal(status.queueLength, 1);
    assert.equal(heard.position, 1);
    assert.equal(
      requestsTo(setup.sim, setup.projectId, 'create'),
      2,
      'the holder and the newcomer; the waiting job still waits',
    );
    await waiting.terminate('test over');
    await newcomer.terminate('test over');
    await holder.terminate('test over');
    await quotaWorkflow(setup).terminate('test over');
  });

  test('a job workflow reset to the task that created its agent job asks for a new use, not the one from its past', async () => {
    const leaseMs = 2_000;
    const setup = await setUp({ uses: 10, windowMs: 60_000 }, { uses: 5, windowMs: 60_000 }, leaseMs);
    const job = await startQuotaJob(setup, 'Reset after its create');
    const first = await job.result();
    assert.equal(first.status, 'completed');
    const doneAt = Date.now();
    // The task that scheduled the create, which took its use at once.
    const events = (await job.fetchHistory()).events ?? [];
    const scheduled = events.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'createAgentJob',
    );
    const taskCompleted = {
      eventId: scheduled?.activityTaskScheduledEventAttributes?.workflowTaskCompletedEventId,
    };
    assert.ok(taskCompleted.eventId, 'the task that scheduled the create');
    // An operator resets later than the grant's lease.
    await waitFor(() => Date.now() > doneAt + leaseMs, { what: 'the lease to run out', timeoutMs: 10_000 });
    const { runId } = await setup.env.client.workflowService.resetWorkflowExecution({
      namespace: setup.env.namespace,
      workflowExecution: { workflowId: job.workflowId, runId: job.firstExecutionRunId },
      reason: 'test: reset to before the create',
      workflowTaskFinishEventId: taskCompleted.eventId,
      requestId: randomUUID(),
    });
    const reset = setup.env.client.workflow.getHandle<typeof agentJobWorkflow>(
      job.workflowId,
      runId ?? undefined,
    );
    const second = await reset.result();
    assert.equal(second.status, 'completed');
    const status = await quotaWorkflow(setup).query(quotaStatusQuery);
    const creates = requestsTo(setup.sim, setup.projectId, 'create');
    assert.equal(creates, 2, 'the reset run created again');
    assert.equal(
      status.totals.taken,
      creates,
      `every create had its own use: ${JSON.stringify(status.totals)}`,
    );
    await quotaWorkflow(setup).terminate('test over');
  });
});
