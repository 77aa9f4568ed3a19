/**
 * Follow-ups queued behind a long turn do not hold the workflow's run: it continues as new with
 * them, sends each once, and each caller of the library still gets its own turn's result.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sendFollowUp, startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import { pollNowSignal, statusQuery } from '../../src/contract.js';
import { FAST_POLL, onCleanup, startSimulatedSuite, uniqueId, waitFor } from '../harness.js';
import { captureHistory } from '../capture-history.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

/** Each follow-up's turn stays `active` this long: long enough for several runs at 5 fast polls each. */
const TURN_MS = 6000;
/** Waits for what the server and the worker do, on a busy two-core machine: generous, never the point. */
const PATIENCE_MS = 120_000;
/** Events one run may hold: 5 polls of about 6 events, two follow-ups' updates, start and end. */
const EVENTS_PER_RUN = 80;

const suite = await startSimulatedSuite('follow-up-can', { durationMs: TURN_MS });
const { env, sim } = suite;

/**
 * Signals pollNow every 200 ms until stopped. A turn in progress adds nothing to the history while
 * its poll activity waits on the server; each pollNow ends one poll activity, so runs fill up and
 * continue as new during the turn, which is what these tests need to see.
 */
function keepPolling(handle: AgentJobHandle): () => void {
  let stopped = false;
  void (async () => {
    while (!stopped) {
      await handle.signal(pollNowSignal).catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return () => (stopped = true);
}

/**
 * Holds the project's agent jobs `active` in every read until the returned function is called:
 * each GET is answered with the real record's status set to `active` (and no prLink). The turn in
 * progress then ends when the test has seen what it needs, not when a clock says, however slow
 * the machine; its real length is short, so it reads as ended at the first GET after the release.
 */
function holdTurn(projectId: string): () => void {
  sim.setScenario(projectId, {
    durationMs: 300,
    faults: { rules: [{ endpoint: 'get', kind: 'altered', set: { status: 'active', prLink: null } }] },
  });
  return () => sim.setScenario(projectId, { durationMs: TURN_MS });
}

/** The runs of the workflow so far, from visibility. */
async function runIds(handle: AgentJobHandle): Promise<string[]> {
  const runs: string[] = [];
  for await (const run of env.client.workflow.list({ query: `WorkflowId = '${handle.workflowId}'` })) {
    runs.push(run.runId);
  }
  return runs;
}

/**
 * Makes an agent job outside any workflow and starts a workflow watching it that continues as new
 * after `continueAsNewAfterPolls` polls; `input` is what a follow-up to the job starts from.
 */
async function watchNewJob(projectId: string, continueAsNewAfterPolls: number) {
  const job = await suite.api.createJob(projectId, 'Turn one', { idempotencyKey: uniqueId('key') });
  const input = { projectId, jobId: job.id, poll: FAST_POLL };
  const watching = await startAgentJob(
    env.client,
    { ...input, continueAsNewAfterPolls },
    { taskQueue: suite.worker.taskQueue },
  );
  return { watching, input };
}

test('follow-ups queued behind a long turn continue as new with the run, each sent once and answered', async () => {
  const projectId = suite.project();
  const { taskQueue } = suite.worker;
  // Turn one lasts until the follow-ups have been carried into later runs and the same key sent
  // again (the checks below): a clock-bound turn made those a race a loaded machine could lose.
  const releaseTurn = holdTurn(projectId);
  const { watching, input } = await watchNewJob(projectId, 5);
  // One with a key (given to the running run itself) and one without (update-with-start).
  const firstKey = uniqueId('fu');
  const first = await sendFollowUp(
    env.client,
    { ...input, prompt: 'Add examples' },
    { taskQueue, key: firstKey },
  );
  const second = await sendFollowUp(env.client, { ...input, prompt: 'Fix the typos' }, { taskQueue });
  assert.equal(first.workflowId, watching.workflowId);
  assert.equal(second.workflowId, watching.workflowId);
  const queuedIn = (await watching.describe()).runId;
  const stopPolling = keepPolling(watching);
  onCleanup(stopPolling);

  const nextRun = await waitFor(
    async () => {
      const { runId } = await watching.describe();
      return runId !== queuedIn ? runId : null;
    },
    { what: 'a continue-as-new while the follow-ups are queued', timeoutMs: PATIENCE_MS, intervalMs: 200 },
  );
  assert.equal(requestsTo(sim, projectId, 'message'), 0, 'both still queued when the run continued as new');
  const carried = await env.client.workflow.getHandle(watching.workflowId, nextRun).query(statusQuery);
  assert.equal(carried.turns, 1, 'turn one still in progress');

  // The same key again, against the run the follow-up was carried into: no second message.
  const again = await sendFollowUp(
    env.client,
    { ...input, prompt: 'Add examples' },
    { taskQueue, key: firstKey },
  );
  assert.equal(requestsTo(sim, projectId, 'message'), 0, 'still queued');
  releaseTurn();

  const [a, b, a2] = await Promise.all([first.result(), second.result(), again.result()]);
  stopPolling();
  assert.deepEqual(a2, a, 'the same follow-up, the same turn');
  assert.equal(a.turns, 2, 'the first follow-up answered with its own turn');
  assert.equal(b.turns, 3, 'the second follow-up answered with its own turn');
  assert.match(a.prLink ?? '', /^https:\/\/github\.com\//);
  assert.match(b.prLink ?? '', /^https:\/\/github\.com\//);
  assert.notEqual(a.prLink, b.prLink);
  assert.equal(requestsTo(sim, projectId, 'message'), 2, 'POSTs to message');
  assert.equal(createdJobs(sim, projectId), 1);

  const runs = await runIds(watching);
  assert.ok(runs.length > 2, `the run continued as new during the turns (${runs.length} runs)`);
  for (const runId of runs) {
    const { events } = await env.client.workflow.getHandle(watching.workflowId, runId).fetchHistory();
    const count = events?.length ?? 0;
    assert.ok(count <= EVENTS_PER_RUN, `run ${runId} holds ${count} events, at most ${EVENTS_PER_RUN}`);
  } // The run that continued as new with the follow-ups queued, and the one that took them.
  await captureHistory(env, watching, 'follow-ups-carried-out', { runId: queuedIn });
  await captureHistory(env, watching, 'follow-ups-carried-in', { runId: nextRun });
});

test('a caller back only after a later turn has started still gets its own turn, through every run since', async () => {
  const projectId = suite.project({ durationMs: 3000 });
  const { taskQueue } = suite.worker;
  const { watching, input } = await watchNewJob(projectId, 3);
  const first = await sendFollowUp(
    env.client,
    { ...input, prompt: 'Add examples' },
    { taskQueue, key: uniqueId('fu') },
  );
  const second = await sendFollowUp(env.client, { ...input, prompt: 'Fix the typos' }, { taskQueue });
  const stopPolling = keepPolling(watching);
  onCleanup(stopPolling);
  // Nobody waits for the first one's answer until the second one's turn is under way: the second
  // message sent, and its answer taken in (the query can come between the two).
  await waitFor(
    async () =>
      requestsTo(sim, projectId, 'message') === 2 && (await watching.query(statusQuery)).turns === 3,
    { what: 'the second message, its turn under way', timeoutMs: PATIENCE_MS, intervalMs: 200 },
  );
  assert.equal(requestsTo(sim, projectId, 'message'), 2);

  const a = await first.result();
  assert.equal(a.turns, 2, 'its own turn, not the one in progress');
  assert.equal(a.status, 'completed');
  const b = await second.result();
  stopPolling();
  assert.equal(b.turns, 3);
  assert.notEqual(a.prLink, b.prLink);
  assert.equal(requestsTo(sim, projectId, 'message'), 2, 'POSTs to message');
  assert.ok((await runIds(watching)).length > 2, 'the first follow-up was carried through several runs');
});
