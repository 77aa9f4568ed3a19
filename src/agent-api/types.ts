/**
 * The Agent Job API's own vocabulary: the record it returns, its statuses and the failure types
 * of the client. No Temporal imports, so the client stands alone; src/contract.ts re-exports
 * these as part of the workflow's public contract.
 */

/** Failure types of the API client. Stable names: callers match on them. */
export const ApiFailureType = {
  /** The API refused the request as malformed (400, 422, other 4xx). Final. */
  InvalidRequest: 'InvalidRequest',
  /**
   * The API refused the key (401, 403). A poll or message waits for a working key for the input's
   * `credentialTolerance`; a create fails at once unless the key worked for the project lately.
   */
  Unauthorized: 'Unauthorized',
  /** Create answered 404: the project does not exist or the key cannot see it. Final. */
  ProjectNotFound: 'ProjectNotFound',
  /** Get or message answered 404; retried a bounded few times (read-after-create lag), then final. */
  JobNotFound: 'JobNotFound',
  /** 429: too many requests; retried after `Retry-After`. */
  RateLimited: 'RateLimited',
  /** 408, 425, 500, 502, 503, 504 and other 5xx: the API is unwell for now; retried. */
  ServiceUnavailable: 'ServiceUnavailable',
  /** Refused or reset connection, DNS failure: retried. */
  NetworkError: 'NetworkError',
  /**
   * The TLS handshake failed (an untrusted, expired or mismatched certificate, https to a plain
   * port): nothing was sent. Final for a create; a poll or message rides it out like a blip.
   */
  TlsHandshakeFailed: 'TlsHandshakeFailed',
  /**
   * The API answered a redirect: `AGENT_API_BASE_URL` points somewhere else than the API. Final,
   * never sent again (a 303 after a create or message means it was processed: ambiguous instead).
   */
  Redirected: 'Redirected',
  /**
   * The egress proxy (`HTTPS_PROXY`, `HTTP_PROXY`) refused the request or its tunnel (407 and the
   * like): nothing reached the API. Final: its credentials or its policy need a person.
   */
  ProxyRefused: 'ProxyRefused',
  /** The worker stopped before the request was sent: retried. */
  WorkerShutdown: 'WorkerShutdown',
  /** The request did not finish within its timeout: retried. */
  RequestTimeout: 'RequestTimeout',
  /** A body that is not JSON or not an agent job record (a proxy's error page, say); bounded retries. */
  UnexpectedResponse: 'UnexpectedResponse',
  /**
   * A create or follow-up message answered 2xx, so it took effect, but its body cannot be read as
   * a record. Final: it is never sent again (the API documents no idempotency key). The message
   * names the agent job when the answer or the call does.
   */
  UnreadableAnswer: 'UnreadableAnswer',
  /** A create whose outcome is unknown, under the `fail` policy for ambiguous calls. */
  CreateOutcomeUnknown: 'CreateOutcomeUnknown',
  /** A follow-up message whose outcome is unknown, under the `fail` policy for ambiguous calls. */
  MessageOutcomeUnknown: 'MessageOutcomeUnknown',
} as const;

/** One of the {@link ApiFailureType} names. */
export type ApiFailureType = (typeof ApiFailureType)[keyof typeof ApiFailureType];

/**
 * Longest agent job ID accepted, in UTF-8 bytes: far above any real one (`job_` and 32 hex
 * digits), and within Temporal's 2 KiB limit on a search attribute value (`AgentJobId`).
 */
export const MAX_JOB_ID_BYTES = 1_000;

/** The statuses the API documents. */
export const AGENT_JOB_STATUSES = ['active', 'completed', 'archived', 'failed'] as const;

/** A documented agent job status. */
export type AgentJobStatus = (typeof AGENT_JOB_STATUSES)[number];

/** The statuses after which polling stops. */
export const TERMINAL_STATUSES: readonly AgentJobStatus[] = ['completed', 'archived', 'failed'];

/** Whether `status` is one the API documents as terminal. */
export function isTerminalStatus(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/**
 * The agent job record as the API returns it. `status` stays a string because the live service may
 * add values; the workflow decides what an undocumented one means. Unknown extra fields are kept.
 */
export interface AgentJobRecord {
  id: string;
  status: string;
  source?: { repository?: string; ref?: string; [field: string]: unknown };
  model?: string;
  prLink: string | null;
  createdAt?: string;
  archivedAt?: string | null;
  [field: string]: unknown;
}
