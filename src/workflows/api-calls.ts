/**
 * Calls to the Agent Job API from workflow code, and what the workflow does when one fails. One
 * place keeps the workflow's promises whatever the API answers:
 *
 * - the deadline: a call never runs past it, and reaching it is always `AgentJobTimedOut` naming the
 *   last API error, never a raw `TimeoutFailure` or the last transient error;
 * - the waits: long ones (a `Retry-After`, an outage's growing backoff) happen on the workflow's own
 *   timers, where the deadline, `pollNow` and continue-as-new still apply;
 * - the bounds: 404s and odd bodies fail the workflow only when they come in a row;
 * - the log: a person reading it sees an outage start and end, not every attempt.
 *
 * Deterministic: time from the workflow clock, jitter from the workflow's seeded `Math.random`.
 */
import { ActivityFailure, ApplicationFailure, isCancellation, log, sleep } from '@temporalio/workflow';
import type { ApiErrorDetails, ApiFailureStreak, LastApiError } from '../contract.js';
import { CONSECUTIVE_ANSWER_BOUNDS, retryDelayMs, type Backoff } from '../retries.js';

/** What one call needs from the workflow, and where it reports what it saw. */
export interface ApiCallContext {
  /** Absolute deadline of the workflow, epoch ms. */
  deadlineMs: number;
  /** The API's failures in a row; updated in place, carried across continue-as-new. */
  streak: ApiFailureStreak;
  /** Called with every failure, and after a success of the call `doing` (which clears its error). */
  reportError(error: LastApiError | null, doing: string): void;
  /** The failure to end with at the deadline (`AgentJobTimedOut`, with the last error in it). */
  timedOut(): ApplicationFailure;
}

/** How one attempt ended: a value, or a transient failure and how long to wait before the next. */
export type AttemptResult<T> = { ok: true; value: T } | { ok: false; retryInMs: number };

/** A streak with no failures, for a new workflow. */
export function noFailures(): ApiFailureStreak {
  return { failures: 0, type: null, sameType: 0 };
}

/**
 * Runs one call: an activity (with Temporal's retries for short waits), given the time left until
 * the deadline as its schedule-to-close timeout. Returns its value, or the wait before trying
 * again; throws the workflow's failure when the error is final, a bound is reached or the deadline
 * has come, and rethrows a cancellation.
 */
export async function attempt<T>(
  ctx: ApiCallContext,
  doing: string,
  backoff: Backoff,
  invoke: (timeoutMs: number) => Promise<T>,
): Promise<AttemptResult<T>> {
  try {
    const value = await invoke(Math.max(1_000, ctx.deadlineMs - Date.now()));
    if (ctx.streak.failures > 0) {
      log.info('the Agent Job API answers again', { doing, failedCalls: ctx.streak.failures });
    }
    Object.assign(ctx.streak, noFailures());
    ctx.reportError(null, doing);
    return { ok: true, value };
  } catch (err) {
    if (isCancellation(err)) throw err;
    const failure = apiFailureOf(err, doing);
    if (failure === null) throw err;
    ctx.reportError(failure.error, doing);
    if (failure.details?.final) throw finalFailure(failure, doing);
    count(ctx.streak, failure);
    const bound = CONSECUTIVE_ANSWER_BOUNDS[failure.error.type as keyof typeof CONSECUTIVE_ANSWER_BOUNDS];
    if (bound !== undefined && ctx.streak.sameType >= bound) {
      throw finalFailure(failure, doing, `gave up after ${ctx.streak.sameType} such answers in a row`);
    }
    const remainingMs = ctx.deadlineMs - Date.now();
    if (remainingMs <= 0) throw ctx.timedOut();
    if (ctx.streak.failures === (failure.details?.attempt ?? 1)) {
      // The first failure of a streak: one line when an outage starts, not one per attempt.
      log.warn('Agent Job API call failed; retrying until it answers or the deadline', {
        doing,
        type: failure.error.type,
        status: failure.error.status,
      });
    }
    const retryInMs = retryDelayMs({
      backoff,
      failures: ctx.streak.failures,
      retryAfterMs: failure.details?.retryAfterMs ?? null,
      random: Math.random,
    });
    return { ok: false, retryInMs: Math.min(retryInMs, remainingMs) };
  }
}

/**
 * Calls until an answer arrives, waiting between attempts on workflow timers: for calls that must
 * succeed before the workflow can go on (create, follow-up message).
 */
