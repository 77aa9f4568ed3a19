/**
 * The library other Node services use to start and follow agent-job workflows. Exported from the
 * package root; the starter CLI and the demo use it too.
 */
import { randomUUID } from 'node:crypto';
import {
  isGrpcDeadlineError,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  WorkflowUpdateFailedError,
  type Client,
  type WorkflowHandle,
  type WorkflowStartOptions,
  type WorkflowUpdateHandle,
} from '@temporalio/client';
import { ApplicationFailure, WorkflowNotFoundError, type SearchAttributePair } from '@temporalio/common';
import {
  DEFAULT_TASK_QUEUE,
  followUpUpdate,
  InvalidInputError,
  SearchAttributes,
  START_PRIORITIES,
  statusQuery,
  WORKFLOW_TYPE,
  type AgentJobInput,
  type AgentJobProgress,
  type AgentJobResult,
  type DurationInput,
  type PollSettings,
  type StartPriority,
} from '../contract.js';
import { taskPriority } from './priority.js';
import { resolveInput } from '../input.js';
import { previousRun, type PreviousRun } from './previous-run.js';
import { boundedWorkflowId, fitPart, isWellFormed, MAX_WORKFLOW_ID_BYTES, utf8ByteLength } from '../ids.js';
import { markdownText } from '../escape.js';
import type { agentJobWorkflow } from '../workflows/index.js';

/** A handle on an agent-job workflow, typed with its result. */
export type AgentJobHandle = WorkflowHandle<typeof agentJobWorkflow>;

/** Options of {@link startAgentJob}. */
export interface StartAgentJobOptions {
  /**
   * The caller's idempotency key: starting twice with the same project and key attaches to the
   * same workflow, and so to the same agent job. Default: a random key (every call starts anew).
   */
  key?: string;
  /** Task queue of the workers. Default `agent-jobs`. */
  taskQueue?: string;
  /**
   * `interactive` (default) or `batch`: on busy workers, interactive jobs' tasks go first
   * ({@link START_PRIORITIES}); within each, projects share the workers fairly.
   */
  priority?: StartPriority;
}

/** The start's task priority, from its class; `InvalidInputError` for a class that is not one. */
function priorityOf(projectId: string, priority: StartPriority | undefined) {
  const name = priority ?? 'interactive';
  if (!Object.hasOwn(START_PRIORITIES, name)) {
    throw new InvalidInputError(
      'priority',
      `must be one of ${Object.keys(START_PRIORITIES).join(', ')}, not "${String(name)}"`,
    );
  }
  return taskPriority(projectId, START_PRIORITIES[name]);
}

/**
 * One part of a workflow ID (a project ID, a key, an agent job ID), encoded so that the parts can
 * be joined with `/` and never be confused: `%` and `/` are percent-encoded, so a part never holds
 * a separator (nor `%~`, the mark of a cut part). Stable, injective, and a part without `%` or `/`
 * is unchanged.
 */
export function encodeIdPart(part: string): string {
  return part.replaceAll('%', '%25').replaceAll('/', '%2F');
}

/**
 * The workflow ID for a project and an idempotency key: `agent-job/<project>/<key>`, each part
 * encoded by {@link encodeIdPart}. Stable, and distinct (project, key) pairs never share one. At
 * most 255 bytes (`boundedWorkflowId`): a longer one keeps the start of each long part and ends it
 * with `%~` and a hash of the whole part.
 */
export function agentJobWorkflowId(projectId: string, key: string): string {
  return boundedWorkflowId([projectId, key], encodeIdPart, ([p, k]) => `agent-job/${p}/${k}`);
}

/**
 * The workflow ID of the workflow that drives an existing agent job (follow-ups, watching):
 * `agent-job/<project>/job/<jobId>`, bounded like {@link agentJobWorkflowId}. One ID per agent
 * job is what keeps to one the workflows that send it messages. It never equals a key-based ID,
 * which has one `/` fewer.
 */
export function agentJobIdWorkflowId(projectId: string, jobId: string): string {
  return boundedWorkflowId([projectId, jobId], encodeIdPart, ([p, j]) => `agent-job/${p}/job/${j}`);
}

/**
 * A caller's key, checked: a blank key would give every caller that passes one the same workflow
 * (`agent-job/<project>/`), and a lone surrogate has no UTF-8 form (two such keys could become one).
 *
 * @throws {InvalidInputError} naming `key`
 */
function checkedKey(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  if (typeof key !== 'string' || key.trim() === '') {
    throw new InvalidInputError(
      'key',
      'must be a non-blank string when given (leave it out for a random one)',
    );
  }
  if (!isWellFormed(key)) {
    throw new InvalidInputError('key', 'must be well-formed Unicode (it holds a lone UTF-16 surrogate)');
  }
  return key;
}

