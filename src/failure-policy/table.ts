/**
 * The failure policy's table (why one: docs/decisions/0012-one-failure-policy.md): for each kind
 * of failure (./kinds.ts), a column per call that can meet it, the API's create, poll and message
 * and a job-end notice's delivery. For an API call: the failure type, whether it is final, whether
 * it may have been applied, how a streak of it ends (./streak.ts); for a delivery, whether it is
 * tried again. Waits: ./backoff.ts; words: ./messages.ts. No other file compares an HTTP status or
 * an API failure type (`dev/check-failure-policy.ts` fails lint on one), and docs/failure-policy.md
 * is generated from {@link POLICY} (`dev/failure-policy-page.ts`).
 *
 * Pure: workflow code imports it.
 */
import { FailureKind } from './kinds.js';
import { ApiFailureType } from './types.js';

/** The client call a failure came from: the table's first three columns. */
export type ApiOperation = 'createJob' | 'getJob' | 'sendMessage';

/**
 * How a streak of a failure ends, if it does before the deadline:
 * - `deadline`: retried until the workflow's deadline;
 * - `final`: at once (no retry can help);
 * - `in-a-row`: after `ANSWERS_IN_A_ROW` such answers in a row (an answer that will not change);
 * - `blip`: for the input's `blipTolerance` once the API has answered for the job (a failover's
 *   404s, a maintenance page), else after `ANSWERS_IN_A_ROW` in a row (a wrong job ID);
 * - `credentials`: for the input's `credentialTolerance` (a key being rotated): polls and messages
 *   always; a create only when this worker had an answer other than 401/403 from the project
 *   within that time, else at once (a wrong key creates nothing and fails fast). The API refused
 *   the key: its source is read again before the next attempt.
 */
export type StreakBound = 'deadline' | 'final' | 'in-a-row' | 'blip' | 'credentials';

/** What one kind of failure of one API call does. */
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
  /**
   * Never retried by Temporal, whatever the bound: the create's and message's retry policies
   * exclude its type (the SDK's own `WorkerShutdown` shares it), so the workflow decides.
   */
  workflowRetries: boolean;
}

/**
 * What one kind of failed delivery of a job-end notice does: tried again (`deadline`) until the
 * delivery's bound (`AGENT_NOTIFY_RETRY_FOR`, its schedule-to-close timeout), or it ends at once (`final`).
 */
type DeliveryVerdict = Pick<Verdict, 'readsRetryAfter'> & { bound: 'deadline' | 'final' };

/** One row of the table: a verdict per API call, and the delivery's. */
type Row = Readonly<Record<ApiOperation, Verdict>> & { readonly delivery: DeliveryVerdict };

type Init = Partial<Verdict> & Pick<Verdict, 'type' | 'bound'>;

const verdict = (init: Init): Verdict => ({
  mayHaveBeenApplied: false,
  readsRetryAfter: false,
  appliedWithoutRecord: false,
  workflowRetries: false,
  ...init,
});

const STOPS: DeliveryVerdict = { bound: 'final', readsRetryAfter: false };

/**
 * The same verdict for every API call. A delivery is tried again only where the calls are retried
 * until their deadline: what a receiver refuses it will refuse again, and only a person can fix it.
 */
const all = (init: Init): Row => {
  const same = verdict(init);
  const delivery: DeliveryVerdict =
    same.bound === 'deadline' ? { bound: 'deadline', readsRetryAfter: same.readsRetryAfter } : STOPS;
  return { createJob: same, getJob: same, sendMessage: same, delivery };
};

/**
 * A 2xx without a record: a create or message took effect (never resent); a poll reads again. A
 * delivery never reads the receiver's body, so it never meets one.
 */
const unreadable = (pollBound: StreakBound): Row => {
  const applied = verdict({
    type: ApiFailureType.UnreadableAnswer,
    bound: 'final',
    mayHaveBeenApplied: true,
    appliedWithoutRecord: true,
  });
  return {
    createJob: applied,
    getJob: verdict({ type: ApiFailureType.UnexpectedResponse, bound: pollBound }),
    sendMessage: applied,
    delivery: STOPS,
  };
};

