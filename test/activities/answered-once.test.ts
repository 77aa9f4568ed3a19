/**
 * A create or follow-up message the API answered with 2xx took effect, whatever its body: it is
 * never sent again. The workflow goes on with what the answer lets it read (the job ID), or fails
 * with `UnreadableAnswer` naming what to look for. Records that drift in optional fields are read.
 * Real Temporal server, real worker, the simulator over HTTP.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import {
  FailureType,
  followUpUpdate,
  statusQuery,
  type AgentJobInput,
  type AgentJobResult,
} from '../../src/contract.js';
import { FAST_POLL, startSimulatedSuite, waitFor, workflowFailure } from '../harness.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const suite = await startSimulatedSuite('answered');
const { sim, project } = suite;

function start(input: Partial<AgentJobInput> & { projectId: string }) {
  return suite.startJob({ prompt: 'Document the API', poll: FAST_POLL, timeout: '60s', ...input });
}

describe('a 2xx answer is never sent again', { concurrency: 4 }, () => {
  test('a create answered 201 with a wrong-typed status: the workflow goes on with the job ID it names', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', first: 1, kind: 'altered', set: { status: 12 } }] },
    });
    const result: AgentJobResult = await (await start({ projectId })).result();
    assert.equal(result.status, 'completed');
    assert.equal(requestsTo(sim, projectId, 'create'), 1, 'the create was sent once');
    assert.equal(createdJobs(sim, projectId), 1);
    assert.equal(result.job.id, sim.stats().jobs.find((job) => job.projectId === projectId)?.id);
  });

  test('a create answered with a cut body: the job ID at its start is enough to go on', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', first: 1, kind: 'truncated', status: 200 }] },
    });
    const result = await (await start({ projectId })).result();
    assert.equal(result.status, 'completed');
    assert.equal(requestsTo(sim, projectId, 'create'), 1);
  });

  test('a create answered 200 with an HTML page: UnreadableAnswer, final, sent once, says what to do', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', first: 1, kind: 'html', status: 200 }] },
    });
    const failure = await workflowFailure(await start({ projectId }));
    assert.equal(failure.type, FailureType.UnreadableAnswer, failure.message);
    assert.equal(failure.nonRetryable, true);
    assert.ok(failure.message.includes(projectId), failure.message);
    assert.match(failure.message, /not sent again/);
    assert.match(failure.message, /jobId/);
    assert.equal(requestsTo(sim, projectId, 'create'), 1, 'the create was sent once');
  });

  test('a follow-up message answered 200 without a status: read the job, the new turn ends, sent once', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'message', first: 1, kind: 'altered', remove: ['status'] }] },
    });
    const handle = await start({ projectId });
    await waitFor(async () => (await handle.query(statusQuery)).jobId, { what: 'the job' });
    const update = await handle.startUpdate(followUpUpdate, {
      args: ['Now add examples'],
      waitForStage: 'ACCEPTED',
    });
    const turn = await update.result().catch((err: unknown) => {
      if (err instanceof WorkflowUpdateFailedError) assert.fail(String(err.cause?.message));
      throw err;
    });
    assert.equal(turn.status, 'completed');
    assert.equal(turn.turns, 2);
    assert.equal(requestsTo(sim, projectId, 'message'), 1, 'the message was sent once');
    const job = sim.stats().jobs.find((j) => j.projectId === projectId);
    assert.equal(job?.turns, 2);
    await handle.result();
  });

  test('every read with drift in optional fields: the job still completes, unknown fields kept', async () => {
    const projectId = project({
      faults: {
        rules: [
          { endpoint: 'get', kind: 'altered', set: { model: 42, source: 'org/docs', region: 'eu-west-1' } },
        ],
      },
    });
    const result = await (await start({ projectId })).result();
    assert.equal(result.status, 'completed');
    assert.equal(result.job.model, undefined);
    assert.equal(result.job.source, undefined);
    assert.equal(result.job.region, 'eu-west-1');
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\//);
  });
});
