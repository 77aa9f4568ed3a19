/**
 * The failure policy: what every failure of an Agent Job API call does, in one table. For each
 * kind of failure (an HTTP status class, a network error split by whether the request can have
 * left, a TLS handshake, a timeout, a worker stopping, an answer that cannot be read) and each call
 * (create, poll, message) it says the failure type the caller sees, whether it is final, whether
 * the request may have been applied, how a streak of it is bounded, and how it backs off.
 *
 * Everything else reads this module: the API client classifies what happened with
 * {@link kindOfStatus} and {@link kindOfNetworkError}, the activities hand a failure back or let
 * Temporal retry it as {@link verdictOf} says, and the workflow bounds a streak with
 * {@link boundReached}. No other file compares an HTTP status or an API failure type
 * (`dev/check-failure-policy.ts` fails `npm run lint` when one does), and docs/failure-policy.md is
 * generated from {@link POLICY} (`dev/failure-policy-doc.ts`, diffed in lint).
 *
 * Pure: no Node modules, no clock, no randomness of its own. Workflow code imports it.
 */
import { ApiFailureType } from './types.js';

/** The client call a failure came from. */
export type ApiOperation = 'createJob' | 'getJob' | 'sendMessage';

/** What happened to one call: the facts, before the policy says what they mean ({@link KIND_TEXT}). */
export const FailureKind = {
  Malformed: 'malformed',
  NotSendable: 'not-sendable',
  KeyRefused: 'key-refused',
  Forbidden: 'forbidden',
  NotFound: 'not-found',
  NotProcessed: 'not-processed',
  RateLimited: 'rate-limited',
  Unavailable: 'unavailable',
  ServerError: 'server-error',
  Redirect: 'redirect',
  SeeOther: 'see-other',
  OddStatus: 'odd-status',
  NotConnected: 'not-connected',
  TlsRejected: 'tls-rejected',
  ProxyRefused: 'proxy-refused',
  ConnectTimeout: 'connect-timeout',
  LostAfterSend: 'lost-after-send',
  NoAnswerInTime: 'no-answer-in-time',
  ShutdownBeforeSend: 'shutdown-before-send',
  NotARecord: 'not-a-record',
  InvalidRecord: 'invalid-record',
} as const;

/** One of the {@link FailureKind} values. */
export type FailureKind = (typeof FailureKind)[keyof typeof FailureKind];

/** What each {@link FailureKind} is, for people: the first column of docs/failure-policy.md. */
export const KIND_TEXT: Readonly<Record<FailureKind, string>> = {
  [FailureKind.Malformed]: '400, 422 and other 4xx not named below: the request itself is wrong.',
  [FailureKind.NotSendable]:
    'The client refused to send it: an ID or key that would address another URL or break a header.',
  [FailureKind.KeyRefused]: '401: the key is unknown, expired or revoked.',
  [FailureKind.Forbidden]:
    '403: the key lacks a scope, or the request came from outside its IP allow-list, or a WAF page.',
  [FailureKind.NotFound]: '404.',
  [FailureKind.NotProcessed]: '408 and 425: the server says it did not process the request.',
  [FailureKind.RateLimited]: '429.',
  [FailureKind.Unavailable]: '503: unavailable, not processed; may carry `Retry-After`.',
  [FailureKind.ServerError]:
    '500, 502, 504 and other 5xx: the server failed somewhere after reading the request.',
  [FailureKind.Redirect]:
    '301, 302, 307, 308 (and 300, 305): the API is not where `AGENT_API_BASE_URL` points.',
  [FailureKind.SeeOther]: '303: the server processed a POST and points elsewhere for its result.',
  [FailureKind.OddStatus]: '1xx, 304, and any other status the API never answers.',
  [FailureKind.NotConnected]: 'Connection refused, DNS failure, unreachable: no byte left.',
  [FailureKind.TlsRejected]:
    'The TLS handshake failed (untrusted, expired or mismatched certificate, https to a plain port): no byte of the request left.',
  [FailureKind.ProxyRefused]:
    'The egress proxy refused the request or its CONNECT tunnel (407 Proxy Authentication Required, or another answer than 200 to CONNECT): nothing reached the API.',
  [FailureKind.ConnectTimeout]: 'No connection within the connect timeout: no byte left.',
  [FailureKind.LostAfterSend]:
    'The connection broke after the request was written, or an unknown network error.',
  [FailureKind.NoAnswerInTime]: 'No answer (headers or body) in time after the request was written.',
  [FailureKind.ShutdownBeforeSend]: 'The worker stopped before the request was sent.',
  [FailureKind.NotARecord]:
    "A 2xx whose body is not JSON (a maintenance page, a proxy's page), or, for a create or message, broke off.",
  [FailureKind.InvalidRecord]:
    'A 2xx whose JSON is not a valid record (a field out of bounds, a `prLink` that is not a clean URL), or is larger than the cap: the same answer again will not change.',
};

