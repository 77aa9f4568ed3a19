/**
 * The outcome label the per-project metrics count a job's end under: only errors that end the run
 * get one, so that a workflow task failure, which the worker retries, is not counted as an end.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActivityFailure, ApplicationFailure, CancelledFailure, RetryState } from '@temporalio/common';
import { ContinueAsNew } from '@temporalio/workflow';
import { FailureType } from '../../../src/contract.js';
import { outcomeOf } from '../../../src/workflows/agent-job/outcomes.js';

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
