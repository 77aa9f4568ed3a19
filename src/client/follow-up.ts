/**
 * Follow-up delivery: `sendFollowUp` gives the job's workflow a `followUp` update, and its handle
 * answers with the follow-up's own turn. Nothing here reads a history: what a run did with an
 * update is asked of the server by update ID, and where a run went by `describe`
 * (docs/decisions/0014-follow-up-delivery.md).
 *
 * No ask names a run: the server can leave an update admitted to a run that continues as new
 * answering "admitted" to every later ask naming that run (seen on Servers 1.29.1 and 1.32.2,
 * test/foundation/update-continue-as-new.test.ts). An ask goes to the workflow ID, or to the
 * chain of runs that continue as new from one first run, which the server passes on.
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
  type AgentJobResult,
  type DurationInput,
  type PollSettings,
  type StartPriority,
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
} from './start.js';

/** What {@link sendFollowUp} sends. */
export interface FollowUpInput {
  projectId: string;
  /** The agent job to continue. */
  jobId: string;
  /** The follow-up message, at most 32,000 characters. */
  prompt: string;
  /** Poll schedule, used when a new workflow starts for the job. */
  poll?: PollSettings;
  /** Deadline of a workflow started for the job (default 6h); see the contract. */
  timeout?: DurationInput;
}

/** Options of {@link sendFollowUp}. */
export interface SendFollowUpOptions {
  /**
   * Idempotency key of this follow-up, used as the update ID and in the message's
   * `Idempotency-Key`: sending again with the same key does not send a second message, also after
   * the job's workflow has closed or continued as new (the earlier run's outcome is returned).
   * Default random. A blank key is refused.
   */
  key?: string;
  /** Task queue of the workers. Default `agent-jobs`. */
  taskQueue?: string;
  /**
   * The priority of a workflow this follow-up starts (one already driving the job keeps its own):
   * `interactive` (default) or `batch`, as for {@link startAgentJob}.
   */
  priority?: StartPriority;
}

/** A follow-up on its way: the workflow driving the job, and the new turn's result. */
export interface FollowUpHandle {
  /** The workflow that drives the agent job: {@link agentJobIdWorkflowId}. */
  workflowId: string;
  /** The `followUp` update's ID (the key). */
  updateId: string;
  /** The workflow, for its `status` query or its own result. */
  workflow: AgentJobHandle;
  /**
   * The new turn's result once it ends, also when the workflow continued as new before (the
   * follow-up is carried into the next run, and this attaches there under the same update ID).
   * Fails with `WorkflowUpdateFailedError`: cause `AgentJobFailed`, or the API error that refused
   * the message, or (the server's) `AcceptedUpdateCompletedWorkflow` when the workflow ended
   * before the turn did (its deadline, a cancellation; the workflow's own failure says why).
   */
  result(): Promise<AgentJobResult>;
}

/**
 * Sends a follow-up message to an agent job, whether or not a workflow is driving it, through
 * update-with-start on the job's workflow ({@link agentJobIdWorkflowId}): when one is running
 * (conflict policy USE_EXISTING) the `followUp` update queues behind the turn in progress and any
 * follow-up before it; otherwise a workflow starts that watches the job and takes this update
 * first. Resolves once the workflow has accepted the follow-up. With a `key` that a closed run of
 * the job's workflow already took, nothing is sent: the handle is that run's, with its outcome.
 *
 * Throws `InvalidInputError` before anything starts when the input or the key is invalid,
 * `WorkflowUpdateFailedError` when the workflow refuses it (for instance 20 already queued), and a
 * RESOURCE_EXHAUSTED gRPC error when 10 updates wait in the run already (the server's default
 * `history.maxInFlightUpdates`, which comes first).
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
  // A chain that closes between the look-up and the ask answers not found: the next try looks
  // again. A task that failed under the update (see {@link ask}) is asked again.
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

/** What names a follow-up: its workflow, its update ID and its prompt, and who asks. */
interface FollowUpTarget {
  client: Client;
  workflowId: string;
  updateId: string;
  prompt: string;
}

/**
 * The server's failure type for an update accepted by a run that closed before the update
 * completed (`AcceptedUpdateCompletedWorkflowFailure` in its service/history/workflow/update):
 * what a `followUp` carried on by continue-as-new, or left by a run's end, answers.
 */
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
 * Where a follow-up went when its update failed with `err`: null when that is its outcome (its
 * turn's failure, or a run that ended without answering), else its update in the run that took it
 * on. A run that continues as new carries its waiting follow-ups, and the next run answers their
 * update IDs with them (src/workflows/agent-job/run.ts); the run says by its status that it
 * continued, and by its chain's first run where to ask. An error that is no update failure throws
 * the workflow's own failure when it has one.
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
 * Gives follow-up `target` to the running run of `chain` and resolves once it has accepted it
 * (or answered it: the same update ID again is the same follow-up). A run that is closing is asked
 * again by the SDK (RESOURCE_EXHAUSTED: 10 attempts over about 40 s) and by the server, which
 * passes the ask to the run the chain continued into. The task that took the update may fail
 * while the run continues as new: the server then answers FAILED_PRECONDITION and leaves asking
 * again to the caller; the next task takes it.
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
 * The follow-up `updateId` in a closed run of the job's workflow, or null when no closed run took
 * it; and the chain of the latest run when that one runs (the server recognises an update ID a
 * running run has seen). The runs are every run the server's visibility lists for the workflow
 * ID (earlier sends, and runs that continued as new) and the latest one, which `describe` reads
 * from the server itself (visibility may lag a run that just closed). Each closed run is asked,
 * newest first, for the update's outcome by its ID: a run that never took it answers not found.
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

/** The closed run of `update` took it: the server has an outcome for its ID there. */
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
