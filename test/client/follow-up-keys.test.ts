/**
 * The keys of the client library across runs: a follow-up key already sent is not sent again when
 * the job's workflow has closed since, and a blank key is refused instead of sharing one workflow
 * among every caller that passes one. Real Temporal server, real worker, the simulator over HTTP.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { agentJobIdWorkflowId, sendFollowUp, startAgentJob } from '../../src/client/index.js';
import { InvalidInputError } from '../../src/contract.js';
import {
  FAST_POLL,
  runStarter,
  starterProcessEnv,
  uniqueId,
  waitFor,
  startSimulatedSuite,
} from '../harness.js';
import { requestsTo } from '../simulator-stats.js';

const suite = await startSimulatedSuite('follow-up-keys');
const { env, sim, worker, api, completedJob } = suite;

function project(prefix = 'docs'): string {
  return suite.project({}, prefix);
}

async function closed(workflowId: string): Promise<string> {
  return waitFor(
    async () => {
      const description = await env.client.workflow.getHandle(workflowId).describe();
      return description.status.name === 'RUNNING' ? null : description.runId;
    },
    { what: 'the job workflow to close' },
  );
}

describe('follow-up keys across runs', { concurrency: 2 }, () => {
  test('a key sent again after the job\u2019s workflow closed sends no second message', async () => {
    // Quotes in the project ID: the look-up of earlier runs must quote the workflow ID right.
    const projectId = project(`o'neil"docs`);
    const job = await completedJob(projectId);
    const key = uniqueId('follow-up');
    const input = { projectId, jobId: job.id, prompt: 'Add examples', poll: FAST_POLL };
    const first = await sendFollowUp(env.client, input, { taskQueue: worker.taskQueue, key });
    const turn = await first.result();
    assert.equal(turn.turns, 2);
    const runId = await closed(agentJobIdWorkflowId(projectId, job.id));

    const again = await sendFollowUp(env.client, input, { taskQueue: worker.taskQueue, key });
    assert.deepEqual(await again.result(), turn, 'the first send\u2019s result');
    assert.equal(requestsTo(sim, projectId, 'message'), 1, 'one message');
    const latest = await env.client.workflow.getHandle(again.workflowId).describe();
    assert.equal(latest.runId, runId, 'no new run was started');

    // Another key is another follow-up.
    const other = await sendFollowUp(env.client, input, { taskQueue: worker.taskQueue, key: uniqueId('k') });
    assert.equal((await other.result()).turns, 2, 'a new run counts its own turns');
    assert.equal(requestsTo(sim, projectId, 'message'), 2);
  });

  test('a key sent again after later runs of the job’s workflow sends no second message', async () => {
    const projectId = project();
    const job = await completedJob(projectId);
    const key = uniqueId('follow-up');
    const input = { projectId, jobId: job.id, prompt: 'Add examples', poll: FAST_POLL };
    const options = { taskQueue: worker.taskQueue };
    const turn = await (await sendFollowUp(env.client, input, { ...options, key })).result();
    const workflowId = agentJobIdWorkflowId(projectId, job.id);
    await closed(workflowId);
    // A later follow-up runs in a new run of the job's workflow, which closes too.
    await (await sendFollowUp(env.client, { ...input, prompt: 'Fix typos' }, options)).result();
    const latest = await closed(workflowId);
    assert.equal(requestsTo(sim, projectId, 'message'), 2);

    const again = await sendFollowUp(env.client, input, { ...options, key });
    assert.deepEqual(await again.result(), turn, 'the first send’s result');
    assert.equal(requestsTo(sim, projectId, 'message'), 2, 'no third message');
    const description = await env.client.workflow.getHandle(workflowId).describe();
    assert.equal(description.runId, latest, 'no new run was started');
  });
});

describe('a key whose run ended before its turn', () => {
  test('is not sent again either: result() reports how that run ended', async () => {
    const projectId = uniqueId('docs');
    sim.setScenario(projectId, { durationMs: 600_000 });
    const created = await api.createJob(projectId, 'Take long', { idempotencyKey: uniqueId('key') });
    const key = uniqueId('follow-up');
    // The follow-up waits behind the turn in progress; the workflow's deadline comes first.
    const input = { projectId, jobId: created.id, prompt: 'Then this', poll: FAST_POLL, timeout: '2s' };
    const first = await sendFollowUp(env.client, input, { taskQueue: worker.taskQueue, key });
    const runId = await closed(first.workflowId);

    const again = await sendFollowUp(env.client, input, { taskQueue: worker.taskQueue, key });
    const failure = await again.result().then(
      () => assert.fail('the follow-up should not have a result'),
      (err: unknown) => err,
    );
    // The server ends an update its run closed without answering as failed.
    assert.ok(failure instanceof WorkflowUpdateFailedError, String(failure));
    assert.match(String(failure.cause?.message), /closed|completed|ended/i);
    assert.equal(requestsTo(sim, projectId, 'message'), 0);
    assert.equal((await env.client.workflow.getHandle(first.workflowId).describe()).runId, runId);
  });
});

describe('blank keys', { concurrency: 2 }, () => {
  test('startAgentJob and sendFollowUp refuse a blank or malformed key, and start nothing', async () => {
    const projectId = project();
    for (const key of ['', '   ', 'k\ud800']) {
      await assert.rejects(
        startAgentJob(env.client, { projectId, prompt: 'Document it' }, { taskQueue: worker.taskQueue, key }),
        (err: unknown) => err instanceof InvalidInputError && err.field === 'key',
        JSON.stringify(key),
      );
      await assert.rejects(
        sendFollowUp(
          env.client,
          { projectId, jobId: 'job_x', prompt: 'More' },
          { taskQueue: worker.taskQueue, key },
        ),
        (err: unknown) => err instanceof InvalidInputError && err.field === 'key',
        JSON.stringify(key),
      );
    }
    const started = await env.client.workflow.count(`WorkflowId STARTS_WITH 'agent-job/${projectId}/'`);
    assert.equal(started.count, 0);
    assert.equal(requestsTo(sim, projectId, 'create'), 0);
  });

  test('the starter exits 2 on --key "", naming the key, and starts nothing', async () => {
    const projectId = project();
    const run = await runStarter(
      ['--project', projectId, '--prompt', 'Document it', '--key', ''],
      starterProcessEnv(env, worker.taskQueue),
    );
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.match(run.stderr, /invalid input: key: /);
    assert.equal(requestsTo(sim, projectId, 'create'), 0);
  });
});
