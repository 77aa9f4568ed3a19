/**
 * The one error type the client throws (besides a caller's own abort reason). What it means is the
 * failure policy's (src/failure-policy/table.ts): the client says what happened (a
 * {@link FailureKind}), and the type, finality and ambiguity follow from the policy's table.
 */
import type { FailureKind } from '../failure-policy/kinds.js';
import { verdictOf, type ApiOperation, type Verdict } from '../failure-policy/table.js';
import type { ApiFailureType } from '../failure-policy/types.js';
import { AgentJobError, ErrorName } from '../errors.js';

export type { ApiOperation } from '../failure-policy/table.js';

/** What {@link AgentApiError} is built from. */
export interface AgentApiErrorInit {
  kind: FailureKind;
  operation: ApiOperation;
  status: number | null;
  retryAfterMs: number | null;
  /**
   * The request may have been applied even though the kind alone says not: a failure while
   * reading a 2xx body (the server took the request). Default: the policy's.
   */
  applied?: boolean;
  /** See {@link AgentApiError.jobId}. */
  jobId?: string | null;
  message: string;
  cause?: unknown;
}

/**
 * A failed API call. `type` is set explicitly from the policy (never derived from the class name,
 * which a bundler may rename). The message names the operation, the IDs, the status and the
 * server's short explanation; it never contains the API key or the Authorization header.
 */
export class AgentApiError extends AgentJobError {
  /** What happened, as the failure policy names it. */
  readonly kind: FailureKind;
  /** What the policy says it does, for this call. */
  readonly verdict: Verdict;
  /** The failure type: always one of the API-facing names in {@link ApiFailureType}. */
  readonly type: ApiFailureType;
  /** The client call that failed. */
  readonly operation: ApiOperation;
  /** The HTTP status, or null when no response arrived. */
  readonly status: number | null;
  /** False when the policy says no retry can help. */
  readonly retryable: boolean;
  /** The server's `Retry-After` (on 429 and 503) in ms, or null. */
  readonly retryAfterMs: number | null;
  /**
   * False when the request surely did not take effect (no connection, or a status that means the
   * server refused it); true when it may have (a create that may have created an agent job).
   */
  readonly requestMayHaveTakenEffect: boolean;
  /**
   * For `UnreadableAnswer`: the agent job the request took effect on, the message's job or the ID
   * read from a create's answer; null when none can be named, and for every other type.
   */
  readonly jobId: string | null;

  constructor(init: AgentApiErrorInit) {
    super(ErrorName.AgentApi, init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.verdict = verdictOf(init.kind, init.operation);
    this.type = this.verdict.type;
    this.operation = init.operation;
    this.status = init.status;
    this.retryable = this.verdict.bound !== 'final';
    this.retryAfterMs = init.retryAfterMs;
    this.requestMayHaveTakenEffect = init.applied ?? this.verdict.mayHaveBeenApplied;
    this.jobId = init.jobId ?? null;
  }
}
