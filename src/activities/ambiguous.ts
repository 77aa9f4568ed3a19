/**
 * Creates and follow-up messages whose outcome is unknown: the policy for them
 * (AGENT_API_AMBIGUOUS_CREATE), the gate every attempt passes before it sends, and what a person is
 * told when one may have been applied.
 */
import { activityInfo, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { outcomeUnknownType } from '../agent-api/failure-policy.js';
import type { ActivityMetrics } from './metrics.js';

/**
 * What to do with a create or follow-up message whose outcome is unknown (timeout or reset after
 * sending, 500/502/504): either may have started an agent job or a turn.
 */
export type AmbiguousCreatePolicy = 'retry' | 'fail';

/** The calls that may start an agent job or a turn, and so may be applied without an answer. */
export type SendingOperation = 'createJob' | 'sendMessage';

/** The gate of {@link createResendGate}: throws when the attempt must not send. */
export type ResendGate = ReturnType<typeof createResendGate>;

/**
 * The one gate every create and message attempt passes before it sends: after an attempt that
 * may have reached the API, `fail` sends nothing, ever (whoever retries: this worker, another, a
 * new run of the workflow, since the workflow carries `uncertain`), and `retry` sends again with
 * a warning and a metric, as the API honours no idempotency key: a second agent job or turn may
 * follow. Temporal itself retries these activities only after attempts that surely did not reach
 * the API; after any other, the workflow does, and it passes what it knows.
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
        message: `${outcomeUnknownMessage(operation, why)} The ambiguous-call policy is "fail" (AGENT_API_AMBIGUOUS_CREATE), so it is not sent again.`,
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

/** What a person should know about a create or message that may have been applied. */
export function outcomeUnknownMessage(operation: SendingOperation, why: string): string {
  return operation === 'createJob'
    ? `The agent job may or may not have been created (${why} may have reached the API): look for the job in the project before starting again, and follow it with { projectId, jobId } if it exists.`
    : `The follow-up message may or may not have started a turn (${why} may have reached the API): look at the job before sending it again.`;
}