/**
 * How a streak of a failure ends, if it does before the deadline:
 * - `deadline`: retried until the workflow's deadline;
 * - `final`: at once (no retry can help);
 * - `in-a-row`: after {@link ANSWERS_IN_A_ROW} such answers in a row (an answer that will not change);
 * - `blip`: for the input's `blipTolerance` once the API has answered for the job (a failover's
 *   404s, a maintenance page), else after {@link ANSWERS_IN_A_ROW} in a row (a wrong job ID);
 * - `credentials`: for the input's `credentialTolerance` (a key being rotated): polls and messages
 *   always; a create only when this worker had an answer other than 401/403 from the project
 *   within that time, else at once (a wrong key creates nothing and fails fast).
 */
export type StreakBound = 'deadline' | 'final' | 'in-a-row' | 'blip' | 'credentials';

/** The three calls, as the policy's columns. */
export type PolicyCall = 'create' | 'poll' | 'message';

/** What one kind of failure of one call does. */
export interface Verdict {
  /** The failure type the caller sees. */
  type: ApiFailureType;
  /** How a streak of it ends. */
  bound: StreakBound;
  /** The request may have been applied: a create may have made a job, a message started a turn. */
  mayHaveBeenApplied: boolean;
  /** The server's `Retry-After` sets the wait (429 and 503, which define it for this). */
  readsRetryAfter: boolean;
  /** A 2xx that took effect but whose body is not a record: never sent again, the job read instead. */
  appliedWithoutRecord: boolean;
  /** A refusal of a project-quota use (429): the quota must hear of it. */
  refusesQuotaUse: boolean;
  /** The API refused the key: the key's source is read again before the next attempt. */
  refusesKey: boolean;
  /**
   * Never retried by Temporal, whatever the bound: the create's and message's retry policies
   * exclude its type (the SDK's own `WorkerShutdown` shares it), so the workflow decides.
   */
  workflowRetries: boolean;
}

type Row = Partial<Verdict> & Pick<Verdict, 'type' | 'bound'>;

const row = (init: Row): Verdict => ({
  mayHaveBeenApplied: false,
  readsRetryAfter: false,
  appliedWithoutRecord: false,
  refusesQuotaUse: false,
  refusesKey: false,
  workflowRetries: false,
  ...init,
});

/** The same verdict for every call. */
const all = (init: Row): Record<PolicyCall, Verdict> => ({
  create: row(init),
  poll: row(init),
  message: row(init),
});

/** A 2xx without a record: a create or message took effect (never resent); a poll reads again. */
const unreadable = (pollBound: StreakBound): Record<PolicyCall, Verdict> => {
  const applied = row({
    type: ApiFailureType.UnreadableAnswer,
    bound: 'final',
    mayHaveBeenApplied: true,
    appliedWithoutRecord: true,
  });
  return {
    create: applied,
    poll: row({ type: ApiFailureType.UnexpectedResponse, bound: pollBound }),
    message: applied,
  };
};

