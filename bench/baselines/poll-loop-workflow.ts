/**
 * The local-activity design choice, isolated: the agent-job workflow's loop (create, then wait and
 * poll until terminal) stripped of everything else, with the poll as a regular activity or as a
 * local activity. Both sides run the same code but for that one line, so the difference between
 * them is what local activities change: no activity task through the server per poll, a marker in
 * the history instead of three activity events, and the poll inside the workflow task that the
 * timer woke.
 */
import { proxyActivities, proxyLocalActivities, sleep, workflowInfo } from '@temporalio/workflow';
import { isTerminalStatus, type AgentJobRecord } from '../../src/contract.js';
import type { BaselineActivities } from './activities.js';

/** Workflow type of the variant. */
export const POLL_LOOP_WORKFLOW = 'pollLoopWorkflow';

/** Input of {@link pollLoopWorkflow}. */
export interface PollLoopInput {
  projectId: string;
  prompt: string;
  /** Fixed wait between polls, in ms, jittered ±10% like the agent-job workflow's. */
  intervalMs: number;
  /** Poll with a local activity instead of a regular one. */
  local: boolean;
}

// The agent-job workflow's policies, so that only the kind of activity differs.
const { createAgentJob } = proxyActivities<BaselineActivities>({
  startToCloseTimeout: '75s',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '2m' },
});
const pollOptions = {
  startToCloseTimeout: '75s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
} as const;
const remote = proxyActivities<BaselineActivities>(pollOptions);
const local = proxyLocalActivities<BaselineActivities>(pollOptions);

/** Creates the agent job and polls it until terminal; returns the final record. */
export async function pollLoopWorkflow(input: PollLoopInput): Promise<AgentJobRecord> {
  const created = await createAgentJob({
    projectId: input.projectId,
    prompt: input.prompt,
    idempotencyKey: workflowInfo().workflowId,
  });
  const getAgentJob = input.local ? local.getAgentJob : remote.getAgentJob;
  for (;;) {
    // Deterministic: the workflow's Math.random is seeded per run.
    await sleep(Math.round(input.intervalMs * (1 + (Math.random() * 2 - 1) * 0.1)));
    const record = await getAgentJob({ projectId: input.projectId, jobId: created.id });
    if (isTerminalStatus(record.status)) return record;
  }
}
