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
import type { ActivityDeps, PolledRecord } from '../../src/activities/index.js';
import { POLL_PAST_DEADLINE } from '../../src/poll-schedule.js';
import { FailureType, type AgentJobRecord, type ApiErrorDetails } from '../../src/contract.js';
import type { RunningSimulator, Scenario } from '../../src/simulator/index.js';
import { activitiesFor, startTestSimulator, uniqueId } from '../harness.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

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

/**
 * Runs `fn` as attempt `attempt` of an activity scheduled just now with `remainingMs` to go before
 * the workflow's deadline, and returns the ApplicationFailure it threw.
 */
async function failureAt(
  attempt: number,
  fn: () => Promise<unknown>,
  remainingMs = 600_000,
): Promise<ApplicationFailure> {
  const env = new MockActivityEnvironment({
    attempt,
    scheduledTimestampMs: Date.now(),
    scheduleToCloseTimeoutMs: remainingMs,
  });
  const err = await env.run(fn).then(
    () => assert.fail('the activity should have failed'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ApplicationFailure, `expected ApplicationFailure, got ${String(err)}`);
  return err;
}

function detailsOf(failure: ApplicationFailure): ApiErrorDetails {
  return failure.details?.[0] as ApiErrorDetails;
}

function activities(deps: Omit<ActivityDeps, 'api'> = {}) {
  return activitiesFor(sim, API_KEY, deps);
}

describe('activity failure policy', () => {
  test('404 on get goes back to the workflow at once, not final: the workflow counts them in a row', async () => {
    const projectId = project();
    const failure = await failureAt(1, () =>
      activities().getAgentJob({ projectId, jobId: 'job_does_not_exist' }),
    );
    assert.equal(failure.type, FailureType.JobNotFound);
    assert.equal(failure.nonRetryable, true, 'not retried by Temporal');
    assert.deepEqual(detailsOf(failure), {
      status: 404,
      retryAfterMs: null,
      attempt: 1,
      final: false,
      bound: 'blip',
    });
  });

  test('a body that is not a record goes back to the workflow with a short excerpt, not final', async () => {
    // A proxy's HTML page answered with 200: the status says success, the body is not a record.
    const projectId = project({ faults: { rules: [{ endpoint: 'get', kind: 'html', status: 200 }] } });
    const failure = await failureAt(4, () =>
      activities().getAgentJob({ projectId, jobId: 'job_behind_a_proxy' }),
    );
    assert.equal(failure.type, FailureType.UnexpectedResponse);
    assert.equal(failure.nonRetryable, true);
    assert.equal(detailsOf(failure).final, false);
    assert.equal(detailsOf(failure).attempt, 4);
    assert.match(failure.message, /<html/i, 'the message carries a short excerpt of the body');
  });

  test('Retry-After on 429 becomes the next retry delay, with up to 20% jitter on top', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', kind: 'status', status: 429, retryAfter: { seconds: 7 } }] },
    });
    const failure = await failureAt(1, () =>
      activities().createAgentJob({ projectId, prompt: 'p', idempotencyKey: uniqueId('key') }),
    );
    assert.equal(failure.type, FailureType.RateLimited);
    assert.equal(failure.nonRetryable, false);
    assert.equal(failure.category, 'BENIGN', 'a retried error is logged as expected, not as a failure');
    assert.ok(
      failure.nextRetryDelay !== undefined &&
        Number(failure.nextRetryDelay) >= 7_000 &&
        Number(failure.nextRetryDelay) <= 8_400,
      `nextRetryDelay ${String(failure.nextRetryDelay)}`,
    );
  });

  for (const [name, retryAfter] of [
    ['Retry-After: 0', { seconds: 0 }],
    ['a Retry-After date in the past (clock skew)', { seconds: -3600, form: 'http-date' as const }],
  ] as const) {
    test(`${name} never shortens the wait below the policy's backoff`, async () => {
      const projectId = project({
        faults: { rules: [{ endpoint: 'get', kind: 'status', status: 503, retryAfter }] },
      });
      // Attempt 3 of the default get policy (1 s, doubling) waits at least 4 s.
      const failure = await failureAt(3, () => activities().getAgentJob({ projectId, jobId: 'job_x' }));
      assert.equal(failure.type, FailureType.ServiceUnavailable);
      assert.equal(detailsOf(failure).retryAfterMs, 0);
      const delay = Number(failure.nextRetryDelay);
      assert.ok(delay >= 4_000 && delay <= 4_800, `nextRetryDelay ${delay}`);
    });
  }

  test('a wait that would outlast the deadline goes back to the workflow instead', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'get', kind: 'status', status: 503, retryAfter: { seconds: 45 } }] },
    });
    const failure = await failureAt(1, () => activities().getAgentJob({ projectId, jobId: 'job_x' }), 12_000);
    assert.equal(failure.type, FailureType.ServiceUnavailable);
    assert.equal(failure.nonRetryable, true, 'Temporal does not wait 45 s past a 12 s deadline');
    assert.deepEqual(detailsOf(failure), {
      status: 503,
      retryAfterMs: 45_000,
      attempt: 1,
      final: false,
      bound: 'deadline',
    });
  });

  describe('the poll activity keeps to the deadline in its input (it has no schedule-to-close timeout)', () => {
    const schedule = { intervalMs: 5_000, maxIntervalMs: 60_000, backoffCoefficient: 1.5 };
    // As the workflow schedules it: no schedule-to-close timeout in the activity's info.
    const pollAt = async (attempt: number, fn: () => Promise<unknown>) => {
      const env = new MockActivityEnvironment({ attempt, scheduledTimestampMs: Date.now() });
      return env.run(fn).then(
        (value) => ({ value, error: null }),
        (error: unknown) => ({ value: null, error }),
      );
    };

    test('an attempt that starts after the deadline sends no GET and fails final', async () => {
      const projectId = project();
      const { value, error } = await pollAt(3, () =>
        activities().pollAgentJob({ projectId, jobId: 'job_late', schedule, deadlineMs: Date.now() - 1 }),
      );
      assert.equal(value, null);
      assert.ok(error instanceof ApplicationFailure);
      assert.equal(error.type, POLL_PAST_DEADLINE);
      assert.equal(error.nonRetryable, true);
      assert.equal(requestsTo(sim, projectId, 'get'), 0);
    });

    test('an active job whose next poll would come after the deadline is returned to the workflow', async () => {
      const projectId = project({ durationMs: 60_000 });
      const created: AgentJobRecord = await new MockActivityEnvironment().run(() =>
        activities().createAgentJob({ projectId, prompt: 'p', idempotencyKey: uniqueId('key') }),
      );
      const { value } = await pollAt(1, () =>
        activities().pollAgentJob({ projectId, jobId: created.id, schedule, deadlineMs: Date.now() + 3_000 }),
      );
      assert.deepEqual(
        { status: (value as PolledRecord).record.status, polls: (value as PolledRecord).polls },
        { status: 'active', polls: 1 },
      );
    });

    test('a transient error whose retry would come after the deadline goes back to the workflow', async () => {
      const projectId = project({ faults: { rules: [{ endpoint: 'get', kind: 'status', status: 503 }] } });
      const { error } = await pollAt(1, () =>
        activities().pollAgentJob({ projectId, jobId: 'job_x', schedule, deadlineMs: Date.now() + 3_000 }),
      );
      assert.ok(error instanceof ApplicationFailure);
      assert.equal(error.type, FailureType.ServiceUnavailable);
      assert.equal(error.nonRetryable, true, 'no retry is set for after the deadline');
    });

    test('a GET that hangs ends at the deadline, not at its own 20 s bound', async () => {
      const projectId = project({ faults: { rules: [{ endpoint: 'get', kind: 'hang' }] } });
      const started = Date.now();
      const { error } = await pollAt(1, () =>
        activities().pollAgentJob({ projectId, jobId: 'job_x', schedule, deadlineMs: Date.now() + 1_000 }),
      );
      assert.ok(error instanceof ApplicationFailure);
      assert.equal(error.type, FailureType.RequestTimeout);
      assert.equal(error.nonRetryable, true, 'its retry would come after the deadline');
      assert.ok(Date.now() - started < 10_000, `ended after ${Date.now() - started} ms`);
    });
  });

  test('final API errors are non-retryable with their own type, and say they are final', async () => {
    const projectId = project({ projectExists: false });
    const failure = await failureAt(1, () =>
      activities().createAgentJob({ projectId, prompt: 'p', idempotencyKey: uniqueId('key') }),
    );
    assert.equal(failure.type, FailureType.ProjectNotFound);
    assert.equal(failure.nonRetryable, true);
    assert.equal(detailsOf(failure).final, true);
    assert.equal(failure.category, undefined, 'a final error is a real failure in logs and metrics');
  });

  test('a failure is small: short stacks, no network error chain (it goes into history)', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'get', kind: 'drop' }] } });
    const failure = await failureAt(1, () => activities().getAgentJob({ projectId, jobId: 'job_x' }));
    assert.equal(failure.type, FailureType.NetworkError);
    assert.equal(failure.stack, `ApplicationFailure: ${failure.message}`);
    assert.ok(failure.cause instanceof Error);
    assert.equal(failure.cause.cause, undefined);
    assert.ok(!(failure.cause.stack ?? '').includes('\n'), 'the cause has no stack frames');
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

    test('policy "retry" (default): handed back to the workflow as maybe applied; the attempt after it sends again, and the key does not save it', async () => {
      const projectId = project(scenario);
      const input = { projectId, prompt: 'p', idempotencyKey: uniqueId('key') };
      const failure = await failureAt(1, () => activities().createAgentJob(input));
      assert.equal(failure.type, FailureType.NetworkError);
      assert.equal(failure.nonRetryable, true, 'Temporal does not send it again: the workflow decides');
      assert.equal(detailsOf(failure).mayHaveBeenApplied, true);
      assert.equal(detailsOf(failure).final, false);
      // The workflow's next attempt says why it is uncertain; under "retry" it is sent.
      const record: AgentJobRecord = await new MockActivityEnvironment({ heartbeatTimeoutMs: 10_000 }).run(
        () =>
          activities().createAgentJob({ ...input, uncertain: 'an attempt that failed with NetworkError' }),
      );
      assert.equal(record.status, 'active');
      assert.equal(createdJobs(sim, projectId), 2, 'a second agent job: the API honours no key');
    });

    test('policy "fail": an attempt after an uncertain one sends nothing', async () => {
      const projectId = project({});
      const failure = await failureAt(2, () =>
        activities({ ambiguousCreatePolicy: 'fail' }).createAgentJob({
          projectId,
          prompt: 'p',
          idempotencyKey: uniqueId('key'),
          uncertain: 'an attempt whose worker stopped heartbeating',
        }),
      );
      assert.equal(failure.type, FailureType.CreateOutcomeUnknown);
      assert.equal(failure.nonRetryable, true);
      assert.match(failure.message, /stopped heartbeating may have reached the API/);
      assert.equal(requestsTo(sim, projectId, 'create'), 0, 'nothing sent');
    });

    test('the same policy holds for a follow-up message: "fail" gives MessageOutcomeUnknown', async () => {
      const projectId = project({
        faults: { rules: [{ endpoint: 'message', first: 1, kind: 'status', status: 502 }] },
      });
      const record: AgentJobRecord = await new MockActivityEnvironment().run(() =>
        activities().createAgentJob({ projectId, prompt: 'p', idempotencyKey: uniqueId('key') }),
      );
      const failure = await failureAt(1, () =>
        activities({ ambiguousCreatePolicy: 'fail' }).sendAgentJobMessage({
          projectId,
          jobId: record.id,
          prompt: 'again',
          idempotencyKey: uniqueId('key'),
        }),
      );
      assert.equal(failure.type, FailureType.MessageOutcomeUnknown);
      assert.equal(failure.nonRetryable, true);
      assert.match(failure.message, /may or may not have started a turn/);
    });
  });
});
