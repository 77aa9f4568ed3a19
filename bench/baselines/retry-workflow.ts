/**
 * Baseline (b): the "poll by activity retry" workflow. It creates the agent job, then runs one
 * activity whose retry policy (backoff coefficient 1, initial interval = the cadence, unlimited
 * attempts) polls until the job is terminal. The server schedules each retry, so the history holds
 * one activity however many polls it took: the smallest history a polling workflow can have.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { AgentJobRecord } from '../../src/contract.js';
import type { BaselineActivities } from './activities.js';
import { createJob, type BaselineInput } from './create.js';

/** Workflow type of the baseline. */
export const POLL_BY_RETRY_WORKFLOW = 'pollByRetryWorkflow';

/** Creates the agent job and waits for its end through activity retries; returns the final record. */
export async function pollByRetryWorkflow(input: BaselineInput): Promise<AgentJobRecord> {
  const { awaitTerminalStatus } = proxyActivities<BaselineActivities>({
    startToCloseTimeout: '75s',
    // The schedule as a retry policy: the cadence, growing by its coefficient (1, the pattern as
    // Temporal documents it for polling) up to its longest wait.
    retry: {
      initialInterval: input.schedule.initialIntervalMs,
      maximumInterval: input.schedule.maxIntervalMs,
      backoffCoefficient: input.schedule.backoffCoefficient,
      // No maximumAttempts: unlimited, so only the agent job's end stops the polling.
    },
  });
  const created = await createJob(input.projectId, input.prompt);
  return awaitTerminalStatus({ projectId: input.projectId, jobId: created.id });
}
