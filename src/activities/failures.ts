/**
 * What an API error becomes when it leaves an activity: an `ApplicationFailure` whose `type` is a
 * {@link FailureType} name and whose details are an {@link ApiErrorDetails}, as the failure policy
 * (src/agent-api/failure-policy.ts) says: short waits are left to Temporal's retries
 * (`nextRetryDelay`); everything the workflow must count or wait for itself is handed back to it
 * (non-retryable for Temporal, `final: false` and the policy's `bound` in the details).
 */
import { activityInfo } from '@temporalio/activity';
import { ApplicationFailure, ApplicationFailureCategory, type RetryPolicy } from '@temporalio/common';
import { AgentApiError, type ApiOperation } from '../agent-api/index.js';
import { FailureType, type ApiErrorDetails } from '../contract.js';
import { durationMs } from '../duration.js';
import {
  GET_BACKOFF,
  handedBack,
  isFinal,
  outcomeUnknownType,
  retryDelayMs,
  type Backoff,
} from '../agent-api/failure-policy.js';
import type { ErrorVerdict } from '../poll-schedule.js';
import type { ActivityMetrics, ProjectUseMetrics } from './metrics.js';
import { outcomeUnknownMessage, type AmbiguousCreatePolicy, type SendingOperation } from './ambiguous.js';
import { remainingMs } from './attempt.js';
import type { KeyAnswers } from './key-answers.js';

/** What {@link createToFailure} needs. */
export interface ToFailureDeps {
  policy: AmbiguousCreatePolicy;
  keys: KeyAnswers;
  metrics: Pick<ActivityMetrics, 'apiError'>;
  projectMetrics?: Pick<ProjectUseMetrics, 'rateLimited'>;
}

/** How a call that failed is turned into the activity's failure (see {@link createToFailure}). */
export type ToFailure = ReturnType<typeof createToFailure>;

/** Builds `toFailure`, the one way an API error leaves an activity. */
export function createToFailure({ policy, keys, metrics, projectMetrics }: ToFailureDeps) {
  /**
   * The activity's failure for an API error. `quotaTaken`: the call took its use of the project
   * quota itself, so a 429 goes back to the workflow. `retry` decides the wait of a transient one
   * (the poll schedule's, for the poll activity); by default the retry policy's backoff raised to
   * `Retry-After`.
   */
  return function toFailure(
    err: AgentApiError,
    operation: ApiOperation,
    projectId: string,
    {
      quotaTaken = false,
      retry,
      deadlineMs,
    }: {
      quotaTaken?: boolean;
      retry?: (retryAfterMs: number | null) => ErrorVerdict;
      /** The deadline when the input carries it (the poll activity's); else the schedule-to-close timeout's. */
      deadlineMs?: number;
    } = {},
  ): ApplicationFailure {
    const info = activityInfo();
    const { verdict } = err;
    const refusedTake = quotaTaken && verdict.refusesQuotaUse;
    if (verdict.refusesQuotaUse) projectMetrics?.rateLimited(projectId, operation);
    // Any answer but a refused key shows the key works for the project (a create may wait on it).
    if (err.status !== null && !verdict.refusesKey) keys.answered(projectId);
    metrics.apiError(err.type, operation);
    const details = (final: boolean): ApiErrorDetails => ({
      status: err.status,
      retryAfterMs: err.retryAfterMs,
      attempt: info.attempt,
      final,
      bound: final ? 'final' : verdict.bound,
      ...(operation === 'getJob' ? {} : { mayHaveBeenApplied: err.requestMayHaveTakenEffect }),
      ...(refusedTake && { quotaTaken: true }),
      ...(verdict.refusesKey && { keyAnsweredAgoMs: keys.agoMs(projectId) }),
    });
    if (operation !== 'getJob' && err.retryable && err.requestMayHaveTakenEffect && policy === 'fail') {
      return apiFailure(err, {
        type: outcomeUnknownType(operation),
        message: `${err.message.replace(/\.$/, '')}. ${outcomeUnknownMessage(operation, 'this attempt')} The ambiguous-call policy is "fail" (AGENT_API_AMBIGUOUS_CREATE), so it is not sent again.`,
        nonRetryable: true,
        details: [details(true)],
      });
    }
    const final = isFinal(verdict);
    const next: ErrorVerdict | null = final
      ? null
      : (retry?.(err.retryAfterMs) ?? {
          kind: 'retry',
          delayMs: retryDelayMs({
            backoff: backoffOf(info.retryPolicy),
            failures: info.attempt,
            retryAfterMs: err.retryAfterMs,
            random: Math.random,
          }),
        });
    const delayMs = next?.kind === 'retry' ? next.delayMs : null;
    // Hand the failure back to the workflow instead of letting Temporal retry it: when it is final,
    // when a create or message may have been applied (only the workflow may send it again, and it
    // tells the next attempt so), when the workflow counts answers of its type in a row, when the
    // wait would outlast the deadline, or when the API refused a use this call took from the project
    // quota (the quota decides when).
    const handBack =
      refusedTake ||
      delayMs === null ||
      (operation !== 'getJob' && err.requestMayHaveTakenEffect) ||
      handedBack(verdict, operation) ||
      delayMs >= remainingMs(info, deadlineMs);
    return apiFailure(err, {
      type: err.type,
      message: err.message,
      nonRetryable: handBack,
      nextRetryDelay: handBack ? undefined : (delayMs ?? undefined),
      details: [details(final)],
      // A transient error is expected and retried: the SDK logs it at DEBUG, not as a failure.
      category: final ? undefined : ApplicationFailureCategory.BENIGN,
    });
  };
}

