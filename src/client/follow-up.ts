/**
 * Follow-up delivery: `sendFollowUp` gives the job's workflow a `followUp` update, and its handle
 * answers with the follow-up's own turn. No history is read and no ask names a run (a run that
 * continues as new can hang such an ask): why in docs/decisions/0014-follow-up-delivery.md.
 */
import { randomUUID } from 'node:crypto';
import {
  WithStartWorkflowOperation,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowUpdateFailedError,
  type Client,
  type WorkflowUpdateHandle,
} from '@temporalio/client';
import { ApplicationFailure, WorkflowNotFoundError } from '@temporalio/common';
import {
  DEFAULT_TASK_QUEUE,
  followUpUpdate,
  WORKFLOW_TYPE,
  type AgentJobInput,
  type AgentJobResult,
} from '../contract.js';
import { resolveInput } from '../input.js';
import type { agentJobWorkflow } from '../workflows/index.js';
import { agentJobIdWorkflowId, followUpUpdateId } from '../ids.js';
import {
  agentJobSummary,
  checkedKey,
  priorityOf,
  startAttributes,
  visibilityString,
  type AgentJobHandle,
  type StartAgentJobOptions,
} from './start.js';

/** What {@link sendFollowUp} sends: the job, the message, and a started workflow's poll schedule and deadline. */
export type FollowUpInput = Pick<AgentJobInput, 'projectId' | 'poll' | 'timeout'> &
  Required<Pick<AgentJobInput, 'jobId' | 'prompt'>>;

/**
 * Options of {@link sendFollowUp}, as of `startAgentJob`: the key is the follow-up's (its update ID
 * and the message's `Idempotency-Key`, never sent twice, across runs too), and the priority that
 * of a workflow it starts (a running one keeps its own).
 */
export type SendFollowUpOptions = StartAgentJobOptions;

/** A follow-up on its way: the workflow driving the job, and the new turn's result. */
export interface FollowUpHandle {
  /** The workflow that drives the agent job: {@link agentJobIdWorkflowId}. */
  workflowId: string;
  /** The `followUp` update's ID (the key). */
  updateId: string;
  /** The workflow, for its `status` query or its own result. */
  workflow: AgentJobHandle;
  /**
   * The new turn's result, also after the workflow continued as new. Fails with
   * `WorkflowUpdateFailedError`: cause `AgentJobFailed`, the API error that refused the message,
   * or the server's `AcceptedUpdateCompletedWorkflow` when the workflow ended before the turn did.
   */
  result(): Promise<AgentJobResult>;
}

/**
 * Sends a follow-up to an agent job through update-with-start on the job's workflow: it queues
 * behind the turn in progress, or a workflow starts that watches the job and takes it first
 * (docs/starting-jobs.md). Resolves once accepted; a `key` a closed run already took sends nothing
 * and gives that run's handle.
 *
 * Throws `InvalidInputError` before anything starts, `WorkflowUpdateFailedError` when the workflow
 * refuses it (20 already queued), and RESOURCE_EXHAUSTED when 10 updates wait in the run already
 * (the server's `history.maxInFlightUpdates`, which comes first).
 */
export async function sendFollowUp(
  client: Client,
  input: FollowUpInput,
  options: SendFollowUpOptions = {},
): Promise<FollowUpHandle> {
  const { prompt, ...watch } = input;
  const resolved = resolveInput({ ...watch, prompt });
  const key = checkedKey(options.key);
  const priority = priorityOf(resolved.projectId, options.priority);
  const workflowId = agentJobIdWorkflowId(resolved.projectId, input.jobId);
  const target: FollowUpTarget = {
    client,
    workflowId,
    updateId: key === undefined ? randomUUID() : followUpUpdateId(key),
    prompt,
  };
  // A chain that closes between the look-up and the ask answers not found: look again (3 tries);
  // a task that failed under the update is asked again ({@link ask}).
  for (let attempt = 1; ; attempt++) {
    try {
      if (key !== undefined) {
        const seen = await earlierFollowUp(target);
        if (seen.earlier !== null) return seen.earlier;
        // Given to the running chain itself: were it to close first, update-with-start would start
        // a run that does not know the ID, which would send the message a second time.
        if (seen.running !== null)
          return followUpHandle(target, seen.running, await ask(seen.running, target));
      }
      const start = new WithStartWorkflowOperation<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
        workflowId,
        taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
        // Watch mode: the prompt travels in the update, so a running workflow and a new one are
        // told the same thing in the same way.
        args: [watch],
        workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
        workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
        staticSummary: agentJobSummary(resolved.projectId, `follow-up on ${input.jobId}: ${prompt}`),
        typedSearchAttributes: startAttributes(resolved),
        priority,
      });
      const update = await client.workflow.startUpdateWithStart(followUpUpdate, {
        args: [prompt],
        updateId: target.updateId,
        waitForStage: 'ACCEPTED',
        startWorkflowOperation: start,
      });
      return followUpHandle(target, await start.workflowHandle(), update);
    } catch (err) {
      if (failedUnderItsTask(err) && attempt < FAILED_TASK_TRIES) {
        await pause(attempt);
        continue;
      }
      if (!(err instanceof WorkflowNotFoundError) || attempt >= 3) throw err;
    }
  }
}

/** A follow-up being sent, and the client that sends it. */
interface FollowUpTarget {
  client: Client;
  workflowId: string;
  updateId: string;
  prompt: string;
}

