/**
 * The failure policy: what every failure of an Agent Job API call does, in one table. For each
 * kind of failure (an HTTP status class, a network error split by whether the request can have
 * left, a TLS handshake, a timeout, a worker stopping, an answer that cannot be read) and each call
 * (create, poll, message) it says the failure type the caller sees, whether it is final, whether
 * the request may have been applied, how a streak of it is bounded, and how it backs off.
 *
 * Everything else reads this module: the API client classifies what happened with
 * `kindOfStatus` and `kindOfNetworkError` (./failure-kinds.ts), the activities hand a failure back or let
 * Temporal retry it as {@link verdictOf} says, and the workflow bounds a streak with
 * {@link boundReached}. No other file compares an HTTP status or an API failure type
 * (`dev/check-failure-policy.ts` fails `npm run lint` when one does), and docs/failure-policy.md is
 * generated from {@link POLICY} (`dev/failure-policy-doc.ts`, diffed in lint).
 *
 * Pure: no Node modules, no clock, no randomness of its own. Workflow code imports it.
 */
import { FailureKind } from './failure-kinds.js';
import { ApiFailureType } from './types.js';

/** The client call a failure came from. */
export type ApiOperation = 'createJob' | 'getJob' | 'sendMessage';

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
