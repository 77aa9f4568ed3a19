/**
 * What a follow-up waiting behind a long turn costs the run's history: the figures behind
 * docs/decisions/0014-follow-up-delivery.md (a run that held continue-as-new until its waiting
 * follow-ups were answered would grow with every pollNow while they wait).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sendFollowUp, startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import { pollNowSignal, statusQuery } from '../../src/contract.js';
import { FAST_POLL, startSimulatedSuite, uniqueId, waitFor } from '../harness.js';
import { requestsTo } from '../simulator-stats.js';

const suite = await startSimulatedSuite('follow-up-history', { durationMs: 300 });
const { env, sim } = suite;

async function events(handle: AgentJobHandle): Promise<number> {
  const { historyLength } = await handle.describe();
  return historyLength;
}

test('a pollNow costs the run events while follow-ups wait behind the turn; 10 queued follow-ups cost a few each', async () => {
  const projectId = suite.project();
  const { taskQueue } = suite.worker;
  // Every read says `active` until released: the turn lasts as long as the test needs.
  sim.setScenario(projectId, {
    durationMs: 300,
    faults: { rules: [{ endpoint: 'get', kind: 'altered', set: { status: 'active', prLink: null } }] },
  });
  const job = await suite.api.createJob(projectId, 'Turn one', { idempotencyKey: uniqueId('key') });
  const input = { projectId, jobId: job.id, poll: FAST_POLL };
  // No continue-as-new in this run: the figures are one run's.
  const watching = await startAgentJob(
    env.client,
    { ...input, continueAsNewAfterPolls: 100_000 },
    { taskQueue },
  );
  const first = await sendFollowUp(env.client, { ...input, prompt: 'Follow-up 1' }, { taskQueue });
  // The poll loop settles into one poll activity that waits on the server while the job is active.
  const settled = async () => {
    const before = await events(watching);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    return (await events(watching)) === before ? before : null;
  };
  const e0 = await waitFor(settled, { what: 'a quiet run', timeoutMs: 60_000, intervalMs: 100 });

  // One pollNow at a time, each seen through to its read.
  const SIGNALS = 30;
  for (let i = 0; i < SIGNALS; i++) {
    const polls = (await watching.query(statusQuery)).polls;
    await watching.signal(pollNowSignal);
    await waitFor(async () => ((await watching.query(statusQuery)).polls > polls ? true : null), {
      what: 'the read a pollNow asks for',
      timeoutMs: 60_000,
      intervalMs: 20,
    });
  }
  const e1 = await waitFor(settled, { what: 'a quiet run', timeoutMs: 60_000, intervalMs: 100 });
  const perPollNow = (e1 - e0) / SIGNALS;

  // A storm: a pollNow every 100 ms for 5 s, not waiting for anything.
  let sent = 0;
  const stormEnd = Date.now() + 5_000;
  while (Date.now() < stormEnd) {
    await watching.signal(pollNowSignal);
    sent++;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const e2 = await waitFor(settled, { what: 'a quiet run', timeoutMs: 60_000, intervalMs: 100 });
  const perStormSecond = (e2 - e1) / 5;

  // 9 more follow-ups: 10 wait behind the turn, the most the server lets be in flight in one run
  // (`history.maxInFlightUpdates`, 10 by default: an 11th is refused RESOURCE_EXHAUSTED).
  const more = [];
  for (let i = 2; i <= 10; i++)
    more.push(await sendFollowUp(env.client, { ...input, prompt: `Follow-up ${i}` }, { taskQueue }));
  const e3 = await waitFor(settled, { what: 'a quiet run', timeoutMs: 60_000, intervalMs: 100 });
  const perQueued = (e3 - e2) / 9;

  // Their turns, one after the other (each message, then its turn's end).
  sim.setScenario(projectId, { durationMs: 300 });
  await watching.signal(pollNowSignal);
  const results = await Promise.all([first, ...more].map((followUp) => followUp.result()));
  const e4 = await events(watching);
  const perTurn = (e4 - e3) / 10;
  assert.deepEqual(
    results.map((r) => r.turns),
    Array.from({ length: 10 }, (_, i) => i + 2),
  );
  assert.equal(requestsTo(sim, projectId, 'message'), 10);

  const figures = { e0, perPollNow, sent, perStormSecond, perQueued, perTurn, e4 };
  console.log(`[follow-up history] ${JSON.stringify(figures)}`);
  // What the decision rests on: every pollNow while a follow-up waits adds events to the run.
  assert.ok(perPollNow >= 4, JSON.stringify(figures));
  assert.ok(perStormSecond >= 4, JSON.stringify(figures));
});
