/**
 * What an API error becomes when it leaves an activity, as the failure policy (src/failure-policy/)
 * says: an `ApplicationFailure` with {@link ApiErrorDetails}, retried by Temporal for short waits
 * (`nextRetryDelay`) or handed back to the workflow (non-retryable, `final: false` and the policy's
 * `bound`). And the gate of sends after one whose outcome is unknown, and which keys answered lately.
 */
import { activityInfo, log } from '@temporalio/activity';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import { AgentApiError, type ApiOperation } from '../agent-api/index.js';
import type { ApiErrorDetails } from '../contract.js';
import { BACKOFFS, retryDelayMs } from '../failure-policy/backoff.js';
import { FailureKind } from '../failure-policy/kinds.js';
import { notSentAgain } from '../failure-policy/messages.js';
import { handedBack, outcomeUnknownType, refusesQuotaUse, verdictOf } from '../failure-policy/table.js';
import type { ErrorVerdict } from '../poll-schedule.js';
import type { ActivityMetrics, ProjectUseMetrics } from './metrics.js';
import { remainingMs } from './attempt.js';

/**
 * When this worker last had an answer other than a refused key from each project: a create whose
 * key is refused waits for a rotation only when the key worked for the project lately (else it is
 * the wrong key, and fails at once). One key source per worker process, so per project is enough.
 */
export class KeyAnswers {
  readonly #at = new Map<string, number>();

  /** The API answered for `projectId` with something other than 401/403. */
  answered(projectId: string): void {
    this.#at.set(projectId, Date.now());
  }

  /** Milliseconds since that answer, or null when none came. */
  agoMs(projectId: string): number | null {
    const at = this.#at.get(projectId);
    return at === undefined ? null : Date.now() - at;
  }
}

/**
 * What to do with a create or follow-up message whose outcome is unknown (timeout or reset after
 * sending, 500/502/504): either may have started an agent job or a turn.
 */
export type AmbiguousCreatePolicy = 'retry' | 'fail';

/** The calls that may start an agent job or a turn, and so may be applied without an answer. */
export type SendingOperation = 'createJob' | 'sendMessage';

/** How a call that failed is turned into the activity's failure (see {@link createToFailure}). */
export type ToFailure = ReturnType<typeof createToFailure>;

/** Builds `toFailure`, the one way an API error leaves an activity. */
export function createToFailure({
  policy,
  keys,
  metrics,
  projectMetrics,
}: {
  policy: AmbiguousCreatePolicy;
  keys: KeyAnswers;
  metrics: Pick<ActivityMetrics, 'apiError'>;
  projectMetrics?: Pick<ProjectUseMetrics, 'rateLimited'>;
}) {
  /**
   * The activity's failure for an API error; any other error as it is. `quotaTaken`: the call took
   * its use of the project quota itself, so a 429 goes back to the workflow. `retry` decides the
   * wait of a transient one (the poll schedule's); by default the call's backoff, as its retry policy.
   */
  return function toFailure(
    err: unknown,
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
  ): unknown {
    if (!(err instanceof AgentApiError)) return err;
    const info = activityInfo();
    const { verdict } = err;
    const refusesUse = refusesQuotaUse(verdict.type);
    const refusedTake = quotaTaken && refusesUse;
    const refusesKey = verdict.bound === 'credentials';
    if (refusesUse) projectMetrics?.rateLimited(projectId, operation);
    // Any answer but a refused key shows the key works for the project (a create may wait on it).
    if (err.status !== null && !refusesKey) keys.answered(projectId);
    metrics.apiError(err.type, operation);
    const details = (final: boolean): ApiErrorDetails => ({
      status: err.status,
      retryAfterMs: err.retryAfterMs,
      attempt: info.attempt,
      final,
      bound: final ? 'final' : verdict.bound,
      ...(operation === 'getJob' ? {} : { mayHaveBeenApplied: err.requestMayHaveTakenEffect }),
      ...(refusedTake && { quotaTaken: true }),
      ...(refusesKey && { keyAnsweredAgoMs: keys.agoMs(projectId) }),
    });
    if (operation !== 'getJob' && err.retryable && err.requestMayHaveTakenEffect && policy === 'fail') {
      return apiFailure(err, {
        type: outcomeUnknownType(operation),
        message: `${err.message.replace(/\.$/, '')}. ${notSentAgain(operation, 'this attempt')}`,
        nonRetryable: true,
        details: [details(true)],
      });
    }
    const final = !err.retryable;
    const next: ErrorVerdict | null = final
      ? null
      : (retry?.(err.retryAfterMs) ?? {
          kind: 'retry',
          delayMs: retryDelayMs({
            backoff: BACKOFFS[operation],
            failures: info.attempt,
            retryAfterMs: err.retryAfterMs,
            random: Math.random,
          }),
        });
    const delayMs = next?.kind === 'retry' ? next.delayMs : null;
    // Handed back to the workflow when final, when the policy says so, when the wait would outlast
    // the deadline, or when the API refused a use this call took from the quota (the quota decides when).
    const handBack =
      refusedTake ||
      delayMs === null ||
      handedBack(verdict, operation, err.requestMayHaveTakenEffect) ||
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
    ...err,
    jobId: null,
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
  const { type, bound, mayHaveBeenApplied } = verdictOf(FailureKind.ShutdownBeforeSend, operation);
  const details: ApiErrorDetails = {
    status: null,
    retryAfterMs: null,
    attempt: activityInfo().attempt,
    final: false,
    bound,
    mayHaveBeenApplied,
  };
  return ApplicationFailure.create({
    type,
    message: `${operation === 'createJob' ? 'create' : 'follow-up message'} not sent: the worker stopped first`,
    details: [details],
    category: ApplicationFailureCategory.BENIGN,
  });
}

/** The gate of {@link createResendGate}: throws when the attempt must not send. */
export type ResendGate = ReturnType<typeof createResendGate>;

/**
 * The one gate every create and message attempt passes before it sends (decision 0009):
 * after an attempt that may have reached the API, `fail` sends nothing, ever (whoever retries: the
 * workflow carries `uncertain`), and `retry` sends again with a warning and a metric, as the API
 * honours no idempotency key: a second agent job or turn may follow.
 */
export function createResendGate(policy: AmbiguousCreatePolicy, metrics: Pick<ActivityMetrics, 'ambiguous'>) {
  return function mayResend(
    operation: SendingOperation,
    input: { projectId: string; uncertain?: string | null },
  ): void {
    const why = input.uncertain ?? null;
    if (why === null) return;
    if (policy === 'fail') {
      throw ApplicationFailure.create({
        type: outcomeUnknownType(operation),
        message: notSentAgain(operation, why),
        nonRetryable: true,
        details: [{ status: null, retryAfterMs: null, attempt: activityInfo().attempt, final: true }],
      });
    }
    metrics.ambiguous(operation);
    log.warn(
      `${operation === 'createJob' ? 'create' : 'follow-up message'} sent again after an attempt whose outcome is unknown; the API honours no Idempotency-Key, so a second ${operation === 'createJob' ? 'agent job' : 'turn'} may follow`,
      { projectId: input.projectId, why },
    );
  };
}
