/**
 * The failure types of an Agent Job API call (src/contract.ts re-exports them). What each does is
 * the table's alone (./table.ts, docs/failure-policy.md); below, only what it names. Pure.
 */

/** Failure types of the API client. Stable names: callers match on them. */
export const ApiFailureType = {
  /** The API refused the request as malformed (400, 422, other 4xx), or it was not sendable. */
  InvalidRequest: 'InvalidRequest',
  /** The API refused the key (401, 403): unknown, expired, revoked, a scope or an allow-list. */
  Unauthorized: 'Unauthorized',
  /** A create answered 404: the project does not exist or the key cannot see it. */
  ProjectNotFound: 'ProjectNotFound',
  /** A get or message answered 404. */
  JobNotFound: 'JobNotFound',
  /** 429: too many requests. */
  RateLimited: 'RateLimited',
  /** 408, 425, 500, 502, 503, 504 and other 5xx: the API is unwell for now. */
  ServiceUnavailable: 'ServiceUnavailable',
  /** A refused or reset connection, a DNS failure. */
  NetworkError: 'NetworkError',
  /** The TLS handshake failed (an untrusted, expired or mismatched certificate, https to a plain port). */
  TlsHandshakeFailed: 'TlsHandshakeFailed',
  /** The API answered a redirect: `AGENT_API_BASE_URL` points somewhere else than the API. */
  Redirected: 'Redirected',
  /** The egress proxy (`HTTPS_PROXY`, `HTTP_PROXY`) refused the request or its tunnel (407 and the like). */
  ProxyRefused: 'ProxyRefused',
  /** The worker stopped before the request was sent. */
  WorkerShutdown: 'WorkerShutdown',
  /** The request did not finish within its timeout. */
  RequestTimeout: 'RequestTimeout',
  /** A body that is not JSON or not an agent job record (a proxy's error page, say). */
  UnexpectedResponse: 'UnexpectedResponse',
  /** A create or follow-up message answered 2xx, so it took effect, but its body is not a record. */
  UnreadableAnswer: 'UnreadableAnswer',
  /** A create whose outcome is unknown, under the `fail` policy for ambiguous calls. */
  CreateOutcomeUnknown: 'CreateOutcomeUnknown',
  /** A follow-up message whose outcome is unknown, under the `fail` policy for ambiguous calls. */
  MessageOutcomeUnknown: 'MessageOutcomeUnknown',
} as const;

/** One of the {@link ApiFailureType} names. */
export type ApiFailureType = (typeof ApiFailureType)[keyof typeof ApiFailureType];