const keyRefused = all({ type: ApiFailureType.Unauthorized, bound: 'credentials', refusesKey: true });

/** The table. {@link KIND_TEXT} says what each row is; docs/failure-policy.md prints it. */
export const POLICY: Readonly<Record<FailureKind, Readonly<Record<PolicyCall, Verdict>>>> = {
  [FailureKind.Malformed]: all({ type: ApiFailureType.InvalidRequest, bound: 'final' }),
  [FailureKind.NotSendable]: all({ type: ApiFailureType.InvalidRequest, bound: 'final' }),
  [FailureKind.KeyRefused]: keyRefused,
  [FailureKind.Forbidden]: keyRefused,
  [FailureKind.NotFound]: {
    // A create names only the project, so its 404 is about the project; get and message name a job.
    create: row({ type: ApiFailureType.ProjectNotFound, bound: 'final' }),
    poll: row({ type: ApiFailureType.JobNotFound, bound: 'blip' }),
    message: row({ type: ApiFailureType.JobNotFound, bound: 'blip' }),
  },
  [FailureKind.NotProcessed]: all({ type: ApiFailureType.ServiceUnavailable, bound: 'deadline' }),
  [FailureKind.RateLimited]: all({
    type: ApiFailureType.RateLimited,
    bound: 'deadline',
    readsRetryAfter: true,
    refusesQuotaUse: true,
  }),
  [FailureKind.Unavailable]: all({
    type: ApiFailureType.ServiceUnavailable,
    bound: 'deadline',
    readsRetryAfter: true,
  }),
  [FailureKind.ServerError]: all({
    type: ApiFailureType.ServiceUnavailable,
    bound: 'deadline',
    mayHaveBeenApplied: true,
  }),
  [FailureKind.Redirect]: all({ type: ApiFailureType.Redirected, bound: 'final' }),
  [FailureKind.SeeOther]: {
    // A POST answered 303 was processed: as ambiguous as a lost answer, never a plain retry.
    create: row({ type: ApiFailureType.UnexpectedResponse, bound: 'deadline', mayHaveBeenApplied: true }),
    poll: row({ type: ApiFailureType.Redirected, bound: 'final' }),
    message: row({ type: ApiFailureType.UnexpectedResponse, bound: 'deadline', mayHaveBeenApplied: true }),
  },
  [FailureKind.OddStatus]: all({
    type: ApiFailureType.UnexpectedResponse,
    bound: 'in-a-row',
    mayHaveBeenApplied: true,
  }),
  [FailureKind.NotConnected]: all({ type: ApiFailureType.NetworkError, bound: 'deadline' }),
  [FailureKind.TlsRejected]: {
    // Nothing was sent. A create fails at once with the cause, so a person fixes the URL or the
    // CA; a job already made is watched through a certificate being renewed, as through a blip.
    create: row({ type: ApiFailureType.TlsHandshakeFailed, bound: 'final' }),
    poll: row({ type: ApiFailureType.TlsHandshakeFailed, bound: 'blip' }),
    message: row({ type: ApiFailureType.TlsHandshakeFailed, bound: 'blip' }),
  },
  [FailureKind.ProxyRefused]: all({ type: ApiFailureType.ProxyRefused, bound: 'final' }),
  [FailureKind.ConnectTimeout]: all({ type: ApiFailureType.RequestTimeout, bound: 'deadline' }),
  [FailureKind.LostAfterSend]: all({
    type: ApiFailureType.NetworkError,
    bound: 'deadline',
    mayHaveBeenApplied: true,
  }),
  [FailureKind.NoAnswerInTime]: all({
    type: ApiFailureType.RequestTimeout,
    bound: 'deadline',
    mayHaveBeenApplied: true,
  }),
  [FailureKind.ShutdownBeforeSend]: all({
    type: ApiFailureType.WorkerShutdown,
    bound: 'deadline',
    workflowRetries: true,
  }),
  // A maintenance page passes; the same invalid record, or one too large, comes again every time.
  [FailureKind.NotARecord]: unreadable('blip'),
  [FailureKind.InvalidRecord]: unreadable('in-a-row'),
};

