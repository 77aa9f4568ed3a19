/**
 * The client library against a real Temporal server, a real worker and the simulator over HTTP:
 * follow-ups by update-with-start, one workflow per agent job, and keys whose workflow failed.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import {
  agentJobIdWorkflowId,
  agentJobWorkflowId,
  sendFollowUp,
  startAgentJob,
} from '../../src/client/index.js';
import {
  FailureType,
  InvalidInputError,
  SearchAttributes,
  statusQuery,
  type AgentJobRecord,
} from '../../src/contract.js';
import { FAST_POLL, uniqueId, waitFor, startSimulatedSuite } from '../harness.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const suite = await startSimulatedSuite('docs');
const { env, sim, worker, project } = suite;

async function completedJob(projectId: string): Promise<AgentJobRecord> {
  const record = await suite.completedJob(projectId);
  assert.equal(record.status, 'completed');
  return record;
}

describe('follow-ups through the client library', { concurrency: 3 }, () => {
  test('sendFollowUp on a completed job sends one message and returns the new turn\u2019s prLink', async () => {
    const projectId = project();
    const turnOne = await completedJob(projectId);
    const followUp = await sendFollowUp(
      env.client,
      { projectId, jobId: turnOne.id, prompt: 'Now add examples', poll: FAST_POLL },
      { taskQueue: worker.taskQueue },
    );
    assert.equal(followUp.workflowId, agentJobIdWorkflowId(projectId, turnOne.id));
    const result = await followUp.result();
    assert.equal(result.status, 'completed');
    assert.equal(result.job.id, turnOne.id);
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\//);
    assert.notEqual(result.prLink, turnOne.prLink);
    assert.equal(requestsTo(sim, projectId, 'message'), 1);
    assert.equal(createdJobs(sim, projectId), 1, 'no agent job created');
    // The library named the job at the start, where a search attribute costs no action: the
    // workflow upserts none.
    const handle = env.client.workflow.getHandle(followUp.workflowId);
    assert.equal((await handle.describe()).typedSearchAttributes.get(SearchAttributes.jobId), turnOne.id);
    const { events } = await handle.fetchHistory();
    assert.equal(events?.filter((e) => e.upsertWorkflowSearchAttributesEventAttributes).length, 0);
  });

  test('two follow-ups sent at once for one job run one after the other', async () => {
    const projectId = project();
    const turnOne = await completedJob(projectId);
    const [a, b] = await Promise.all(
      ['Add examples', 'Fix the typos'].map((prompt) =>
        sendFollowUp(
          env.client,
          { projectId, jobId: turnOne.id, prompt, poll: FAST_POLL },
          { taskQueue: worker.taskQueue },
        ),
      ),
    );
    assert.ok(a && b);
    assert.equal(a.workflowId, b.workflowId, 'one workflow drives the job');
    const results = (await Promise.all([a.result(), b.result()])).sort((x, y) => x.turns - y.turns);
    const [first, second] = results;
    assert.ok(first && second);
    assert.deepEqual(
      results.map((r) => r.turns),
      [2, 3],
    );
    // Had the second message been sent while turn 2 ran, turn 2 would never have ended with a
    // pull request of its own: both callers would see turn 3's.
    for (const r of results) assert.match(r.prLink ?? '', /^https:\/\/github\.com\//);
    assert.ok(
      new Set([turnOne.prLink, first.prLink, second.prLink]).size === 3,
      'each turn ended with its own pull request',
    );
    assert.equal(requestsTo(sim, projectId, 'message'), 2);
    assert.equal(createdJobs(sim, projectId), 1);
  });

  test('the same follow-up key twice sends one message', async () => {
    const projectId = project();
    const turnOne = await completedJob(projectId);
    const key = uniqueId('follow-up');
    const input = { projectId, jobId: turnOne.id, prompt: 'Once only', poll: FAST_POLL };
    const first = await sendFollowUp(env.client, input, { taskQueue: worker.taskQueue, key });
    const again = await sendFollowUp(env.client, input, { taskQueue: worker.taskQueue, key });
    const [r1, r2] = await Promise.all([first.result(), again.result()]);
    assert.equal(r1.prLink, r2.prLink);
    assert.equal(requestsTo(sim, projectId, 'message'), 1);
  });

  test('sendFollowUp refuses a blank prompt before anything starts', async () => {
    const projectId = project();
    await assert.rejects(
      sendFollowUp(env.client, { projectId, jobId: 'job_x', prompt: ' ' }, { taskQueue: worker.taskQueue }),
      (err: unknown) => err instanceof InvalidInputError && err.field === 'prompt',
    );
    assert.equal(requestsTo(sim, projectId, 'get'), 0);
  });
});

describe('keys whose workflow did not complete', () => {
  test('a key whose workflow timed out starts again and goes on with the same agent job, no second create', async () => {
    // The simulator ignores the Idempotency-Key, as the live API does: the second run must find
    // the first run's job through the first run itself (its AgentJobId), not through the key.
    const projectId = project({ durationMs: 600_000 });
    const key = uniqueId('key');
    const input = { projectId, prompt: 'Take long', poll: { initialInterval: 200 } };
    const first = await startAgentJob(
      env.client,
      { ...input, timeout: '1s' },
      { taskQueue: worker.taskQueue, key },
    );
    const failure = await first.result().then(
      () => assert.fail('the first run should time out'),
      (e: unknown) => e,
    );
    assert.ok(failure instanceof WorkflowFailedError && failure.cause instanceof ApplicationFailure);
    assert.equal(failure.cause.type, FailureType.AgentJobTimedOut);
    const jobId = (await first.query(statusQuery)).jobId;
    assert.ok(jobId);

    const again = await startAgentJob(env.client, input, { taskQueue: worker.taskQueue, key });
    assert.equal(again.workflowId, agentJobWorkflowId(projectId, key));
    await waitFor(async () => (await again.query(statusQuery)).jobId, {
      what: 'the second run to find its job',
    });
    sim.archiveJob(projectId, jobId);
    const result = await again.result();
    assert.equal(result.job.id, jobId, 'the same agent job');
    assert.equal(result.created, false, 'this run did not create it');
    assert.equal(requestsTo(sim, projectId, 'create'), 1, 'POSTs to create');
  });

  test('a key whose workflow completed returns the existing result and starts nothing', async () => {
    const projectId = project({ durationMs: 100 });
    const key = uniqueId('key');
    const input = { projectId, prompt: 'Quick', poll: FAST_POLL };
    const first = await (
      await startAgentJob(env.client, input, { taskQueue: worker.taskQueue, key })
    ).result();
    const again = await startAgentJob(env.client, input, { taskQueue: worker.taskQueue, key });
    assert.deepEqual(await again.result(), first);
    assert.equal(requestsTo(sim, projectId, 'create'), 1);
  });
});
