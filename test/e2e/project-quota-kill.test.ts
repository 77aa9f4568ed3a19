/**
 * The project quota survives the loss of a worker: two worker processes share a task queue and one
 * project's budget; the one that holds the quota workflow and uses of the budget is killed with
 * SIGKILL mid-run. Every job must complete, the simulator must see exactly one agent job per
 * workflow, and the budget must keep moving: no use held by the dead worker is lost for longer
 * than the lease (plus the time Temporal takes to notice the worker is gone).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import type { AgentJobResult } from '../../src/contract.js';
import { projectQuotaWorkflowId } from '../../src/quota/messages.js';
import { quotaStatusQuery } from '../../src/workflows/project-quota/state.js';
import { startSimulatedWorld, startWorkerProcess, uniqueId, waitFor, type TestProcess } from '../harness.js';
import { assertResendsCounted, createdJobs, requestsTo } from '../simulator-stats.js';

const [N, K, W] = [9, 3, 4];
const LEASE_MS = 3_000;
/**
 * A workflow cached on the dead worker waits this long on its sticky queue before another worker
 * takes it (the SDK's default sticky schedule-to-start timeout, 10 s), plus slack for a busy machine (the full suite
 * runs two files at once on two cores).
 */
const TAKEOVER_MS = 20_000;
// About the quota, not the key: a create in flight when its worker dies is sent again by the
// workflow under AGENT_API_AMBIGUOUS_CREATE=retry (test/workflows/real-api-world.test.ts shows
// both policies against a simulator that ignores the key). Here the key is honoured, so that
// resend finds the same job and the count of jobs below is the quota's doing; the resend itself
// is counted from the creates the simulator accepted per key.
const { env, sim, workerEnv } = await startSimulatedWorld('quota-kill', {
  simulator: {
    honourIdempotencyKey: true,
    budget: { uses: K, windowSeconds: W },
    retryAfter: false,
    defaultScenario: { durationMs: 1_000, outcome: 'pr' },
  },
});

async function startWorker(name: string, taskQueue: string): Promise<TestProcess> {
  const worker = await workerEnv({
    TEMPORAL_TASK_QUEUE: taskQueue,
    AGENT_API_PROJECT_QUOTA: `${K}/${W}s`,
    AGENT_API_PROJECT_QUOTA_LEASE: `${LEASE_MS}ms`,
  });
  return startWorkerProcess(worker, { what: name });
}

