/**
 * The idempotency keys of the Nexus operations. Pure: unit-tested without a server.
 *
 * The caller's Nexus machinery retries a start request (a timeout, a worker that died mid-request)
 * with the same request ID, which the caller's history holds for the operation; a key derived from
 * it makes the retry reach the same workflow and the same follow-up instead of a second agent job
 * or a second message (the API honours no idempotency key of its own).
 */
import { InvalidInputError } from '../contract.js';

/** What marks a key derived from a Nexus request ID, so that it reads as one in a workflow ID. */
export const NEXUS_REQUEST_KEY_PREFIX = 'nexus-';

/**
 * The key of a `runAgentJob` or `sendFollowUp` request: the caller's when it gave one (checked by
 * the library as any key: a blank one is refused, not replaced), else `nexus-<request ID>`.
 *
 * @throws {InvalidInputError} naming `key` when there is neither: a blank request ID would give
 *   every such request the same key, and so the same agent job.
 */
export function nexusKey(callerKey: string | undefined, requestId: string): string {
  if (callerKey !== undefined) return callerKey;
  if (requestId.trim() === '') {
    throw new InvalidInputError(
      'key',
      'is required: the Nexus request carries no request ID to derive one from',
    );
  }
  return `${NEXUS_REQUEST_KEY_PREFIX}${requestId}`;
}
