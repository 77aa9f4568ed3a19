/**
 * The outcome label the per-project metrics count a job's end under: only errors that end the run
 * get one, so that a workflow task failure, which the worker retries, is not counted as an end.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActivityFailure, ApplicationFailure, CancelledFailure, RetryState } from '@temporalio/common';
import { ContinueAsNew } from '@temporalio/workflow';
import { FailureType } from '../../../src/contract.js';
import {
  agentJobFailed,
  outcomeOf,
  timedOut,
  turnResult,
  unknownStatus,
} from '../../../src/workflows/agent-job/outcomes.js';

test('a failure of the contract is counted by its type, a cancellation as cancelled', () => {
  assert.equal(
    outcomeOf(ApplicationFailure.create({ type: FailureType.AgentJobTimedOut })),
    'AgentJobTimedOut',
  );
  assert.equal(outcomeOf(new CancelledFailure('cancelled')), 'cancelled');
});

test('another Temporal failure ends the workflow too, as error', () => {
  const failure = new ActivityFailure(
    'failed',
    'createAgentJob',
    '1',
    RetryState.MAXIMUM_ATTEMPTS_REACHED,
    undefined,
  );
  assert.equal(outcomeOf(failure), 'error');
  assert.equal(outcomeOf(ApplicationFailure.create({ message: 'no type' })), 'error');
});

test('continue-as-new and a plain error (the task is retried) end nothing', () => {
  assert.equal(outcomeOf(new ContinueAsNew({})), null);
  assert.equal(outcomeOf(new TypeError('a bug')), null);
});

const record = { id: 'job_1', status: 'completed', prLink: 'https://github.com/o/r/pull/1' };
const hostile = { id: 'job_\u001b]8;;https://evil.example\u001b\\x', status: 'failed\u202e', prLink: null };

test('the result carries resent: 0 normally, the count when calls were sent again', () => {
  for (const resent of [0, 2]) {
    const result = turnResult({ projectId: 'p', polls: 3, turns: 1, resent, created: true }, record);
    assert.deepEqual(result, {
      job: record,
      prLink: record.prLink,
      status: 'completed',
      polls: 3,
      turns: 1,
      created: true,
      resent,
    });
  }
});

test('AgentJobFailed and AgentJobTimedOut carry resent in their details, and say so when it is not 0', () => {
  assert.throws(
    () =>
      turnResult(
        { projectId: 'p', polls: 1, turns: 1, resent: 1, created: true },
        { ...record, status: 'failed' },
      ),
    (err: unknown) =>
      err instanceof ApplicationFailure &&
      err.type === FailureType.AgentJobFailed &&
      JSON.stringify(err.details?.[1]) === '{"resent":1}',
  );
  const failure = agentJobFailed('p', { ...record, status: 'failed' }, 1);
  assert.deepEqual(failure.details?.[1], { resent: 1 });
  assert.match(
    failure.message,
    /1 creates or messages were sent again .*duplicate agent job or turn is possible/,
  );
  assert.doesNotMatch(agentJobFailed('p', record, 0).message, /sent again/);
  const progress = { lastRecord: record, lastError: null, jobId: 'job_1', polls: 2, resent: 3 };
  const late = timedOut(progress, 'the agent job was still active');
  assert.deepEqual(late.details?.[1], { lastError: null, resent: 3 });
  assert.match(late.message, /3 creates or messages were sent again/);
});

test('IDs and statuses from the API are JSON-quoted in a message: nothing in them acts on a terminal', () => {
  const messages = [
    agentJobFailed('p', { ...hostile, status: 'failed' }, 0).message,
    unknownStatus(hostile, 7).message,
    timedOut({ lastRecord: hostile, lastError: null, jobId: hostile.id, polls: 1, resent: 0 }, 'x').message,
  ];
  for (const message of messages) {
    assert.doesNotMatch(message, /[\p{Cc}\p{Cf}]/u, message);
    assert.ok(message.includes(JSON.stringify(hostile.id)), message);
  }
  assert.match(agentJobFailed('docs', record, 0).message, /^Agent job "job_1" in project "docs" failed/);
  assert.match(unknownStatus(hostile, 7).message, /undocumented status "failed\\u202e"/);
});
