/**
 * The library other Node services use to start and follow agent-job workflows. Exported from the
 * package root; the starter CLI and the demo use it too.
 */
import { randomUUID } from 'node:crypto';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowIdConflictPolicy,
  WorkflowIdReusePolicy,
  type Client,
  type WorkflowHandle,
} from '@temporalio/client';
import {
  DEFAULT_TASK_QUEUE,
  resolveInput,
  SearchAttributes,
  statusQuery,
  WORKFLOW_TYPE,
  type AgentJobInput,
  type AgentJobProgress,
} from '../contract.js';
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
}

/** Longest workflow ID the derived form produces; longer keys are cut to keep IDs readable. */
const MAX_KEY_LENGTH = 200;

/** The workflow ID for a project and an idempotency key. Stable: the same inputs give the same ID. */
export function agentJobWorkflowId(projectId: string, key: string): string {
  return `agent-job/${projectId}/${key.slice(0, MAX_KEY_LENGTH)}`;
}

/** A one-line summary for the Temporal UI: the project and the start of the prompt. */
export function agentJobSummary(projectId: string, prompt: string): string {
  const flat = prompt.replace(/\s+/g, ' ').trim();
  const excerpt = flat.length > 80 ? `${flat.slice(0, 79)}…` : flat;
  return `Agent job in ${projectId}: "${excerpt}"`;
}

/**
 * Starts the agent-job workflow, or attaches to the one already started with the same key:
 * a running one through the USE_EXISTING conflict policy, a closed one through REJECT_DUPLICATE
 * (the start is refused and the existing handle returned). Either way no second agent job.
 *
 * Throws `InvalidInputError` from the contract, before anything starts, when the input is invalid.
 */
export async function startAgentJob(
  client: Client,
  input: AgentJobInput,
  options: StartAgentJobOptions = {},
): Promise<AgentJobHandle> {
  const resolved = resolveInput(input);
  const workflowId = agentJobWorkflowId(resolved.projectId, options.key ?? randomUUID());
  try {
    return await client.workflow.start<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
      workflowId,
      taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
      args: [input],
      workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
      workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
      staticSummary: agentJobSummary(resolved.projectId, resolved.prompt),
      typedSearchAttributes: [{ key: SearchAttributes.projectId, value: resolved.projectId }],
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return client.workflow.getHandle(workflowId);
    throw err;
  }
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