/** The column of an operation. */
export function callOf(operation: ApiOperation): PolicyCall {
  if (operation === 'createJob') return 'create';
  return operation === 'getJob' ? 'poll' : 'message';
}

/** What a failure of `kind` during `operation` does. */
export function verdictOf(kind: FailureKind, operation: ApiOperation): Verdict {
  return POLICY[kind][callOf(operation)];
}

/** Whether no retry can help: the verdict is final. */
export function isFinal(verdict: Verdict): boolean {
  return verdict.bound === 'final';
}

/**
 * Whether a retryable failure goes back to the workflow instead of being retried by Temporal:
 * when the workflow counts or times its streak (`in-a-row`, `blip`, `credentials`: the status
 * query shows the wait), and when a create or message may have been applied (only the workflow
 * may send it again, and it tells the next attempt so).
 */
export function handedBack(verdict: Verdict, operation: ApiOperation): boolean {
  if (verdict.bound !== 'deadline' || verdict.workflowRetries) return true;
  return operation !== 'getJob' && verdict.mayHaveBeenApplied;
}

// ---------------------------------------------------------------------------------------------
// What happened: HTTP statuses and network errors as kinds.

/** The kind of an HTTP status other than 2xx. */
export function kindOfStatus(status: number): FailureKind {
  const named = STATUS_KINDS[status];
  if (named !== undefined) return named;
  if (status >= 500) return FailureKind.ServerError;
  if (status >= 400) return FailureKind.Malformed;
  return FailureKind.OddStatus;
}

const STATUS_KINDS: Readonly<Record<number, FailureKind>> = {
  300: FailureKind.Redirect,
  301: FailureKind.Redirect,
  302: FailureKind.Redirect,
  303: FailureKind.SeeOther,
  305: FailureKind.Redirect,
  307: FailureKind.Redirect,
  308: FailureKind.Redirect,
  401: FailureKind.KeyRefused,
  403: FailureKind.Forbidden,
  404: FailureKind.NotFound,
  // Only a proxy answers it: the API never asks for proxy credentials.
  407: FailureKind.ProxyRefused,
  408: FailureKind.NotProcessed,
  425: FailureKind.NotProcessed,
  429: FailureKind.RateLimited,
  503: FailureKind.Unavailable,
};

/** Whether a status is a success whose body is the record. */
export function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

/** Whether a status is a redirect whose `Location` is worth naming in the message. */
export function namesLocation(kind: FailureKind): boolean {
  return kind === FailureKind.Redirect || kind === FailureKind.SeeOther;
}

/** A network failure's kind, and a short description for the message. */
export interface NetworkKind {
  kind: FailureKind;
  what: string;
}

/** Failures before a byte of the request can reach the server. */
const NOT_CONNECTED: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host name not found (DNS)',
  EAI_AGAIN: 'host name lookup failed (DNS)',
  EAI_NONAME: 'host name not found (DNS)',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EADDRNOTAVAIL: 'address not available',
};

/**
 * TLS handshake failures (Node's `tls` error codes, and OpenSSL's for a handshake that was not
 * TLS at all): the request is written only after the handshake, so it never left.
 */