export async function untilAnswered<T>(
  ctx: ApiCallContext,
  doing: string,
  backoff: Backoff,
  invoke: (timeoutMs: number) => Promise<T>,
): Promise<T> {
  for (;;) {
    if (Date.now() >= ctx.deadlineMs) throw ctx.timedOut();
    const result = await attempt(ctx, doing, backoff, invoke);
    if (result.ok) return result.value;
    await sleep(result.retryInMs, { summary: `wait ${Math.ceil(result.retryInMs / 1000)}s before ${doing}` });
  }
}

/**
 * One call with the failure handling of runs that started before the workflow owned its waits
 * (see `BOUNDED_API_CALLS_PATCH`): every failure that reaches the workflow is final, a timeout is
 * the deadline. Kept so those runs replay exactly; new runs never take it.
 */
export async function singleCall<T>(
  ctx: ApiCallContext,
  doing: string,
  invoke: (timeoutMs: number) => Promise<T>,
): Promise<T> {
  try {
    const value = await invoke(Math.max(1_000, ctx.deadlineMs - Date.now()));
    ctx.reportError(null, doing);
    return value;
  } catch (err) {
    if (isCancellation(err)) throw err;
    const failure = apiFailureOf(err, doing);
    if (failure === null) throw err;
    ctx.reportError(failure.error, doing);
    if (failure.activityFailure.cause?.name === 'TimeoutFailure') throw ctx.timedOut();
    throw finalFailure(failure, doing);
  }
}

/** An activity's failure as the workflow reads it. */
interface ApiFailure {
  error: LastApiError;
  /** Present when the activity met an API error; absent for a timeout with no error below it. */
  details: ApiErrorDetails | undefined;
  /** The activity's own `ApplicationFailure`, when there is one. */
  application: ApplicationFailure | undefined;
  /** What the workflow caught: the cause of the workflow's own failure. */
  activityFailure: ActivityFailure | ApplicationFailure;
}

/**
 * Reads an activity's failure: the API error it met (the first `ApplicationFailure` down the cause
 * chain, which is also where a schedule-to-close timeout keeps the last attempt's failure), or the
 * timeout itself. Null for anything that is not an activity's failure.
 */
function apiFailureOf(err: unknown, doing: string): ApiFailure | null {
  // A local activity's failure can reach the workflow as the activity's own ApplicationFailure,
  // without the ActivityFailure around it.
  if (!(err instanceof ActivityFailure) && !(err instanceof ApplicationFailure)) return null;
  // The workflow's own failures (the project quota's deadline, say) are not an API error.
  if (err instanceof ApplicationFailure && !isApiErrorDetails(err.details?.[0])) return null;
  let cause: unknown = err instanceof ActivityFailure ? err.cause : err;
  while (cause instanceof Error && !(cause instanceof ApplicationFailure)) cause = cause.cause;
  if (cause instanceof ApplicationFailure) {
    const details = cause.details?.[0] as ApiErrorDetails | undefined;
    const status = typeof details?.status === 'number' ? details.status : null;
    return {
      error: { type: cause.type ?? 'ApplicationFailure', status, message: cause.message, during: doing },
      details: isApiErrorDetails(details) ? details : undefined,
      application: cause,
      activityFailure: err,
    };
  }
  const first = err.cause instanceof Error ? err.cause : err;
  return {
    error: { type: first.name, status: null, message: first.message, during: doing },
    details: undefined,
    application: undefined,
    activityFailure: err,
  };
}

/** Whether a failure detail is the activities' {@link ApiErrorDetails}. */
function isApiErrorDetails(value: unknown): value is ApiErrorDetails {
  return typeof value === 'object' && value !== null && 'final' in value && 'attempt' in value;
}

/**
 * Counts a failure into the streak. A failure at attempt 1 follows the previous one directly; at a
 * later attempt, Temporal already retried other answers in between, so a run of one type restarts.
 */
function count(streak: ApiFailureStreak, failure: ApiFailure): void {
  const attempts = Math.max(1, failure.details?.attempt ?? 1);
  const continues = attempts === 1 && streak.type === failure.error.type;
  streak.sameType = continues ? streak.sameType + 1 : 1;
  streak.type = failure.error.type;
  streak.failures += attempts;
}

/** The workflow's failure for a final API error: same type and details, the activity as its cause. */
function finalFailure(failure: ApiFailure, doing: string, why?: string): ApplicationFailure {
  const application = failure.application;
  return ApplicationFailure.create({
    type: failure.error.type,
    message: `Failed while ${doing}: ${failure.error.message}${why ? ` (${why})` : ''}`,
    nonRetryable: true,
    details: application?.details ? [...application.details] : undefined,
    cause: failure.activityFailure,
  });
}
