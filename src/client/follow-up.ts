/**
 * Follow-up delivery: `sendFollowUp` gives the job's workflow a `followUp` update, and its handle
 * answers with the follow-up's own turn.
 */
import { randomUUID } from 'node:crypto';
import {
  isGrpcDeadlineError,
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
import {
  agentJobIdWorkflowId,
  agentJobSummary,
  checkedKey,
  followUpUpdateId,
  visibilityString,
} from './ids.js';
import { priorityOf, startAttributes, type AgentJobHandle } from './start.js';

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
   * Fails with `WorkflowUpdateFailedError` (cause `AgentJobFailed`, or the API error that refused
   * the message), or with the workflow's own `WorkflowFailedError` when it ends first (its
   * deadline, a cancellation).
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
 * Throws `InvalidInputError` before anything starts when the input or the key is invalid, and
 * `WorkflowUpdateFailedError` when the workflow refuses it (for instance 20 already queued).
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
  const updateId = key === undefined ? randomUUID() : followUpUpdateId(key);
  // A workflow that closes between a look-up and the update's delivery makes the update fail as
  // not found; the next attempt looks again. Three attempts cover that race.
  for (let attempt = 1; ; attempt++) {
    try {
      return await deliverFollowUp(client, { workflowId, updateId, keyed: key !== undefined, prompt }, () => {
        return new WithStartWorkflowOperation<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
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
      });
    } catch (err) {
      // A run that is continuing as new takes no update for a moment: the next attempt finds the
      // run it continued into.
      if (refusedForAMoment(err) && attempt < CLOSING_TRIES) {
        await closingPause(attempt);
        continue;
      }
      if (!(err instanceof WorkflowNotFoundError) || attempt >= 3) throw err;
    }
  }
}

/**
 * One try at delivering a follow-up. With a caller's key, a closed run that took the update ID
 * answers instead (nothing is sent), and a run found running is given the update itself rather
 * than through update-with-start: were it to close before the update arrived, update-with-start
 * would start a new run that does not know the ID and would send the message a second time; the
 * targeted update fails as not found instead, and the next try finds the closed run's answer.
 */
async function deliverFollowUp(
  client: Client,
  target: { workflowId: string; updateId: string; keyed: boolean; prompt: string },
  operation: () => WithStartWorkflowOperation<typeof agentJobWorkflow>,
): Promise<FollowUpHandle> {
  const { workflowId, updateId, prompt } = target;
  if (target.keyed) {
    const seen = await earlierFollowUp(client, target);
    if (seen.earlier !== null) return seen.earlier;
    if (seen.runningRunId !== null) {
      const workflow: AgentJobHandle = client.workflow.getHandle(workflowId, seen.runningRunId);
      const update = await acceptedBy(workflow, target);
      return followUpHandle(target, workflow, update);
    }
  }
  const start = operation();
  const update = await client.workflow.startUpdateWithStart(followUpUpdate, {
    args: [prompt],
    updateId,
    waitForStage: 'ACCEPTED',
    startWorkflowOperation: start,
  });
  return followUpHandle(target, await start.workflowHandle(), update);
}

/** The history of one run, as `fetchHistory` reads it. */
type RunHistory = Awaited<ReturnType<AgentJobHandle['fetchHistory']>>;

/** What names a follow-up: its workflow, its update ID and its prompt. */
interface FollowUpTarget {
  workflowId: string;
  updateId: string;
  prompt: string;
}

/**
 * The server's failure type for an update accepted by a run that closed before the update
 * completed: what a `followUp` left behind by continue-as-new (or by a run's end) answers.
 */
const UPDATE_LEFT_BY_ITS_RUN = 'AcceptedUpdateCompletedWorkflow';