const TLS_REJECTED: Readonly<Record<string, string>> = {
  DEPTH_ZERO_SELF_SIGNED_CERT: 'the server certificate is self-signed and not trusted',
  SELF_SIGNED_CERT_IN_CHAIN: 'the server certificate chain has a self-signed certificate that is not trusted',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'the server certificate cannot be verified (unknown issuer)',
  UNABLE_TO_GET_ISSUER_CERT: 'the server certificate issuer is unknown',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'the server certificate issuer is not trusted here',
  CERT_HAS_EXPIRED: 'the server certificate has expired',
  CERT_NOT_YET_VALID: 'the server certificate is not valid yet',
  CERT_REVOKED: 'the server certificate is revoked',
  CERT_UNTRUSTED: 'the server certificate is not trusted',
  CERT_SIGNATURE_FAILURE: 'the server certificate signature is invalid',
  INVALID_CA: 'the server certificate chain has an invalid CA',
  ERR_TLS_CERT_ALTNAME_INVALID: 'the server certificate does not name this host',
  ERR_SSL_WRONG_VERSION_NUMBER: 'the server did not answer TLS (https to a plain http port?)',
  ERR_SSL_PACKET_LENGTH_TOO_LONG: 'the server did not answer TLS (https to a plain http port?)',
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: 'the server refused the handshake (unknown CA)',
  ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: 'the TLS handshake failed',
  ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION: 'no TLS version in common with the server',
  UND_ERR_PRX_TLS: 'the TLS handshake with the proxy failed',
  EPROTO: 'the TLS handshake failed',
};

/** Failures after the connection was open: the server may have read and applied the request. */
const LOST_AFTER_SEND: Readonly<Record<string, string>> = {
  ECONNRESET: 'connection reset',
  EPIPE: 'connection closed while sending',
  ECONNABORTED: 'connection aborted',
  UND_ERR_SOCKET: 'connection closed by the server',
  UND_ERR_CLOSED: 'connection closed',
};

/** Classifies an error thrown by undici, by its `code` (on the error, its cause, or an aggregate's first error). */
export function kindOfNetworkError(err: unknown): NetworkKind {
  const code = errorCode(err);
  if (code === 'UND_ERR_CONNECT_TIMEOUT')
    return { kind: FailureKind.ConnectTimeout, what: 'connect timeout' };
  if (code === 'UND_ERR_HEADERS_TIMEOUT') {
    return { kind: FailureKind.NoAnswerInTime, what: 'no response headers in time' };
  }
  if (code === 'UND_ERR_BODY_TIMEOUT')
    return { kind: FailureKind.NoAnswerInTime, what: 'response body stalled' };
  const proxy = proxyRefusal(err);
  if (proxy !== null) return { kind: FailureKind.ProxyRefused, what: proxy };
  for (const [table, kind] of [
    [NOT_CONNECTED, FailureKind.NotConnected],
    [TLS_REJECTED, FailureKind.TlsRejected],
    [LOST_AFTER_SEND, FailureKind.LostAfterSend],
  ] as const) {
    if (code !== undefined && code in table) return { kind, what: `${table[code] ?? code} (${code})` };
  }
  // Unknown failure: assume the worst for a create (it may have been applied) but let it be retried.
  return { kind: FailureKind.LostAfterSend, what: code ?? 'network failure' };
}

/**
 * undici's refusals by an egress proxy, which carry no code of their own: `Proxy Authentication
 * Required (407)` for a request in absolute form, `Proxy response (403) !== 200 when HTTP Tunneling`
 * for a CONNECT. What the proxy answered, or null for any other error. (The caller's own aborts
 * never get here: the client reads its signal first.)
 */
function proxyRefusal(err: unknown): string | null {
  const message = err instanceof Error ? err.message : '';
  const status = /^Proxy (?:Authentication Required \((\d{3})\)|response \((\d{3})\))/.exec(message);
  const answered = status?.[1] ?? status?.[2];
  if (answered === undefined) return null;
  return answered === '407'
    ? 'the proxy answered 407 Proxy Authentication Required (check the credentials in HTTPS_PROXY or HTTP_PROXY)'
    : `the proxy answered ${answered} instead of opening a tunnel to the API`;
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, cause, errors } = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string') return code;
  // Happy-eyeballs connects (several addresses tried) fail with an AggregateError.
  if (Array.isArray(errors) && errors.length > 0) return errorCode(errors[0]);
  return cause === undefined ? undefined : errorCode(cause);
}

// ---------------------------------------------------------------------------------------------
// How a streak is bounded.

