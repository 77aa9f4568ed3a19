/**
 * Baseline (c), the floor of this design: the agent-job workflow's own work when nothing goes
 * wrong, and nothing else (docs/PERFORMANCE.md, "Implementations"). No continue-as-new: a load
 * run's jobs poll a few dozen times at most, far below the worker's 150 polls per run, so the
 * worker does not continue as new in them either.
 */
import { proxyLocalActivities, sleep } from '@temporalio/workflow';
import { isTerminalStatus, type AgentJobRecord } from '../../src/contract.js';
import { GET_BACKOFF, retryPolicyOf } from '../../src/failure-policy/backoff.js';
import { pollJitterFactor } from '../../src/poll-schedule.js';
import type { BaselineActivities } from './activities.js';
import { createJob, type BaselineInput } from './create.js';

/** Workflow type of the baseline. */
export const FLOOR_WORKFLOW = 'floorWorkflow';

const { readAgentJob } = proxyLocalActivities<BaselineActivities>({
  // The worker's poll timeout and backoff. A poll that succeeds, as every poll of a load run does,
  // spends nothing on the retry policy; unlimited attempts, since the floor has no loop of its own
  // for a failed poll.
  startToCloseTimeout: '75s',
  retry: retryPolicyOf(GET_BACKOFF),
});

/** Creates the agent job and polls it until it is terminal; returns the final record. */
export async function floorWorkflow(input: BaselineInput): Promise<AgentJobRecord> {
  const created = await createJob(input.projectId, input.prompt);
  for (;;) {
    // The worker's jitter, in whole milliseconds as its timers get it (src/poll-schedule.ts).
    await sleep(Math.max(1, Math.round(input.schedule.initialIntervalMs * pollJitterFactor(Math.random))));
    const record = await readAgentJob({ projectId: input.projectId, jobId: created.id });
    if (isTerminalStatus(record.status)) return record;
  }
}