const keyRefused = all({ type: ApiFailureType.Unauthorized, bound: 'credentials' });
const jobNotFound = verdict({ type: ApiFailureType.JobNotFound, bound: 'blip' });
// A POST answered 303 was processed: as ambiguous as a lost answer, never a plain retry.
const postProcessed = verdict({
  type: ApiFailureType.UnexpectedResponse,
  bound: 'deadline',
  mayHaveBeenApplied: true,
});

/** The table. `KIND_TEXT` (./kinds.ts) says what each row is; docs/failure-policy.md prints it. */
export const POLICY: Readonly<Record<FailureKind, Row>> = {
  [FailureKind.Malformed]: all({ type: ApiFailureType.InvalidRequest, bound: 'final' }),
  [FailureKind.NotSendable]: all({ type: ApiFailureType.InvalidRequest, bound: 'final' }),
  [FailureKind.KeyRefused]: keyRefused,
  [FailureKind.Forbidden]: keyRefused,
  [FailureKind.NotFound]: {
    // A create names only the project, so its 404 is about the project; get and message name a job.
    createJob: verdict({ type: ApiFailureType.ProjectNotFound, bound: 'final' }),
    getJob: jobNotFound,
    sendMessage: jobNotFound,
    delivery: STOPS,
  },
  [FailureKind.NotProcessed]: all({ type: ApiFailureType.ServiceUnavailable, bound: 'deadline' }),
  [FailureKind.RateLimited]: all({
    type: ApiFailureType.RateLimited,
    bound: 'deadline',
    readsRetryAfter: true,
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
    createJob: postProcessed,
    getJob: verdict({ type: ApiFailureType.Redirected, bound: 'final' }),
    sendMessage: postProcessed,
    // A webhook that moved is a configuration to fix: following it would send the signed notice
    // to a host no one configured.
    delivery: STOPS,
  },
  [FailureKind.OddStatus]: all({
    type: ApiFailureType.UnexpectedResponse,
    bound: 'in-a-row',
    mayHaveBeenApplied: true,
  }),
  [FailureKind.NotConnected]: all({ type: ApiFailureType.NetworkError, bound: 'deadline' }),
  [FailureKind.TlsRejected]: {
    // Nothing was sent. A create fails at once with the cause, so a person fixes the URL or the
    // CA; a job already made is watched through a certificate being renewed, as through a blip,
    // and a notice is tried again through one (the delivery's bound ends a broken one).
    createJob: verdict({ type: ApiFailureType.TlsHandshakeFailed, bound: 'final' }),
    getJob: verdict({ type: ApiFailureType.TlsHandshakeFailed, bound: 'blip' }),
    sendMessage: verdict({ type: ApiFailureType.TlsHandshakeFailed, bound: 'blip' }),
    delivery: { bound: 'deadline', readsRetryAfter: false },
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

/** What a failure of `kind` during `operation` does. */
export function verdictOf(kind: FailureKind, operation: ApiOperation): Verdict {
  return POLICY[kind][operation];
}

/**
 * Whether a retryable failure goes back to the workflow instead of being retried by Temporal: when
 * the workflow counts or times its streak (the status query shows the wait), and when a create or
 * message may have been applied (only the workflow sends it again: decision 0009).
 * `applied`: may have been applied whatever the kind says (a 2xx whose body broke off).
 */
export function handedBack(
  verdict: Verdict,
  operation: ApiOperation,
  applied = verdict.mayHaveBeenApplied,
): boolean {
  if (verdict.bound !== 'deadline' || verdict.workflowRetries) return true;
  return operation !== 'getJob' && applied;
}

/**
 * How the workflow bounds a streak of a failure of `type` that an activity handed back: as its
 * `details` say, or for a failure from an earlier build (no `bound` in its details) as that build
 * did: 404s and odd bodies were a blip, the rest retried until the deadline. A failure with no API
 * error below it (no details: a timeout, a stopping worker) is retried until the deadline.
 */
export function boundOf(
  details: { final: boolean; bound?: StreakBound } | undefined,
  type: string,
): StreakBound {
  if (details === undefined) return 'deadline';
  if (details.final) return 'final';
  const legacy = type === ApiFailureType.JobNotFound || type === ApiFailureType.UnexpectedResponse;
  return details.bound ?? (legacy ? 'blip' : 'deadline');
}

/** Whether a failure of this type refused a project-quota use (429): the quota must hear of it. */
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