/**
 * An `ApplicationFailure` for an API error, with short stacks and the API error as its cause
 * without the network error below it: a failure goes into history (a local activity's marker, an
 * activity's failed event), and its message already says everything the chain would.
 */
export function apiFailure(
  err: AgentApiError,
  init: Omit<NonNullable<Parameters<typeof ApplicationFailure.create>[0]>, 'cause'>,
): ApplicationFailure {
  const cause = new AgentApiError({
    kind: err.kind,
    operation: err.operation,
    status: err.status,
    retryAfterMs: err.retryAfterMs,
    applied: err.requestMayHaveTakenEffect,
    message: err.message,
  });
  cause.stack = `${cause.name}: ${cause.message}`;
  const failure = ApplicationFailure.create({ ...init, cause });
  failure.stack = `${failure.name}: ${failure.message}`;
  return failure;
}

/**
 * The failure of a create or message whose worker stopped before it sent anything (while it took
 * its quota use): surely not applied, so the workflow sends it again as a plain retry.
 */
export function stoppedBeforeSending(operation: SendingOperation): ApplicationFailure {
  const details: ApiErrorDetails = {
    status: null,
    retryAfterMs: null,
    attempt: activityInfo().attempt,
    final: false,
    bound: 'deadline',
    mayHaveBeenApplied: false,
  };
  return ApplicationFailure.create({
    type: FailureType.WorkerShutdown,
    message: `${operation === 'createJob' ? 'create' : 'follow-up message'} not sent: the worker stopped first`,
    details: [details],
    category: ApplicationFailureCategory.BENIGN,
  });
}

/** The backoff of the activity's retry policy, or the get backoff when it has none. */
function backoffOf(policy: RetryPolicy | undefined): Backoff {
  if (policy === undefined) return GET_BACKOFF;
  const initialIntervalMs = intervalMs(policy, 'initialInterval') ?? GET_BACKOFF.initialIntervalMs;
  const backoffCoefficient = policy.backoffCoefficient ?? 2;
  return {
    initialIntervalMs,
    backoffCoefficient,
    maximumIntervalMs: intervalMs(policy, 'maximumInterval') ?? initialIntervalMs * 100,
  };
}

/** A retry policy's interval in milliseconds (the SDK checked it when the activity was scheduled). */
function intervalMs(policy: RetryPolicy, key: 'initialInterval' | 'maximumInterval'): number | undefined {
  const value: unknown = policy[key];
  return typeof value === 'string' || typeof value === 'number' ? durationMs(value) : undefined;
}
