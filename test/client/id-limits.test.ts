/**
 * IDs against a server that takes workflow IDs of at most 255 bytes, as the compose file's does:
 * derived workflow IDs (the quota workflow's, a long key's) fit, and IDs that cannot work (too
 * long, not well-formed, `.` and `..`, padded) are refused at input, by the client and by the
 * workflow itself, before anything is created. Its own dev server (the limit is a server setting),
 * a real worker, the simulator over HTTP.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { ApplicationFailure } from '@temporalio/common';
import { startDevServer } from '../../dev/dev-server.js';
import { agentJobWorkflowId, sendFollowUp, startAgentJob } from '../../src/client/index.js';
import { FailureType, InvalidInputError, type AgentJobInput } from '../../src/contract.js';
import { projectQuotaWorkflowId } from '../../src/quota/messages.js';
import { DEFAULT_QUOTA_LEASE_MS } from '../../src/quota/settings.js';
import {
  activitiesFor,
  FAST_POLL,
  onCleanup,
  runStarter,
  starterProcessEnv,
  startSimulatedSuite,
  startTestSimulator,
  startTestWorker,
  temporalEnv,
  uniqueId,
  workflowFailure,
} from '../harness.js';
import { requestsTo } from '../simulator-stats.js';

const server = await startDevServer({ dynamicConfig: { 'limit.maxIDLength': 255 } });
// Registered first, so it runs last: after the worker and the connections are closed.
onCleanup(() => server.stop());
// The suite's world on this server: temporalEnv keeps the first target it is given.
await temporalEnv({ address: server.address, namespace: server.namespace });
const projectQuota = {
  defaultLimit: { uses: 100, windowMs: 3_600_000 },
  overrides: {},
  leaseMs: DEFAULT_QUOTA_LEASE_MS,
};
const suite = await startSimulatedSuite('id-limits', { durationMs: 200, activities: { projectQuota } });
const { env, sim, worker } = suite;

/** A project ID unique to the test: 8 hex digits, then `count` times `char`. */
function projectOf(char: string, count: number): string {
  return randomUUID().slice(0, 8) + char.repeat(count);
}

async function failureOf(input: Partial<AgentJobInput> & { projectId: string }): Promise<ApplicationFailure> {
  return workflowFailure(
    await suite.startJob({ prompt: 'Document it', poll: FAST_POLL, timeout: '15s', ...input }),
  );
}

describe('derived workflow IDs fit 255 bytes', { concurrency: 3 }, () => {
  test('a project of 27 CJK characters gets its quota workflow, and its job completes', async () => {
    const projectId = projectOf('\u6587', 27);
    assert.ok(Buffer.byteLength(`agent-quota/${encodeURIComponent(projectId)}`) > 255);
    const handle = await startAgentJob(
      env.client,
      { projectId, prompt: 'Document it', poll: FAST_POLL, timeout: '20s' },
      { taskQueue: worker.taskQueue },
    );
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    const quota = await env.client.workflow.getHandle(projectQuotaWorkflowId(projectId)).describe();
    assert.equal(quota.type, 'projectQuota');
  });

  test('a key of 300 characters starts a workflow whose ID fits, and the same key finds it again', async () => {
    const projectId = uniqueId('docs');
    const key = `${randomUUID()}-${'k'.repeat(300)}`;
    const input = { projectId, prompt: 'Document it', poll: FAST_POLL };
    const handle = await startAgentJob(env.client, input, { taskQueue: worker.taskQueue, key });
    assert.ok(Buffer.byteLength(handle.workflowId) <= 255, `${Buffer.byteLength(handle.workflowId)} bytes`);
    assert.equal(handle.workflowId, agentJobWorkflowId(projectId, key));
    const first = await handle.result();
    const again = await startAgentJob(env.client, input, { taskQueue: worker.taskQueue, key });
    assert.deepEqual(await again.result(), first);
    assert.equal(requestsTo(sim, projectId, 'create'), 1);
  });
});