/** The handle of a follow-up whose update `update` runs (or ran) in `workflow`. */
function followUpHandle(
  target: FollowUpTarget,
  workflow: AgentJobHandle,
  update: WorkflowUpdateHandle<AgentJobResult>,
): FollowUpHandle {
  const { workflowId, updateId } = target;
  return {
    workflowId,
    updateId,
    workflow,
    result: async () => {
      let run = workflow;
      let pending = update;
      // One pass per run the follow-up was carried into by continue-as-new.
      for (;;) {
        try {
          return await pending.result();
        } catch (err) {
          if (!(err instanceof WorkflowUpdateFailedError)) {
            // The workflow ended without answering (deadline, cancellation): its outcome says why.
            await run.result();
            throw err;
          }
          const carried = await carriedInto(run, pending, err);
          // Failed in its run, or left behind by a run that ended otherwise (the server's answer).
          if (carried === null) throw err;
          ({ run, update: pending } = await attach(target, run.client, carried));
        }
      }
    },
  };
}

/** Where a run that continued as new carried a follow-up: the next run, and its chain's first run. */
interface Carried {
  next: string;
  firstRunId: string;
}

/**
 * Where the run of `update` carried it, when `err` says that run closed before answering and the
 * run continued as new; else null.
 */
async function carriedInto(
  run: AgentJobHandle,
  update: WorkflowUpdateHandle<AgentJobResult>,
  err: WorkflowUpdateFailedError,
): Promise<Carried | null> {
  const left = err.cause instanceof ApplicationFailure && err.cause.type === UPDATE_LEFT_BY_ITS_RUN;
  // The run that left the update behind is the one the update went to, not the latest.
  if (!left || update.workflowRunId === undefined) return null;
  const history = await run.client.getHandle(update.workflowId, update.workflowRunId).fetchHistory();
  const next = continuedAs(history);
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  const firstRunId = started?.firstExecutionRunId || update.workflowRunId;
  return next === null ? null : { next, firstRunId };
}

/** The run that a run with `history` continued as new into; null when it closed otherwise. */
function continuedAs(history: RunHistory): string | null {
  const last = history.events?.at(-1);
  return last?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? null;
}

/** `history` holds the acceptance of update `updateId`. */
function accepted(history: RunHistory, updateId: string): boolean {
  return (history.events ?? []).some(
    (event) =>
      event.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.meta?.updateId === updateId,
  );
}

/** Tries of an update on a run that is closing (about 30 s in all), before its error is the caller's. */
const CLOSING_TRIES = 40;

/**
 * The pause before asking a closing run again: 50 ms more each time, at most 1 s, so that the
 * {@link CLOSING_TRIES} cover about 30 s. A continue-as-new on a busy server can take seconds
 * (a loaded test run saw the 4 s this used to allow run out).
 */
function closingPause(tries: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.min(50 * tries, 1_000)));
}

/**
 * The server refused an update for a moment, and the same ask succeeds a little later: the run is
 * closing (continue-as-new under way: gRPC 8, RESOURCE_EXHAUSTED), or the workflow task that was
 * to take the update failed (gRPC 9, FAILED_PRECONDITION; a task that met the update while it
 * continued as new fails that way, and the next task takes it).
 */
function refusedForAMoment(err: unknown): boolean {
  const cause = (err as { cause?: { code?: number; details?: string; message?: string } } | null)?.cause;
  const text = `${cause?.details ?? ''} ${cause?.message ?? ''}`;
  if (cause?.code === 8) return text.includes('workflow is closing');
  return cause?.code === 9 && text.includes('unexpected workflow task failure');
}

/**
 * Attaches to the follow-up that a run carried into `carried.next`: the same update ID, to which
 * the running run's `followUp` answers with the carried follow-up (nothing is queued or sent again;
 * the server answers an ID a run already took with that update). The ask goes to the chain, not
 * to one run: every run carries the follow-up on, and a run that continues as new while the ask
 * waits passes it to the next, where an ask naming that run would wait on a closed run. Once the
 * chain has closed, the run that took the follow-up answers from its history.
 */
