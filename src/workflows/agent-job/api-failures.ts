/**
 * Calls to the Agent Job API from workflow code, and what the workflow does when one fails: the
 * one place that keeps the deadline, the long waits on workflow timers, the bounds and the log
 * quiet (docs/decisions/0006-long-waits-belong-to-the-workflow.md); the meaning of each failure is
 * ../../failure-policy/.
 *
 * Deterministic: time from the workflow clock, jitter from the workflow's seeded `Math.random`.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  isCancellation,
  log,
  sleep,
  TimeoutFailure,
} from '@temporalio/workflow';
import { TimeoutType } from '@temporalio/common';
import type { ApiErrorDetails, LastApiError } from '../../contract.js';
import { POLL_PAST_DEADLINE } from '../../poll-schedule.js';
import { BACKOFFS } from '../../failure-policy/backoff.js';
import type { FailureStreak, Tolerances } from '../../failure-policy/streak.js';
import { boundOf, type ApiOperation } from '../../failure-policy/table.js';
import { markdownText } from '../../escape.js';

/** The run a call is made for (./run.ts): its deadline and streak, and where a call reports. */
export interface ApiCaller {
  /** Absolute deadline of the workflow, epoch ms. */
  readonly deadlineMs: number;
  readonly streak: FailureStreak;
  /** The tolerances the policy's time bounds use now (`blipMs` null until the API answered for the job). */
  tolerances(): Tolerances;
  /**
   * Called with every failure, and after a success of the call `doing` (error null).
   * `waitingForKey`: the API refused the key and the call waits for a working one.
   */
  reportApiError(error: LastApiError | null, doing: string, waitingForKey: boolean): void;
  /** The failure to end with at the deadline (`AgentJobTimedOut`, with the last error in it). */
  timedOut(what: string): ApplicationFailure;
  /** A create or message was sent again after an attempt that may have been applied. */
  countResent(): void;
}

/** One call, as the failure policy's columns (its backoff among them) and the workflow's messages name it. */
export interface ApiCall {
  operation: ApiOperation;
  /** What the call does, for logs and failure messages (plain text). */
  doing: string;
  /** What could not be done, when the deadline comes during the call. */
  whatTimedOut: string;
}

/**
 * How one attempt ended: a value, or a transient failure, how long to wait before the next, and,
 * when the attempt may have reached the API all the same, why (null when it surely did not).
 */
export type AttemptResult<T> =
  { ok: true; value: T } | { ok: false; retryInMs: number; uncertain: string | null };

/**
 * Runs one call (an activity, with Temporal's retries for short waits). Returns its value, or the
 * wait before trying again; throws the workflow's failure when the error is final, a bound is
 * reached or the deadline has come, and rethrows a cancellation.
 */
export async function attempt<T>(
  run: ApiCaller,
  call: ApiCall,
  invoke: () => Promise<T>,
  options: { afterUnseenAttempts?: boolean } = {},
): Promise<AttemptResult<T>> {
  const { doing } = call;
  try {
    const value = await invoke();
    const failedCalls = run.streak.succeeded();
    if (failedCalls > 0) log.info('the Agent Job API answers again', { doing, failedCalls });
    run.reportApiError(null, doing, false);
    return { ok: true, value };
  } catch (err) {
    if (isCancellation(err)) throw err;
    const failure = apiFailureOf(err, doing);
    if (err instanceof ActivityFailure && isDeadline(err.cause)) {
      // The error named is the last attempt's API error, not the timeout, nor a poll that found
      // the job still active.
      if (failure?.details !== undefined) run.reportApiError(failure.error, doing, false);
      throw run.timedOut(call.whatTimedOut);
    }
    if (failure === null) throw err;
    const bound = boundOf(failure.details, failure.error.type);
    if (bound === 'final') {
      run.reportApiError(failure.error, doing, false);
      throw finalFailure(failure, doing);
    }
    let attemptNumber = failure.details?.attempt ?? 1;
    if (options.afterUnseenAttempts && attemptNumber > 1) {
      // A poll activity's earlier attempts read the job (or met errors the server retried): the
      // API answered in between, so this failure starts a streak of its own.
      run.streak.succeeded();
      attemptNumber = 1;
    }
    const counted = {
      type: failure.error.type,
      bound,
      operation: call.operation,
      keyAnsweredAgoMs: failure.details?.keyAnsweredAgoMs ?? null,
    };
    const verdict = run.streak.failed(counted, attemptNumber, Date.now(), run.tolerances());
    run.reportApiError(failure.error, doing, bound === 'credentials' && verdict.boundReached === null);
    if (verdict.boundReached !== null) {
      throw finalFailure(failure, doing, `gave up after ${verdict.boundReached}`);
    }
    const remainingMs = run.deadlineMs - Date.now();
    if (remainingMs <= 0) throw run.timedOut(call.whatTimedOut);
    if (verdict.startsStreak) {
      log.warn('Agent Job API call failed; retrying until it answers or the deadline', {
        doing,
        type: failure.error.type,
        status: failure.error.status,
      });
    }
    const retryAfterMs = failure.details?.retryAfterMs ?? null;
    return {
      ok: false,
      retryInMs: run.streak.retryInMs(BACKOFFS[call.operation], retryAfterMs, Math.random, remainingMs),
      uncertain: uncertaintyOf(failure),
    };
  }
}