/**
 * The `followUp` update's ID for a key: the key itself up to 255 bytes (the server's limit on
 * IDs), else its start, `%~` and a hash of it, like a long workflow ID part.
 */
export function followUpUpdateId(key: string): string {
  if (utf8ByteLength(key) <= MAX_WORKFLOW_ID_BYTES) return key;
  return fitPart(encodeIdPart(key), key, MAX_WORKFLOW_ID_BYTES);
}

/**
 * A one-line summary for the Temporal UI: the project and the start of the prompt. The UI renders
 * it as markdown, so both go in escaped (an agent job ID the API sent may stand in the prompt's
 * place): it shows the text as it was given.
 */
export function agentJobSummary(projectId: string, prompt: string): string {
  const flat = prompt.replace(/\s+/g, ' ').trim();
  const excerpt = flat.length > 80 ? `${flat.slice(0, 79)}…` : flat;
  return `Agent job in ${markdownText(projectId)}: "${markdownText(excerpt)}"`;
}

/**
 * The search attributes a workflow starts with: set at start they cost no action, where an upsert
 * from the workflow is one. The job's ID is known at start only when the input names the job.
 */
function startAttributes(resolved: { projectId: string; jobId?: string }): SearchAttributePair[] {
  const attributes: SearchAttributePair[] = [{ key: SearchAttributes.projectId, value: resolved.projectId }];
  if (resolved.jobId !== undefined) attributes.push({ key: SearchAttributes.jobId, value: resolved.jobId });
  return attributes;
}

/**
 * Starts the agent-job workflow, or attaches to the one already started with the same key.
 *
 * - Running: the USE_EXISTING conflict policy attaches to it.
 * - Completed: the reuse policy ALLOW_DUPLICATE_FAILED_ONLY refuses a new run and the handle of
 *   the completed one is returned, whose result is the agent job's.
 * - Failed, timed out, cancelled or terminated: a new run starts under the same workflow ID. When
 *   the run before had created its agent job (its `AgentJobId` search attribute is set), the new
 *   run goes on with that job instead of creating another (the API honours no idempotency key, so
 *   a second create would be a second agent job and a second pull request): it watches the job to
 *   the end of its turn, and its result says `created: false`. When the run ended with its create
 *   on the wire (terminated, timed out), the new run's create follows `AGENT_API_AMBIGUOUS_CREATE`
 *   (`previousCreate`): under `fail` it sends nothing and fails with `CreateOutcomeUnknown`.
 *
 * With `jobId` and no prompt it watches that agent job, under {@link agentJobIdWorkflowId} (the
 * key is not used); a follow-up prompt goes through {@link sendFollowUp}, which queues behind a
 * workflow already driving the job.
 *
 * Throws `InvalidInputError` from the contract, before anything starts, when the input is invalid
 * or the key is blank.
 */
export async function startAgentJob(
  client: Client,
  input: AgentJobInput,
  options: StartAgentJobOptions = {},
): Promise<AgentJobHandle> {
  const start = await agentJobStartOptions(client, input, options);
  try {
    return await client.workflow.start<typeof agentJobWorkflow>(WORKFLOW_TYPE, start);
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError)
      return client.workflow.getHandle(start.workflowId);
    throw err;
  }
}

/** The start options of an agent-job workflow, as {@link agentJobStartOptions} plans them. */
export type AgentJobStartOptions = WorkflowStartOptions<typeof agentJobWorkflow>;

/**
 * What {@link startAgentJob} starts, without starting it: the input checked, the workflow ID from
 * the key, the policies, and the input of a run that starts again after one that ended (see
 * {@link startAgentJob}). The Nexus service starts the same options through its own start, which
 * attaches the caller's completion callback; a start refused because the run under the ID has
 * completed (WorkflowExecutionAlreadyStartedError) is the caller's to answer with that run.
 *
 * Throws `InvalidInputError` before anything is read when the input, the key or the priority is
 * invalid.
 */
