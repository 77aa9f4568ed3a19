/**
 * The one error type the client throws (besides a caller's own abort reason), and the tables that
 * map an HTTP status or a network failure onto a {@link ApiFailureType}.
 */
import { ApiFailureType } from './types.js';

/** The client call a failure came from. */
export type ApiOperation = 'createJob' | 'getJob' | 'sendMessage';

/**
 * Failures that no retry can fix: the request itself, the key or the project is wrong. Everything
 * else is retryable here; the activity layer bounds how often (JobNotFound and UnexpectedResponse
 * in particular).
 */
const FINAL_TYPES: ReadonlySet<ApiFailureType> = new Set([
  ApiFailureType.InvalidRequest,
  ApiFailureType.Unauthorized,
  ApiFailureType.ProjectNotFound,
  // The request took effect: sending it again could make a second agent job or turn.
  ApiFailureType.UnreadableAnswer,
]);

/** What {@link AgentApiError} is built from. */
export interface AgentApiErrorInit {
  type: ApiFailureType;
  operation: ApiOperation;
  status: number | null;
  retryAfterMs: number | null;
  requestMayHaveTakenEffect: boolean;
  /** See {@link AgentApiError.jobId}. */
  jobId?: string | null;
  message: string;
  cause?: unknown;
}

/**
 * A failed API call. `type` is set explicitly (never derived from the class name, which a bundler may
 * rename) and `retryable` follows from it. The message names the operation, the IDs, the status and
 * the server's short explanation; it never contains the API key or the Authorization header.
 */
export class AgentApiError extends Error {
  /** The failure type: always one of the API-facing names in {@link ApiFailureType}. */
  readonly type: ApiFailureType;
  /** The client call that failed. */
  readonly operation: ApiOperation;
  /** The HTTP status, or null when no response arrived. */
  readonly status: number | null;
  /** False for InvalidRequest, Unauthorized, ProjectNotFound and UnreadableAnswer; true otherwise. */
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
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'AgentApiError';
    this.type = init.type;
    this.operation = init.operation;
    this.status = init.status;
    this.retryable = !FINAL_TYPES.has(init.type);
    this.retryAfterMs = init.retryAfterMs;
    this.requestMayHaveTakenEffect = init.requestMayHaveTakenEffect;
    this.jobId = init.jobId ?? null;
  }
}

/** How one HTTP status is handled. */
export interface StatusClass {
  type: ApiFailureType;
  /** The request may have been applied (the server failed somewhere after reading it). */
  mayHaveTakenEffect: boolean;
  /** Whether to honour `Retry-After`: only statuses that define it for this purpose (429, 503). */
  readsRetryAfter: boolean;
}

/**
 * The failure table for HTTP statuses other than 2xx. 408, 425 and 503 say the server did not
 * process the request, so a retried create is safe; 500, 502, 504 and unknown 5xx leave it open.
 */
export function classifyStatus(status: number, operation: ApiOperation): StatusClass {
  const refused = (type: ApiFailureType): StatusClass => ({
    type,
    mayHaveTakenEffect: false,
    readsRetryAfter: false,
  });
  switch (status) {
    case 400:
    case 422:
      return refused(ApiFailureType.InvalidRequest);
    case 401:
    case 403:
      return refused(ApiFailureType.Unauthorized);
    case 404:
      // A create names only the project, so its 404 is about the project; get and message name a job.
      return refused(operation === 'createJob' ? ApiFailureType.ProjectNotFound : ApiFailureType.JobNotFound);
    case 408:
    case 425:
      return refused(ApiFailureType.ServiceUnavailable);
    case 429:
      return { type: ApiFailureType.RateLimited, mayHaveTakenEffect: false, readsRetryAfter: true };
    case 503:
      return { type: ApiFailureType.ServiceUnavailable, mayHaveTakenEffect: false, readsRetryAfter: true };
  }
  if (status >= 500) {
    return { type: ApiFailureType.ServiceUnavailable, mayHaveTakenEffect: true, readsRetryAfter: false };
  }
  if (status >= 400) return refused(ApiFailureType.InvalidRequest);
  // 1xx and 3xx are not part of the API (redirects are not followed): the server is not the one we
  // expect, and we cannot tell what it did with the request.
  return { type: ApiFailureType.UnexpectedResponse, mayHaveTakenEffect: true, readsRetryAfter: false };
}

/** How one network failure is handled. */
export interface NetworkClass {
  type: ApiFailureType;
  mayHaveTakenEffect: boolean;
  /** A short human description for the message. */
  what: string;
}

/**
 * Network failures that happen before a byte of the request can reach the server: retrying them
 * can never create a second agent job.
 */
const NOT_SENT: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host name not found (DNS)',
  EAI_AGAIN: 'host name lookup failed (DNS)',
  EAI_NONAME: 'host name not found (DNS)',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EADDRNOTAVAIL: 'address not available',
};

/** Failures after the connection was open: the server may have read and applied the request. */
const MAYBE_SENT: Readonly<Record<string, string>> = {
  ECONNRESET: 'connection reset',
  EPIPE: 'connection closed while sending',
  ECONNABORTED: 'connection aborted',
  UND_ERR_SOCKET: 'connection closed by the server',
  UND_ERR_CLOSED: 'connection closed',
};

/** Classifies an error thrown by undici, by its `code` (on the error, its cause, or an aggregate's first error). */
export function classifyNetworkError(err: unknown): NetworkClass {
  const code = errorCode(err);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') {
    return { type: ApiFailureType.RequestTimeout, mayHaveTakenEffect: false, what: 'connect timeout' };
  }
  if (code === 'UND_ERR_HEADERS_TIMEOUT') {
    return {
      type: ApiFailureType.RequestTimeout,
      mayHaveTakenEffect: true,
      what: 'no response headers in time',
    };
  }
  if (code === 'UND_ERR_BODY_TIMEOUT') {
    return { type: ApiFailureType.RequestTimeout, mayHaveTakenEffect: true, what: 'response body stalled' };
  }
  if (code !== undefined && code in NOT_SENT) {
    return { type: ApiFailureType.NetworkError, mayHaveTakenEffect: false, what: NOT_SENT[code] ?? code };
  }
  if (code !== undefined && code in MAYBE_SENT) {
    return { type: ApiFailureType.NetworkError, mayHaveTakenEffect: true, what: MAYBE_SENT[code] ?? code };
  }
  // Unknown failure: assume the worst for a create (it may have been applied) but let it be retried.
  return { type: ApiFailureType.NetworkError, mayHaveTakenEffect: true, what: code ?? 'network failure' };
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, cause, errors } = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string') return code;
  // Happy-eyeballs connects (several addresses tried) fail with an AggregateError.
  if (Array.isArray(errors) && errors.length > 0) return errorCode(errors[0]);
  return cause === undefined ? undefined : errorCode(cause);
}