describe('IDs that cannot work are refused at input', { concurrency: 3 }, () => {
  test('the client refuses a 240-byte project ID before anything starts', async () => {
    const projectId = projectOf('p', 232);
    await assert.rejects(
      startAgentJob(env.client, { projectId, prompt: 'Document it' }, { taskQueue: worker.taskQueue }),
      (err: unknown) =>
        err instanceof InvalidInputError && err.field === 'projectId' && /the limit is 200/.test(err.message),
    );
    await assert.rejects(
      sendFollowUp(
        env.client,
        { projectId: 'docs', jobId: 'j'.repeat(2_100), prompt: 'More' },
        { taskQueue: worker.taskQueue },
      ),
      (err: unknown) => err instanceof InvalidInputError && err.field === 'jobId',
    );
    assert.equal(requestsTo(sim, projectId, 'create'), 0);
  });

  test('a workflow started with project ID "..", "." or a padded one fails InvalidInput: no quota use, no request', async () => {
    // A simulator and a worker of this test's own, so "no request at all" can be counted.
    const apiKey = uniqueId('dots-key');
    const ownSim = await startTestSimulator({ apiKeys: [apiKey] });
    const own = await startTestWorker(env, activitiesFor(ownSim, apiKey, { projectQuota }));
    const padded = ` ${uniqueId('docs')} `;
    for (const [projectId, message] of [
      ['..', /projectId: "\.\." is not a usable ID/],
      ['.', /projectId: "\." is not a usable ID/],
      // `docs-` and 8 hex digits: nothing to escape in a pattern.
      [
        padded,
        new RegExp(`projectId: "${padded}" has leading or trailing white space; send "${padded.trim()}"`),
      ],
    ] as const) {
      const handle = await suite.startJob(
        { projectId, prompt: 'Document it', poll: FAST_POLL, timeout: '15s' },
        { taskQueue: own.taskQueue, workflowId: uniqueId('id-limits-dots') },
      );
      const failure = await workflowFailure(handle);
      assert.equal(failure.type, FailureType.InvalidInput, failure.message);
      assert.match(failure.message, message);
      assert.deepEqual(failure.details, [{ field: 'projectId' }]);
      const events = (await handle.fetchHistory()).events ?? [];
      assert.ok(!events.some((e) => e.activityTaskScheduledEventAttributes), 'no activity was scheduled');
      // The quota workflow is started by the first use a project takes: none was taken.
      await assert.rejects(
        env.client.workflow.getHandle(projectQuotaWorkflowId(projectId)).describe(),
        WorkflowNotFoundError,
      );
    }
    const requests = Object.values(ownSim.stats().requestsPerEndpoint).reduce((sum, n) => sum + n, 0);
    assert.equal(requests, 0, 'the simulator saw no request');
  });

  test('the starter exits 2 for a padded project ID, saying what to send, and starts nothing', async () => {
    const projectId = uniqueId('docs');
    const run = await runStarter(
      ['--project', ` ${projectId}`, '--prompt', 'Document it'],
      starterProcessEnv(env, worker.taskQueue),
    );
    assert.equal(run.code, 2, run.stderr);
    assert.ok(
      run.stderr.includes(
        `invalid input: projectId: " ${projectId}" has leading or trailing white space; send "${projectId}"`,
      ),
      run.stderr,
    );
    await assert.rejects(
      env.client.workflow.getHandle(projectQuotaWorkflowId(` ${projectId}`)).describe(),
      WorkflowNotFoundError,
    );
  });

  test('the starter exits 2 naming the field, and starts nothing', async () => {
    const projectId = projectOf('p', 232);
    const run = await runStarter(
      ['--project', projectId, '--prompt', 'Document it'],
      starterProcessEnv(env, worker.taskQueue),
    );
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /invalid input: projectId: is 240 bytes of UTF-8; the limit is 200/);
    assert.equal(requestsTo(sim, projectId, 'create'), 0);
  });

  for (const [name, input, field] of [
    ['a 240-byte project ID', { projectId: projectOf('p', 232) }, 'projectId'],
    ['a project ID with a lone surrogate', { projectId: `${uniqueId('docs')}\ud800` }, 'projectId'],
    ['a 2,100-byte job ID', { projectId: uniqueId('docs'), jobId: 'j'.repeat(2_100) }, 'jobId'],
  ] as const) {
    test(`a workflow started directly with ${name} fails InvalidInput at once; the API saw nothing`, async () => {
      const failure = await failureOf(input);
      assert.equal(failure.type, FailureType.InvalidInput, failure.message);
      assert.ok(failure.message.includes(field), failure.message);
      for (const endpoint of ['create', 'get', 'message'] as const) {
        assert.equal(requestsTo(sim, input.projectId, endpoint), 0, endpoint);
      }
    });
  }
});