/** Answers in a row after which an `in-a-row` failure is final, and a `blip` of a job never answered. */
export const ANSWERS_IN_A_ROW = 5;

/** Default of the input's `blipTolerance`. */
export const DEFAULT_BLIP_TOLERANCE_MS = 30 * 60_000;

/**
 * Default of the input's `credentialTolerance`: an hour. Rotating an expired or revoked key takes
 * an operator minutes; while it lasts, the jobs already made run on at the API, and a workflow that
 * gave up would leave its job unwatched and its pull request unreported.
 */
export const DEFAULT_CREDENTIAL_TOLERANCE_MS = 60 * 60_000;

/** A streak of one failure type, as the workflow carries it. */
export interface StreakOfType {
  /** Failures of the type in a row. */
  inARow: number;
  /** How long they have lasted, in ms. */
  lastedMs: number;
}

/** The tolerances a workflow runs with, in ms. */
export interface Tolerances {
  /** `blipTolerance`, or null while the API has not answered for the job (a count bounds it then). */
  blipMs: number | null;
  /** `credentialTolerance`. */
  credentialMs: number;
}

/**
 * When a streak of failures bounded by `bound` is over: what was reached, for the message, or null
 * to go on. `keyAnsweredAgoMs`: for a create's 401/403, how long ago this worker last had another
 * answer from the project (null: never), which decides whether the key may be in rotation.
 */
export function boundReached(
  bound: StreakBound,
  streak: StreakOfType,
  tolerances: Tolerances,
  keyAnsweredAgoMs: number | null = null,
  operation: ApiOperation = 'getJob',
): string | null {
  switch (bound) {
    case 'deadline':
      return null;
    case 'final':
      return 'a final answer';
    case 'in-a-row':
      return inARow(streak);
    case 'blip':
      if (tolerances.blipMs === null) return inARow(streak);
      return lasted(streak, tolerances.blipMs, 'the blip tolerance');
    case 'credentials':
      if (
        operation === 'createJob' &&
        (keyAnsweredAgoMs === null || keyAnsweredAgoMs > tolerances.credentialMs)
      ) {
        return 'a refused key with no answer from this project within the credential tolerance (no agent job was created)';
      }
      return lasted(streak, tolerances.credentialMs, 'the credential tolerance');
  }
}

function inARow(streak: StreakOfType): string | null {
  return streak.inARow >= ANSWERS_IN_A_ROW ? `${streak.inARow} such answers in a row` : null;
}

function lasted(streak: StreakOfType, toleranceMs: number, name: string): string | null {
  if (streak.lastedMs < toleranceMs) return null;
  const s = (ms: number) => Math.round(ms / 1000);
  return `such answers for ${s(streak.lastedMs)}s (${streak.inARow} in a row), past ${name} of ${s(toleranceMs)}s`;
}

/**
 * The bound of a failure handed back by an activity of an earlier build, whose details carry no
 * `bound`: 404s and odd bodies were a blip, the rest retried until the deadline.
 */
export function legacyBound(type: string): StreakBound {
  return type === ApiFailureType.JobNotFound || type === ApiFailureType.UnexpectedResponse
    ? 'blip'
    : 'deadline';
}

/** Whether a failure of this type refused a project-quota use: the quota must hear of it. */
export function refusesQuotaUse(type: string | null | undefined): boolean {
  return type === ApiFailureType.RateLimited;
}

/** Whether a create's failure says it may have made an agent job, which the next create must know. */
export function outcomeUnknown(type: string | null | undefined): boolean {
  return type === ApiFailureType.CreateOutcomeUnknown || type === ApiFailureType.MessageOutcomeUnknown;
}

/** The failure type of a create or message that may have been applied, under the `fail` policy. */
export function outcomeUnknownType(operation: 'createJob' | 'sendMessage'): ApiFailureType {
  return operation === 'createJob'
    ? ApiFailureType.CreateOutcomeUnknown
    : ApiFailureType.MessageOutcomeUnknown;
}

