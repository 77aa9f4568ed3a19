/**
 * Starting agent-job workflows, or attaching to the one the key already started; the policies and
 * what a run that ended before under the key leaves for the next: docs/starting-jobs.md.
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
  /** Idempotency key: the same project and key attach to the same workflow. Default random. */
  key?: string;
  /** Task queue of the workers. Default `agent-jobs`. */
  taskQueue?: string;
  /** `interactive` (default) or `batch`: on busy workers, interactive jobs go first ({@link START_PRIORITIES}). */
  priority?: StartPriority;
}

/**
 * A caller's key, checked: a blank key would give every caller that passes one the same workflow,
 * and a lone surrogate has no UTF-8 form (two such keys could become one).
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

/** A one-line summary for the Temporal UI, which renders markdown: the project and the prompt's start, escaped. */
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

/** The search attributes a workflow starts with: set at start they cost no action, an upsert does. */
export function startAttributes(resolved: { projectId: string; jobId?: string }): SearchAttributePair[] {
  const attributes: SearchAttributePair[] = [{ key: SearchAttributes.projectId, value: resolved.projectId }];
  if (resolved.jobId !== undefined) attributes.push({ key: SearchAttributes.jobId, value: resolved.jobId });
  return attributes;
}

/**
 * Starts the agent-job workflow, or attaches to the one the key already started; after a run that
 * failed or ended otherwise, a new run goes on with the agent job it made (docs/starting-jobs.md).
 * With `jobId` and no prompt it watches that job. Throws `InvalidInputError` before anything starts.
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

/**
 * What {@link startAgentJob} starts, without starting it: the Nexus service starts it with the
 * caller's completion callback. Throws `InvalidInputError` before anything is read.
 */
export async function agentJobStartOptions(
  client: Client,
  input: AgentJobInput,
  options: StartAgentJobOptions = {},
): Promise<WorkflowStartOptions<typeof agentJobWorkflow>> {
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
 * What the latest run of `workflowId` left behind when it ended otherwise than completed
 * (./previous-run.ts), and its memo. Describe, not visibility, so a run just closed is seen as it
 * is; its history is read only when it recorded no agent job.
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

/** The memo of a workflow whose create sends `prompt`: its digest, not the (maybe long, maybe unsealed) prompt. */
function promptMemo(prompt: string | undefined): Record<string, string> | undefined {
  if (prompt === undefined) return undefined;
  return { [PROMPT_MEMO]: createHash('sha256').update(prompt).digest('hex') };
}

/**
 * Whether the workflow's agent job was created with a prompt other than `prompt` (an attach under a
 * key used with another prompt). False when the workflow does not say (an earlier build).
 */
export async function promptDiffers(handle: AgentJobHandle, prompt: string): Promise<boolean> {
  const given = (await handle.describe()).memo?.[PROMPT_MEMO];
  return typeof given === 'string' && given !== promptMemo(prompt)?.[PROMPT_MEMO];
}

/**
 * The agent job an earlier run under this workflow ID recorded, newest first (a reset run may not
 * have reached its create yet); null when none did. Visibility's lag is no matter here: a reset
 * or an earlier failure is not that recent.
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
  if (previous.kind === 'job') {
    // Without its prompt: the prompt went out with the create of the run before.
    const next = { ...input, jobId: previous.jobId };
    delete next.prompt;
    return next;
  }
  if (previous.kind === 'uncertain') {
    return { ...input, previousCreate: `the run before under this key (${previous.why})` };
  }
  return input;
}