export async function agentJobStartOptions(
  client: Client,
  input: AgentJobInput,
  options: StartAgentJobOptions = {},
): Promise<AgentJobStartOptions> {
  const resolved = resolveInput(input);
  const key = checkedKey(options.key);
  const priority = priorityOf(resolved.projectId, options.priority);
  if (resolved.jobId !== undefined && resolved.prompt !== undefined) {
    throw new InvalidInputError(
      'prompt',
      'with jobId is a follow-up message: send it with sendFollowUp, which queues it behind a workflow already driving the job',
    );
  }
  const workflowId =
    resolved.jobId === undefined
      ? agentJobWorkflowId(resolved.projectId, key ?? randomUUID())
      : agentJobIdWorkflowId(resolved.projectId, resolved.jobId);
  // A random key cannot have been used before; a caller's key may have made a job already.
  const previous =
    key !== undefined && resolved.jobId === undefined
      ? await endedRun(client, workflowId)
      : ({ kind: 'nothing' } as const);
  const args: [AgentJobInput] = [restartInput(input, previous)];
  return {
    workflowId,
    taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
    args,
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    staticSummary: agentJobSummary(resolved.projectId, resolved.prompt ?? `watch ${resolved.jobId}`),
    typedSearchAttributes: startAttributes(resolved),
    priority,
  };
}

/** Closed statuses after which a new run may start under the same key (the reuse policy's). */
const RESTARTABLE = new Set(['FAILED', 'TIMED_OUT', 'CANCELLED', 'TERMINATED']);

/**
 * What the latest run of `workflowId` left behind when it failed, timed out, was cancelled or
 * terminated (./previous-run.ts); `nothing` when there is no such run. Describe reads the run's own
 * state, not the eventually consistent visibility store, so a run that has just closed is seen as
 * it is; its history is read only when it recorded no agent job.
 */
async function endedRun(client: Client, workflowId: string): Promise<PreviousRun> {
  try {
    const run = await client.workflow.getHandle(workflowId).describe();
    if (!RESTARTABLE.has(run.status.name)) return { kind: 'nothing' };
    const jobId =
      run.typedSearchAttributes.get(SearchAttributes.jobId) ?? (await jobOfEarlierRun(client, workflowId));
    if (jobId !== null) return previousRun(jobId, []);
    const { events } = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
    return previousRun(null, events ?? []);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { kind: 'nothing' };
    throw err;
  }
}

/**
 * The agent job an earlier run under this workflow ID recorded (a run that was reset: the reset
 * run may not have reached its create yet), newest first; null when none did. Visibility may lag
 * a run that closed a moment ago, but a reset or an earlier failure is not that recent.
 */
async function jobOfEarlierRun(client: Client, workflowId: string): Promise<string | null> {
  const runs: { startedAt: number; jobId: string }[] = [];
  for await (const run of client.workflow.list({ query: `WorkflowId = ${visibilityString(workflowId)}` })) {
    const jobId = run.typedSearchAttributes.get(SearchAttributes.jobId);
    if (jobId !== undefined) runs.push({ startedAt: run.startTime.getTime(), jobId });
  }
  return runs.sort((a, b) => b.startedAt - a.startedAt)[0]?.jobId ?? null;
}

/** The input of a run that starts again after `previous`. */
function restartInput(input: AgentJobInput, previous: PreviousRun): AgentJobInput {
  if (previous.kind === 'job') return { ...withoutPrompt(input), jobId: previous.jobId };
  if (previous.kind === 'uncertain') {
    return { ...input, previousCreate: `the run before under this key (${previous.why})` };
  }
  return input;
}

/** The input without its prompt: the prompt went out with the create of the run before. */
function withoutPrompt(input: AgentJobInput): AgentJobInput {
  const rest = { ...input };
  delete rest.prompt;
  return rest;
}

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

/** A string literal of the visibility query language: in single quotes, `\` and `'` escaped. */
function visibilityString(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/**
 * Follows a workflow until it closes, calling `onProgress` whenever the phase, the status or the
 * poll count changes, and returns its result (or throws its failure).
 */
export async function followAgentJob(
  handle: AgentJobHandle,
  onProgress: (progress: AgentJobProgress) => void,
  options: { intervalMs?: number } = {},
): ReturnType<AgentJobHandle['result']> {
  const result = handle.result();
  let closed = false;
  const settled = result.then(
    () => (closed = true),
    () => (closed = true),
  );
  let last = '';
  while (!closed) {
    try {
      const progress = await handle.query(statusQuery);
      const fingerprint = `${progress.phase}|${progress.lastRecord?.status}|${progress.polls}|${progress.turns}|${progress.queue?.position}`;
      if (fingerprint !== last) {
        last = fingerprint;
        onProgress(progress);
      }
    } catch {
      // A query can fail while the workflow closes or before its first task runs; the result decides.
    }
    await Promise.race([settled, new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 500))]);
  }
  return result;
}

/** The Temporal UI page of a workflow, when the UI's base URL is known. */
export function workflowUiUrl(uiUrl: string | null, namespace: string, workflowId: string): string | null {
  if (!uiUrl) return null;
  return `${uiUrl.replace(/\/+$/, '')}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}