async function attach(
  target: FollowUpTarget,
  client: AgentJobHandle['client'],
  carried: Carried,
): Promise<{ run: AgentJobHandle; update: WorkflowUpdateHandle<AgentJobResult> }> {
  const { workflowId, updateId } = target;
  const chain: AgentJobHandle = client.getHandle(workflowId, undefined, {
    firstExecutionRunId: carried.firstRunId,
  });
  let closed: unknown;
  for (let tries = 1; ; tries++) {
    try {
      return { run: chain, update: await acceptedBy(chain, target) };
    } catch (err) {
      if (refusedForAMoment(err) && tries < CLOSING_TRIES) {
        // The run is continuing as new: the next ask finds the run it continues into.
        await closingPause(tries);
        continue;
      }
      if (!(err instanceof WorkflowNotFoundError)) throw err;
      closed = err;
      break;
    }
  }
  for (let runId: string | null = carried.next; runId !== null;) {
    const run: AgentJobHandle = client.getHandle(workflowId, runId);
    const history = await run.fetchHistory();
    if (accepted(history, updateId)) return { run, update: run.getUpdateHandle<AgentJobResult>(updateId) };
    runId = continuedAs(history);
  }
  throw closed;
}

/**
 * Longest one ask of a run to accept a follow-up may take. A run that continues as new while it
 * holds the update admitted but not yet accepted leaves the server answering "admitted" (neither
 * accepted nor not found) to every later ask that names that run, and the SDK's `startUpdate`
 * asks again for as long as that lasts: a CI run hung ten minutes on it (Server 1.29.1). A
 * running workflow that is slower than this to accept is only asked again.
 */
const ACCEPT_TRY_MS = 3_000;

/**
 * Gives follow-up `target` to `run` (one run, or the running run of a chain) and resolves once it
 * has accepted it. Each ask is bounded ({@link ACCEPT_TRY_MS}); one that runs out when the run has
 * closed meanwhile throws WorkflowNotFoundError, as asking a closed run does, which the callers
 * follow. A run still running is asked again under the same update ID, which the server recognises.
 */
async function acceptedBy(
  run: AgentJobHandle,
  target: FollowUpTarget,
): Promise<WorkflowUpdateHandle<AgentJobResult>> {
  const { workflowId, updateId, prompt } = target;
  for (;;) {
    try {
      return await run.client.withDeadline(Date.now() + ACCEPT_TRY_MS, () =>
        run.startUpdate(followUpUpdate, { args: [prompt], updateId, waitForStage: 'ACCEPTED' }),
      );
    } catch (err) {
      if (!isGrpcDeadlineError(err)) throw err;
      const { status, runId } = await run.describe();
      if (status.name !== 'RUNNING') {
        throw new WorkflowNotFoundError(
          `run ${runId} closed (${status.name}) before it accepted follow-up ${updateId}`,
          workflowId,
          runId,
        );
      }
    }
  }
}

/**
 * The follow-up `updateId` in a closed run of the job's workflow, or null when no closed run took
 * it. The runs are every run the server's visibility lists for the workflow ID (earlier sends, and
 * runs that continued as new) and the latest one, which `describe` reads from the server itself
 * (visibility may lag a run that just closed); each is looked for in its history, newest first.
 * A running latest run is left to the server, which recognises an update ID it has seen.
 */
async function earlierFollowUp(
  client: Client,
  target: FollowUpTarget,
): Promise<{ earlier: FollowUpHandle | null; runningRunId: string | null }> {
  const { workflowId, updateId } = target;
  let latest: Awaited<ReturnType<AgentJobHandle['describe']>>;
  try {
    latest = await client.workflow.getHandle(workflowId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { earlier: null, runningRunId: null };
    throw err;
  }
  const runningRunId = latest.status.name === 'RUNNING' ? latest.runId : null;
  const runs = new Map<string, number>([[latest.runId, latest.startTime.getTime()]]);
  for await (const run of client.workflow.list({ query: `WorkflowId = ${visibilityString(workflowId)}` })) {
    runs.set(run.runId, run.startTime.getTime());
  }
  const newestFirst = [...runs].sort(([, a], [, b]) => b - a).map(([runId]) => runId);
  for (const runId of newestFirst) {
    if (runId === latest.runId && latest.status.name === 'RUNNING') continue;
    const workflow: AgentJobHandle = client.workflow.getHandle(workflowId, runId);
    if (!accepted(await workflow.fetchHistory(), updateId)) continue;
    const earlier = followUpHandle(target, workflow, workflow.getUpdateHandle<AgentJobResult>(updateId));
    return { earlier, runningRunId };
  }
  return { earlier: null, runningRunId };
}
