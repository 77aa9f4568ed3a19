/**
 * The `Idempotency-Key` of each call that starts work at the API: stable across attempts, worker
 * restarts and continue-as-new, so a server that honours it sees one intent as one. The live API
 * honours none: what keeps a create or message to one call is that the workflow sends it again
 * only under `AGENT_API_AMBIGUOUS_CREATE=retry` (./api-calls.ts, src/activities/index.ts).
 */
import { currentUpdateInfo, workflowInfo } from '@temporalio/workflow';

/** The create's key: the workflow ID, so one workflow never creates two agent jobs. */
export function createKey(): string {
  return headerValue(workflowInfo().workflowId);
}

/**
 * The key of the prompt of `{ jobId, prompt }`: the workflow ID and its first run, so a later
 * workflow with this ID is a new follow-up and gets a new key.
 */
export function startFollowUpKey(): string {
  const { workflowId, firstExecutionRunId } = workflowInfo();
  return headerValue(`${workflowId}/${firstExecutionRunId}/follow-up`);
}

/**
 * The key of an update's message: one per update ID, so a client retrying the update (also after
 * continue-as-new) sends the same key, and a new message never reuses a failed one's.
 */
export function updateMessageKey(turn: number): string {
  const updateId = currentUpdateInfo()?.id ?? `turn-${turn + 1}`;
  return headerValue(`${workflowInfo().workflowId}/message/${updateId}`);
}

/** Header values must be visible ASCII; an ID with spaces or any Unicode is percent-encoded. */
function headerValue(id: string): string {
  return /^[\x21-\x7e]+$/.test(id) ? id : encodeURIComponent(id);
}
