/**
 * Baseline (b): the "poll by activity retry" workflow. It creates the agent job, then runs one
 * activity whose retry policy (backoff coefficient 1, initial interval = the cadence, unlimited
 * attempts) polls until the job is terminal. The server schedules each retry, so the history holds
 * one activity however many polls it took: the smallest history a polling workflow can have.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { AgentJobRecord } from '../../src/contract.js';
import type { BaselineActivities } from './activities.js';
import { createJob } from './create.js';

/** Workflow type of the baseline. */
export const POLL_BY_RETRY_WORKFLOW = 'pollByRetryWorkflow';

/** Input of {@link pollByRetryWorkflow}. */
export interface PollByRetryInput {
  projectId: string;
  prompt: string;
  /** The cadence: the retry policy's initial interval, in ms. */
  intervalMs: number;
  /** Longest wait between attempts; default `intervalMs`. */
  maxIntervalMs?: number;
  /** Growth of the wait; default 1, the pattern as Temporal documents it for polling. */
  backoffCoefficient?: number;
}

/** Creates the agent job and waits for its end through activity retries; returns the final record. */
export async function pollByRetryWorkflow(input: PollByRetryInput): Promise<AgentJobRecord> {
  const { awaitTerminalStatus } = proxyActivities<BaselineActivities>({
    startToCloseTimeout: '75s',
    retry: {
      initialInterval: input.intervalMs,
      maximumInterval: input.maxIntervalMs ?? input.intervalMs,
      backoffCoefficient: input.backoffCoefficient ?? 1,
      // No maximumAttempts: unlimited, so only the agent job's end stops the polling.
    },
  });
  const created = await createJob(input.projectId, input.prompt);
  return awaitTerminalStatus({ projectId: input.projectId, jobId: created.id });
}
