/**
 * The create step of the benchmark's own workflows, as the agent-job workflow takes it when
 * nothing fails: the project's create activity as a regular activity, with the worker's timeout and
 * retry policy, and the workflow ID as the idempotency key. One step for both, so the baselines
 * differ from this worker, and from each other, only in how they poll.
 */
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { AgentJobRecord } from '../../src/contract.js';
import type { Schedule } from '../schedule.js';
import { CREATE_BACKOFF, retryPolicyOf } from '../../src/failure-policy/backoff.js';
import type { BaselineActivities } from './activities.js';

const { createAgentJob } = proxyActivities<BaselineActivities>({
  // The worker's: the HTTP client gives up well before this (connect 10 s, headers 30 s, body 30 s).
  startToCloseTimeout: '75s',
  retry: retryPolicyOf(CREATE_BACKOFF),
});

/** Input of the baselines' workflows: the job to create, and the schedule to poll it on. */
export interface BaselineInput {
  projectId: string;
  prompt: string;
  schedule: Schedule;
}

/** Creates the agent job of this workflow and returns its first record. */
export function createJob(projectId: string, prompt: string): Promise<AgentJobRecord> {
  return createAgentJob({ projectId, prompt, idempotencyKey: workflowInfo().workflowId });
}
