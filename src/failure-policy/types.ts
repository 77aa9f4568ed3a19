/**
 * The failure types an Agent Job API call fails with: the names the failure policy's table
 * (./table.ts) gives each kind of failure, and src/contract.ts re-exports with the workflow's own.
 *
 * Pure: no imports. The API client, workflow code and the contract import it.
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
