/**
 * Starting agent-job workflows: the start options (the input checked, the workflow ID from the
 * key, the policies, and what a run that ended before under the key left for the next), and the
 * start itself, which attaches to a workflow already started with the same key.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  type Client,
  type WorkflowHandle,
  type WorkflowStartOptions,
} from '@temporalio/client';
import { WorkflowNotFoundError, type SearchAttributePair } from '@temporalio/common';
import {
  DEFAULT_TASK_QUEUE,
  InvalidInputError,
  SearchAttributes,
  START_PRIORITIES,
  WORKFLOW_TYPE,
  type AgentJobInput,
  type StartPriority,
} from '../contract.js';
import { resolveInput } from '../input.js';
import type { agentJobWorkflow } from '../workflows/index.js';
import { markdownText } from '../escape.js';
import { agentJobIdWorkflowId, agentJobWorkflowId, isWellFormed } from '../ids.js';
import { openCreateOutcomes, previousRun, type PreviousRun } from './previous-run.js';
import { taskPriority } from '../priority.js';

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

/**
 * A caller's key, checked: a blank key would give every caller that passes one the same workflow
 * (`agent-job/<project>/`), and a lone surrogate has no UTF-8 form (two such keys could become one).
 *
 * @throws {InvalidInputError} naming `key`
 */
export function checkedKey(key: string | undefined): string | undefined {
  if (key === undefined) return undefined;
  if (typeof key !== 'string' || key.trim() === '') {
    throw new InvalidInputError('key', 'must be a non-blank string when given');
  }
  if (!isWellFormed(key)) {
    throw new InvalidInputError('key', 'must be well-formed Unicode (it holds a lone UTF-16 surrogate)');
  }
  return key;
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

/** A string literal of the visibility query language: in single quotes, `\` and `'` escaped. */
export function visibilityString(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/** The start's task priority, from its class; `InvalidInputError` for a class that is not one. */
export function priorityOf(projectId: string, priority: StartPriority | undefined) {
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
 * The search attributes a workflow starts with: set at start they cost no action, where an upsert
 * from the workflow is one. The job's ID is known at start only when the input names the job.
 */
export function startAttributes(resolved: { projectId: string; jobId?: string }): SearchAttributePair[] {
  const attributes: SearchAttributePair[] = [{ key: SearchAttributes.projectId, value: resolved.projectId }];
  if (resolved.jobId !== undefined) attributes.push({ key: SearchAttributes.jobId, value: resolved.jobId });
  return attributes;
}

/**
 * Starts the agent-job workflow, or attaches to the one already started with the same key: a
 * running one (USE_EXISTING), a completed one (ALLOW_DUPLICATE_FAILED_ONLY refuses a new run); after
 * one that failed or ended otherwise, a new run goes on with the agent job it made, since the API
 * honours no idempotency key (docs/starting-jobs.md says each case). With `jobId` and no prompt it
 * watches that job under {@link agentJobIdWorkflowId}; a follow-up goes through `sendFollowUp`.
 *
 * Throws `InvalidInputError`, before anything starts, when the input or the key is invalid.
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
 * What {@link startAgentJob} starts, without starting it. The Nexus service starts the same options
 * through its own start, which attaches the caller's completion callback; a start refused because
 * the run under the ID has completed (WorkflowExecutionAlreadyStartedError) is its to answer.
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
  const { previous, memo } =
    key !== undefined && resolved.jobId === undefined
      ? await endedRun(client, workflowId)
      : { previous: { kind: 'nothing' } as const, memo: undefined };
  const args: [AgentJobInput] = [restartInput(input, previous)];
  return {
    workflowId,
    taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
    args,
    // A run that goes on with the job of the run before keeps that run's prompt digest.
    memo: previous.kind === 'job' ? memo : promptMemo(resolved.prompt),
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
 * terminated (./previous-run.ts), and its memo; `nothing` when there is no such run. Describe reads
 * the run's own state, not the eventually consistent visibility store, so a run that has just
 * closed is seen as it is; its history is read only when it recorded no agent job.
 */
async function endedRun(
  client: Client,
  workflowId: string,
): Promise<{ previous: PreviousRun; memo?: Record<string, unknown> }> {
  try {
    const run = await client.workflow.getHandle(workflowId).describe();
    if (!RESTARTABLE.has(run.status.name)) return { previous: { kind: 'nothing' } };
    const jobId =
      run.typedSearchAttributes.get(SearchAttributes.jobId) ?? (await jobOfEarlierRun(client, workflowId));
    if (jobId !== null) return { previous: previousRun(jobId, []), memo: run.memo };
    const { events } = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
    const codecs = client.options.loadedDataConverter.payloadCodecs;
    return { previous: previousRun(null, await openCreateOutcomes(events ?? [], codecs)) };
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return { previous: { kind: 'nothing' } };
    throw err;
  }
}

/** The memo field that holds the SHA-256 of the prompt the workflow's agent job was created with. */
const PROMPT_MEMO = 'promptSha256';

/**
 * The memo of a workflow whose create sends `prompt`: its digest, not the prompt (which may be
 * long, and with the payload codec off the memo is as readable as the input; with it on, both are
 * sealed).
 */
function promptMemo(prompt: string | undefined): Record<string, string> | undefined {
  if (prompt === undefined) return undefined;
  return { [PROMPT_MEMO]: createHash('sha256').update(prompt).digest('hex') };
}

/**
 * Whether the agent job the workflow of `handle` drives was created with a prompt other than
 * `prompt`: a start that attached under a key already used with another prompt, which sent
 * nothing. False when the workflow does not say (started by an earlier build, or another SDK).
 */
export async function promptDiffers(handle: AgentJobHandle, prompt: string): Promise<boolean> {
  const given = (await handle.describe()).memo?.[PROMPT_MEMO];
  return typeof given === 'string' && given !== promptMemo(prompt)?.[PROMPT_MEMO];
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
