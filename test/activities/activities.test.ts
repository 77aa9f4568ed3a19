/**
 * The activities' failure policy, against the real simulator over HTTP: which API errors Temporal
 * may retry, the bounds on 404 and unexpected bodies, Retry-After as the next retry delay, and the
 * policy for creates whose outcome is unknown. The activity context (attempt number) comes from
 * the SDK's MockActivityEnvironment; no Temporal server is needed for these.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { ActivityDeps } from '../../src/activities/index.js';
import { FailureType, type AgentJobRecord } from '../../src/contract.js';
import type { RunningSimulator, Scenario } from '../../src/simulator/index.js';
import { activitiesFor, startTestSimulator, uniqueId } from '../harness.js';
import { createdJobs } from '../simulator-stats.js';

const API_KEY = `activity-test-key-${randomUUID()}`;
let sim: RunningSimulator;

before(async () => {
  sim = await startTestSimulator({ apiKeys: [API_KEY], defaultScenario: { durationMs: 60_000 } });
});

function project(scenario: Partial<Scenario> = {}): string {
  const projectId = uniqueId('docs');
  sim.setScenario(projectId, scenario);
  return projectId;
}

/** Runs `fn` as attempt `attempt` of an activity and returns the ApplicationFailure it threw. */
async function failureAt(attempt: number, fn: () => Promise<unknown>): Promise<ApplicationFailure> {
  const env = new MockActivityEnvironment({ attempt });
  const err = await env.run(fn).then(
    () => assert.fail('the activity should have failed'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ApplicationFailure, `expected ApplicationFailure, got ${String(err)}`);
  return err;
}

function activities(deps: Omit<ActivityDeps, 'api'> = {}) {
  return activitiesFor(sim, API_KEY, deps);
}

describe('activity failure policy', () => {
  test('404 on get is retryable for the first attempts, then final JobNotFound', async () => {
    const projectId = project();
    const { getAgentJob } = activities({ jobNotFoundAttempts: 3 });
    const input = { projectId, jobId: 'job_does_not_exist' };
    const early = await failureAt(1, () => getAgentJob(input));
    assert.equal(early.type, FailureType.JobNotFound);
    assert.equal(early.nonRetryable, false);
    const last = await failureAt(3, () => getAgentJob(input));
    assert.equal(last.type, FailureType.JobNotFound);
    assert.equal(last.nonRetryable, true);
    assert.match(last.message, /gave up after 3 attempts/);
  });

  test('a body that is not a record is retryable a bounded number of times, then final', async () => {
    // A proxy's HTML page answered with 200: the status says success, the body is not a record.
    const projectId = project({ faults: { rules: [{ endpoint: 'get', kind: 'html', status: 200 }] } });
    const { getAgentJob } = activities({ unexpectedResponseAttempts: 2 });
    const input = { projectId, jobId: 'job_behind_a_proxy' };
    const early = await failureAt(1, () => getAgentJob(input));
    assert.equal(early.type, FailureType.UnexpectedResponse);
    assert.equal(early.nonRetryable, false);
    assert.match(early.message, /<html/i, 'the message carries a short excerpt of the body');
    const last = await failureAt(2, () => getAgentJob(input));
    assert.equal(last.type, FailureType.UnexpectedResponse);
    assert.equal(last.nonRetryable, true);
  });

  test('Retry-After on 429 becomes the next retry delay', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', kind: 'status', status: 429, retryAfter: { seconds: 7 } }] },
    });
    const failure = await failureAt(1, () =>
      activities().createAgentJob({ projectId, prompt: 'p', idempotencyKey: uniqueId('key') }),
    );
    assert.equal(failure.type, FailureType.RateLimited);
    assert.equal(failure.nonRetryable, false);
    assert.equal(failure.nextRetryDelay, 7_000);
  });

  test('final API errors are non-retryable with their own type', async () => {
    const projectId = project({ projectExists: false });
    const failure = await failureAt(1, () =>
      activities().createAgentJob({ projectId, prompt: 'p', idempotencyKey: uniqueId('key') }),
    );
    assert.equal(failure.type, FailureType.ProjectNotFound);
    assert.equal(failure.nonRetryable, true);
  });

  describe('a create whose outcome is unknown (reset after the job was stored)', () => {
    const scenario: Partial<Scenario> = {
      faults: { rules: [{ endpoint: 'create', first: 1, kind: 'reset-after-store' }] },
    };

    test('policy "fail": CreateOutcomeUnknown, final, and the message says to look before starting again', async () => {
      const projectId = project(scenario);
      const failure = await failureAt(1, () =>
        activities({ ambiguousCreatePolicy: 'fail' }).createAgentJob({
          projectId,
          prompt: 'p',
          idempotencyKey: uniqueId('key'),
        }),
      );
      assert.equal(failure.type, FailureType.CreateOutcomeUnknown);
      assert.equal(failure.nonRetryable, true);
      assert.match(failure.message, /may or may not have been created/);
      assert.equal(createdJobs(sim, projectId), 1, 'the simulator did store the job');
    });

    test('policy "retry" (default): retryable, and the retry with the same key returns the same job', async () => {
      const projectId = project(scenario);
      const { createAgentJob } = activities();
      const input = { projectId, prompt: 'p', idempotencyKey: uniqueId('key') };
      const failure = await failureAt(1, () => createAgentJob(input));
      assert.equal(failure.type, FailureType.NetworkError);
      assert.equal(failure.nonRetryable, false);
      const record: AgentJobRecord = await new MockActivityEnvironment({ attempt: 2 }).run(() =>
        createAgentJob(input),
      );
      assert.equal(record.status, 'active');
      assert.equal(createdJobs(sim, projectId), 1, 'no second agent job');
    });
  });
});