/**
 * Why an attempt that failed may have reached the API, or null when it surely did not: only the
 * activities' own API errors can say "not applied"; a timeout or any other failure may have sent it.
 */
function uncertaintyOf(failure: ApiFailure): string | null {
  if (failure.details?.mayHaveBeenApplied === false) return null;
  const timeout = failure.details === undefined ? failure.caught.cause : undefined;
  if (!(timeout instanceof TimeoutFailure)) return `an attempt that failed with ${failure.error.type}`;
  return timeout.timeoutType === TimeoutType.HEARTBEAT
    ? 'an attempt whose worker stopped heartbeating (it may have died mid-request)'
    : 'an attempt that timed out before an answer';
}

/** Calls until an answer arrives, waiting between attempts on workflow timers (a create, a message). */
export async function untilAnswered<T>(
  run: ApiCaller,
  call: ApiCall,
  invoke: (uncertain: string | null) => Promise<T>,
  uncertainFromStart: string | null = null,
): Promise<T> {
  // Once an attempt may have been applied, every later one follows it, and the activity's
  // ambiguous-call policy decides whether it sends (decision 0009). `resent` counts only this loop's
  // own: `uncertainFromStart` also reaches attempts the history already holds, which send nothing.
  let uncertain: string | null = null;
  for (;;) {
    if (Date.now() >= run.deadlineMs) throw run.timedOut(call.whatTimedOut);
    const sentAfter: string | null = uncertain;
    const result: AttemptResult<T> = await attempt(run, call, () => invoke(sentAfter ?? uncertainFromStart));
    if (sentAfter !== null) {
      log.warn('sent again after an attempt whose outcome is unknown', {
        doing: call.doing,
        after: sentAfter,
      });
      run.countResent();
    }
    if (result.ok) return result.value;
    uncertain ??= result.uncertain;
    // The summary is rendered as markdown in the UI, and `doing` may name a job ID the API sent.
    const summary = `wait ${Math.ceil(result.retryInMs / 1000)}s before ${markdownText(call.doing)}`;
    await sleep(result.retryInMs, { summary });
  }
}

/** The deadline, as a call meets it: a schedule-to-close timeout, or a poll attempt that started after it (decision 0010). */
function isDeadline(cause: unknown): boolean {
  if (cause instanceof ApplicationFailure) return cause.type === POLL_PAST_DEADLINE;
  return cause instanceof TimeoutFailure && cause.timeoutType === TimeoutType.SCHEDULE_TO_CLOSE;
}

/** An activity's failure as the workflow reads it. */
interface ApiFailure {
  error: LastApiError;
  /** Present when the activity met an API error; absent for a timeout with no error below it. */
  details: ApiErrorDetails | undefined;
  /** The activity's own `ApplicationFailure`, when there is one. */
  application: ApplicationFailure | undefined;
  /** What the workflow caught: the cause of the workflow's own failure. */
  caught: ActivityFailure | ApplicationFailure;
}

/**
 * Reads an activity's failure: the first `ApplicationFailure` down the cause chain (where a
 * schedule-to-close timeout keeps the last attempt's), or the timeout itself; null for any other error.
 */
function apiFailureOf(err: unknown, doing: string): ApiFailure | null {
  // A local activity's failure can reach the workflow as the activity's own ApplicationFailure,
  // without the ActivityFailure around it.
  if (!(err instanceof ActivityFailure) && !(err instanceof ApplicationFailure)) return null;
  // The workflow's own failures (the project quota's deadline, say) are not an API error.
  if (err instanceof ApplicationFailure && !isApiErrorDetails(err.details?.[0])) return null;
  let cause: unknown = err instanceof ActivityFailure ? err.cause : err;
  while (cause instanceof Error && !(cause instanceof ApplicationFailure)) cause = cause.cause;
  const application = cause instanceof ApplicationFailure ? cause : undefined;
  const details = application?.details?.[0] as ApiErrorDetails | undefined;
  const first = application ?? (err.cause instanceof Error ? err.cause : err);
  const type = application ? (application.type ?? 'ApplicationFailure') : first.name;
  const status = typeof details?.status === 'number' ? details.status : null;
  return {
    error: { type, status, message: first.message, during: doing },
    details: isApiErrorDetails(details) ? details : undefined,
    application,
    caught: err,
  };
}

/** Whether a failure detail is the activities' {@link ApiErrorDetails}. */
function isApiErrorDetails(value: unknown): value is ApiErrorDetails {
  return typeof value === 'object' && value !== null && 'final' in value && 'attempt' in value;
}

/** The workflow's failure for a final API error: same type and details, the activity as its cause. */
function finalFailure(failure: ApiFailure, doing: string, why?: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: failure.error.type,
    message: `Failed while ${doing}: ${failure.error.message}${why ? ` (${why})` : ''}`,
    nonRetryable: true,
    details: failure.application?.details ? [...failure.application.details] : undefined,
    cause: failure.caught,
  });
}
