/**
 * The names the client library gives: workflow IDs of agent jobs, `followUp` update IDs, the UI
 * summary, and the caller's key they are made from. Built by the one workflow-ID builder in
 * ../ids.ts, so every ID fits the server's limit.
 */
import { InvalidInputError } from '../contract.js';
import { markdownText } from '../escape.js';
import {
  boundedWorkflowId,
  encodeIdPart,
  fitPart,
  isWellFormed,
  MAX_WORKFLOW_ID_BYTES,
  utf8ByteLength,
} from '../ids.js';

export { encodeIdPart } from '../ids.js';

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
 * A caller's key, checked: a blank key would give every caller that passes one the same workflow
 * (`agent-job/<project>/`), and a lone surrogate has no UTF-8 form (two such keys could become one).
 *
 * @throws {InvalidInputError} naming `key`
 */
export function checkedKey(key: string | undefined): string | undefined {
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

/** A string literal of the visibility query language: in single quotes, `\` and `'` escaped. */
export function visibilityString(value: string): string {
  return `'${value.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}