test('killing the worker that holds uses of the budget loses no job, duplicates none, and frees its uses after the lease', async () => {
  const taskQueue = uniqueId('tq-quota-kill');
  const projectId = uniqueId('docs-quota-kill');
  // Slow answers keep each create in flight for a second: long enough to kill the worker while it
  // sends some, and while grants of the second window wait for their jobs to take them.
  sim.setScenario(projectId, { durationMs: 1_000, latencyMs: 1_000 });
  // The first worker alone at first: it starts the quota workflow with the first job's use, and
  // keeps it cached (sticky). The second comes up before the other jobs start, so that the second
  // window's uses are granted while both run, however long a process takes to start on a busy
  // machine (a CI run saw every job done before the second worker was up).
  const victim = await startWorker('worker-1', taskQueue);
  const quota = env.client.workflow.getHandle(projectQuotaWorkflowId(projectId));
  const handles: AgentJobHandle[] = [];
  const start = async (i: number) =>
    handles.push(
      await startAgentJob(
        env.client,
        {
          projectId,
          prompt: `Quota kill job ${i}`,
          poll: { initialInterval: '500ms', backoffCoefficient: 1 },
          // A job left waiting for a grant fails at this deadline instead of hanging the test.
          timeout: '5m',
        },
        { taskQueue, key: `job-${i}` },
      ),
    );
  await start(0);
  await waitFor(async () => (await quota.query(quotaStatusQuery)).totals.taken > 0, {
    what: "the first job's use, the quota workflow running on the first worker",
    timeoutMs: 60_000,
  });
  const survivor = await startWorker('worker-2', taskQueue);
  for (let i = 1; i < N; i++) await start(i);
  const doneAt = new Map<string, number>();
  const results = Promise.all(
    handles.map((handle) => handle.result().finally(() => doneAt.set(handle.workflowId, Date.now()))),
  );
  // Kill while grants of a later window are out: held for jobs that have not taken them yet (a
  // job cached on the dead worker takes its grant only after the takeover, past the lease).
  const held = await waitFor(
    async () => {
      const status = await quota.query(quotaStatusQuery);
      return status.totals.granted > 0 && status.leases.length > 0 ? status.leases : null;
    },
    { what: 'the victim to hold uses of the second window', timeoutMs: 60_000, intervalMs: 25 },
  );
  const killedAt = Date.now();
  victim.child.kill('SIGKILL');
  assert.equal(await victim.exited, 'SIGKILL');

  for (const result of await results) {
    assert.equal(result.status, 'completed');
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\//);
  }
  const stats = sim.stats();
  assert.equal(createdJobs(sim, projectId), N, 'exactly one agent job per workflow');
  // Every create sent again (one on the wire when its worker died) is counted in `resent`. 429s are
  // not accepted creates: the quota sends those again, as it should.
  const resultsByWorkflow = await results;
  const resent = resultsByWorkflow.reduce((sum, result) => sum + result.resent, 0);
  assertResendsCounted(
    sim,
    handles.map((handle) => handle.workflowId),
    resultsByWorkflow,
  );

  // A job whose create was in flight on the dead worker waits for that activity's timeout, and a
  // job that held a grant waits for the takeover; the budget does not: every other job's create reaches the API within the windows it needed
  // after the kill, plus one lease (the held uses coming back) and one takeover of the dead
  // worker's workflows. Timed at the simulator's creates, not at the jobs' ends: a poll attempt
  // lost with the dead worker can cost its 30 s start-to-close (POLL_ATTEMPT_TIMEOUT_MS) before it
  // is tried again, which is polling, not the budget. Measured on 2026-11-27 (two shared cores,
  // load 5 to 8): the ends came 31.8 s and 32.0 s after the kill in two of three runs, past the
  // 31 s bound this once applied to them, and 19.4 s in the third.
  const holders = new Set(held.map((lease) => lease.workflowId));
  for (const handle of handles) {
    const { events } = await handle.fetchHistory();
    if ((events ?? []).some((e) => e.activityTaskTimedOutEventAttributes)) holders.add(handle.workflowId);
  }
  const remainingWindows = Math.ceil(N / K) - 1;
  const boundMs = remainingWindows * W * 1000 + LEASE_MS + TAKEOVER_MS;
  const createdAt = new Map(stats.jobs.map((job) => [job.id, job.createdAt]));
  const others = handles.flatMap((handle, i) =>
    holders.has(handle.workflowId)
      ? []
      : [{ handle, createdAt: createdAt.get((resultsByWorkflow[i] as AgentJobResult).job.id) as number }],
  );
  const slowest = Math.max(...others.map(({ createdAt: at }) => at - killedAt));
  const slowestDone = Math.max(
    ...others.map(({ handle }) => (doneAt.get(handle.workflowId) as number) - killedAt),
  );
  const status = await quota.query(quotaStatusQuery);
  process.stdout.write(
    `# quota kill: N=${N} K=${K} W=${W}s lease ${LEASE_MS}ms: ${held.length} uses held at the kill; the other jobs created ` +
      `${(slowest / 1000).toFixed(1)}s after it at the latest (bound ${(boundMs / 1000).toFixed(1)}s), done ` +
      `${(slowestDone / 1000).toFixed(1)}s after it; all done ` +
      `${((Math.max(...doneAt.values()) - killedAt) / 1000).toFixed(1)}s; POSTs to create ${requestsTo(sim, projectId, 'create')}, ` +
      `429s ${stats.requestsPerStatus['429'] ?? 0}, creates sent again (resent) ${resent}; ` +
      `quota totals ${JSON.stringify(status.totals)}\n`,
  );
  assert.ok(
    slowest <= boundMs,
    `a job not held at the kill was created ${slowest}ms after it; bound ${boundMs}ms`,
  );
  assert.deepEqual(status.leases, [], 'no grant is still held');
  assert.equal(status.queueLength, 0);

  survivor.child.kill('SIGTERM');
  assert.equal(await survivor.exited, 0);
});
