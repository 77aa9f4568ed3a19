/**
 * What a caller following a workflow learns when the workers cannot open one of its payloads: the
 * workflow task fails and is retried until the ring is fixed, which the caller would otherwise wait
 * through in silence. The server writes the first failed task to the history with its failure
 * (later attempts only count up `pendingWorkflowTask.attempt`); decision 0023.
 */
import type { WorkflowHandle } from '@temporalio/client';
import { AgentJobError, ErrorName } from '../errors.js';
import { keyIdOf, UNOPENED_ERROR_NAMES } from './codec.js';

/** A followed workflow whose payloads the workers cannot open: it stays open, retrying its task. */
export class PayloadUnopenedError extends AgentJobError {
  constructor(
    readonly workflowId: string,
    readonly failureType: string,
    keyId: string | null,
  ) {
    const why =
      failureType === ErrorName.UnknownPayloadKey
        ? `their payload key ring lacks the key ${keyId === null ? 'it was sealed with' : `${keyId}, which sealed its input`}`
        : `it does not open with their key ${keyId === null ? 'of its ID' : `of ID ${keyId}`}: sealed with another key of that ID, or altered, or truncated`;
    super(
      ErrorName.PayloadUnopened,
      `workflow ${workflowId} cannot run: the workers cannot open its payloads (${failureType}): ${why}. ` +
        'It is left open and its task is retried: it goes on once the workers hold the key this caller sealed with ' +
        '(TEMPORAL_PAYLOAD_KEYS_FILE); one that can never be opened is ended as docs/operator-actions.md says',
    );
  }
}

/**
 * The error to report when the workers cannot open a payload of `handle`'s workflow: its workflow
 * task is being retried, and the last task that ended failed on a payload that does not open.
 * Null otherwise.
 */
export async function unopenedPayload(handle: WorkflowHandle): Promise<PayloadUnopenedError | null> {
  const { raw } = await handle.describe();
  if ((raw.pendingWorkflowTask?.attempt ?? 0) < 2) return null;
  const events = (await handle.fetchHistory()).events ?? [];
  const ended = events
    .filter((e) => e.workflowTaskFailedEventAttributes || e.workflowTaskCompletedEventAttributes)
    .at(-1);
  const type = ended?.workflowTaskFailedEventAttributes?.failure?.applicationFailureInfo?.type;
  if (!type || !UNOPENED_ERROR_NAMES.has(type)) return null;
  // Stuck at its first task, the input is the payload, and its key ID names the key it needs.
  const firstTask = !events.some((e) => e.workflowTaskCompletedEventAttributes);
  const input = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  return new PayloadUnopenedError(handle.workflowId, type, firstTask ? keyIdOf(input?.metadata) : null);
}