/** The server's failure type for an update whose run closed (carried on, or ended) before it completed. */
const UPDATE_LEFT_BY_ITS_RUN = 'AcceptedUpdateCompletedWorkflow';

/** The handle of a follow-up whose update `update` runs (or ran) in `workflow`. */
function followUpHandle(
  target: FollowUpTarget,
  workflow: AgentJobHandle,
  update: WorkflowUpdateHandle<AgentJobResult>,
): FollowUpHandle {
  return {
    workflowId: target.workflowId,
    updateId: target.updateId,
    workflow,
    result: async () => {
      // One pass per run that continued as new with the follow-up.
      for (let pending = update; ;) {
        try {
          return await pending.result();
        } catch (err) {
          const next = await carriedOn(target, pending, err);
          if (next === null) throw err;
          pending = next;
        }
      }
    },
  };
}

/**
 * Where a follow-up went when its update failed with `err`: its update in the run a continue-as-new
 * carried it to, or null when `err` is its outcome. An error that is no update failure throws the
 * workflow's own failure when it has one.
 */
async function carriedOn(
  target: FollowUpTarget,
  update: WorkflowUpdateHandle<AgentJobResult>,
  err: unknown,
): Promise<WorkflowUpdateHandle<AgentJobResult> | null> {
  const run: AgentJobHandle = target.client.workflow.getHandle(target.workflowId, update.workflowRunId);
  if (!(err instanceof WorkflowUpdateFailedError)) {
    await run.result();
    return null;
  }
  const cause = err.cause;
  if (!(cause instanceof ApplicationFailure) || cause.type !== UPDATE_LEFT_BY_ITS_RUN) return null;
  const { status, raw, runId } = await run.describe();
  if (status.name !== 'CONTINUED_AS_NEW') return null;
  return ask(chainOf(target, raw.workflowExecutionInfo?.firstRunId || runId), target);
}

/** The runs that continue as new from `firstRunId`: an ask goes to the one running. */
function chainOf(target: FollowUpTarget, firstRunId: string): AgentJobHandle {
  return target.client.workflow.getHandle(target.workflowId, undefined, { firstExecutionRunId: firstRunId });
}

/** Tries of an ask whose workflow task failed under it, before its error is the caller's. */
const FAILED_TASK_TRIES = 10;

/**
 * Gives `target` to the running run of `chain`, resolving once accepted (or answered). A closing
 * run is asked again by the SDK and the server; a task that failed under the update
 * (FAILED_PRECONDITION) is the caller's to ask again (docs/decisions/0014-follow-up-delivery.md).
 */
async function ask(
  chain: AgentJobHandle,
  target: FollowUpTarget,
): Promise<WorkflowUpdateHandle<AgentJobResult>> {
  const { updateId, prompt } = target;
  for (let tries = 1; ; tries++) {
    try {
      return await chain.startUpdate(followUpUpdate, { args: [prompt], updateId, waitForStage: 'ACCEPTED' });
    } catch (err) {
      if (!failedUnderItsTask(err) || tries >= FAILED_TASK_TRIES) throw err;
      await pause(tries);
    }
  }
}

/** The pause before the next try: 100 ms more each time (4.5 s over {@link FAILED_TASK_TRIES}). */
function pause(tries: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 100 * tries));
}

/** gRPC 9, FAILED_PRECONDITION, for an update the workflow task that took it failed under. */
function failedUnderItsTask(err: unknown): boolean {
  const cause = (err as { cause?: { code?: number } } | null)?.cause;
  return cause?.code === 9;
}

/**
 * The follow-up in a closed run of the job's workflow (null when none took it), and the chain of
 * the latest run when it runs (which recognises an update ID it has seen). The runs are those
 * visibility lists plus the latest from `describe` (visibility may lag); each closed one is asked,
 * newest first, for the update's outcome by its ID.
 */
async function earlierFollowUp(
  target: FollowUpTarget,
): Promise<{ earlier: FollowUpHandle | null; running: AgentJobHandle | null }> {
  const { client, workflowId, updateId } = target;
  let latest: Awaited<ReturnType<AgentJobHandle['describe']>>;
  try {
    latest = await client.workflow.getHandle(workflowId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { earlier: null, running: null };
    throw err;
  }
  const isRunning = latest.status.name === 'RUNNING';
  const running = isRunning
    ? chainOf(target, latest.raw.workflowExecutionInfo?.firstRunId || latest.runId)
    : null;
  const runs = new Map<string, number>([[latest.runId, latest.startTime.getTime()]]);
  for await (const run of client.workflow.list({ query: `WorkflowId = ${visibilityString(workflowId)}` })) {
    runs.set(run.runId, run.startTime.getTime());
  }
  const newestFirst = [...runs].sort(([, a], [, b]) => b - a).map(([runId]) => runId);
  for (const runId of newestFirst) {
    if (runId === latest.runId && isRunning) continue;
    const workflow: AgentJobHandle = client.workflow.getHandle(workflowId, runId);
    const update = workflow.getUpdateHandle<AgentJobResult>(updateId);
    if (await took(update)) return { earlier: followUpHandle(target, workflow, update), running };
  }
  return { earlier: null, running };
}

/** Whether the closed run of `update` took it (the server has an outcome for its ID). */
async function took(update: WorkflowUpdateHandle<AgentJobResult>): Promise<boolean> {
  try {
    await update.result();
    return true;
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError) return true;
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}