// ---------------------------------------------------------------------------------------------
// How it backs off.

/** An exponential backoff, in milliseconds. */
export interface Backoff {
  initialIntervalMs: number;
  backoffCoefficient: number;
  maximumIntervalMs: number;
}

/** Create: a new agent job is worth patience, and the API counts creates against an hourly budget. */
export const CREATE_BACKOFF: Backoff = {
  initialIntervalMs: 2_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 120_000,
};

/** Get: reads are cheap, and a poll that waits too long delays noticing the end of the job. */
export const GET_BACKOFF: Backoff = {
  initialIntervalMs: 1_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 60_000,
};

/** A follow-up message starts a turn, like a create: same patience (it counts against the same budget). */
export const MESSAGE_BACKOFF: Backoff = CREATE_BACKOFF;

/** The backoff of each call. */
export const BACKOFFS: Readonly<Record<PolicyCall, Backoff>> = {
  create: CREATE_BACKOFF,
  poll: GET_BACKOFF,
  message: MESSAGE_BACKOFF,
};

/**
 * Longest `Retry-After` honoured: 10 minutes. A server may ask for an hour (the API's budget is
 * hourly); waiting in steps of at most this long keeps the workflow responsive to its deadline, to
 * `pollNow` and to operators, and the next refusal asks again.
 */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * Jitter added to every wait, as a fraction: 0 to +20%. Only upwards, so a wait never drops below
 * the backoff or the server's `Retry-After`; enough that workflows refused together do not return
 * together.
 */
export const RETRY_JITTER = 0.2;

/** The backoff before attempt `failures + 1`, after `failures` (at least 1) failed attempts in a row. */
export function backoffMs(backoff: Backoff, failures: number): number {
  const exponent = Math.max(0, failures - 1);
  const wait = backoff.initialIntervalMs * backoff.backoffCoefficient ** exponent;
  return Math.min(Number.isFinite(wait) ? wait : backoff.maximumIntervalMs, backoff.maximumIntervalMs);
}

/** What {@link retryDelayMs} decides from. */
export interface RetryDelayInput {
  backoff: Backoff;
  /** Failed attempts in a row so far, at least 1. */
  failures: number;
  /** The server's `Retry-After` in ms (0 for a date in the past), or null when it sent none. */
  retryAfterMs: number | null;
  /** A uniform number in [0, 1): the workflow's seeded `Math.random`, or the activity's. */
  random: () => number;
}

/**
 * The wait before the next attempt: the policy's backoff, raised (never lowered) to the server's
 * `Retry-After` capped at {@link MAX_RETRY_AFTER_MS}, plus up to {@link RETRY_JITTER}. So
 * `Retry-After: 0` or a date in the past (clock skew) can never cause a retry storm. Callers cap
 * the result at their deadline.
 */
export function retryDelayMs(input: RetryDelayInput): number {
  const floor = backoffMs(input.backoff, input.failures);
  const asked =
    input.retryAfterMs === null ? 0 : Math.min(Math.max(0, input.retryAfterMs), MAX_RETRY_AFTER_MS);
  return Math.round(Math.max(floor, asked) * (1 + input.random() * RETRY_JITTER));
}

/** The Temporal retry policy of a {@link Backoff}. */
export function retryPolicyOf(backoff: Backoff): {
  initialInterval: number;
  backoffCoefficient: number;
  maximumInterval: number;
} {
  return {
    initialInterval: backoff.initialIntervalMs,
    backoffCoefficient: backoff.backoffCoefficient,
    maximumInterval: backoff.maximumIntervalMs,
  };
}

/**
 * The failure type the SDK gives an activity attempt that a stopping worker cancelled and that let
 * the cancellation out. Create and message never retry it on the server: the workflow decides, as
 * the request may have left.
 */
export const SDK_WORKER_SHUTDOWN_TYPE = 'WorkerShutdown';
