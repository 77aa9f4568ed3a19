/**
 * The job-end notification, a child workflow its parent abandons (./notifier.ts,
 * docs/decisions/0020-job-end-notification-as-a-child-workflow.md): it asks the worker for the
 * target's bound, then runs one delivery activity the server retries as the failure policy's
 * delivery column says, until a 2xx, a refusal, or the bound (`AGENT_NOTIFY_RETRY_FOR`). Its history
 * holds the target's name and the notice, never the target's URL or secret.
 *
 * Workflow code: deterministic, no Node modules.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  metricMeter,
  proxyActivities,
  TemporalFailure,
  TimeoutFailure,
} from '@temporalio/workflow';
import { RetryState } from '@temporalio/common';
import type { AgentJobActivities, DeliverJobEndNoticeInput } from '../../activities/index.js';
import { FailureType } from '../../contract.js';
import { quoted } from '../../escape.js';
import { formatBound } from '../../failure-policy/messages.js';

/** Workflow type of the job-end notification, as the parent starts it. */
export const JOB_END_NOTIFICATION_WORKFLOW_TYPE = 'jobEndNotification';

/** The notification's workflow ID: one per agent-job workflow chain, so the receiver gets one notice (decision 0020). */
export function jobEndNotificationId(firstExecutionRunId: string): string {
  return `job-end-notification/${firstExecutionRunId}`;
}

/** What a delivered notice returns: its delivery ID and the receiver's status. */
export interface JobEndNotificationResult {
  deliveryId: string;
  status: number;
}

// The target check is quick and local to the worker: retried on the server like any activity
// whose worker died (an unknown name is final).
const { notifyTarget } = proxyActivities<AgentJobActivities>({ startToCloseTimeout: '30s' });

/** Rethrows a target check's refusal as the workflow's own failure, as a caller matches on its type. */
export function ownFailure(err: unknown): never {
  throw err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : err;
}

/** Delivers `notice` to `target`, or fails with `NoticeUndelivered` (`UnknownNotifyTarget` if the name went away). */
export async function jobEndNotification(input: DeliverJobEndNoticeInput): Promise<JobEndNotificationResult> {
  const { target, notice } = input;
  // A target removed since the job started fails with its own type.
  const { retryForMs } = await notifyTarget(target, 'delivery').catch(ownFailure);
  const { deliverJobEndNotice } = proxyActivities<AgentJobActivities>({
    // One attempt is one POST, bounded at 30 s in the activity; this only catches a lost worker.
    startToCloseTimeout: '60s',
    // The bound: every attempt and every wait between them, measured by the server.
    scheduleToCloseTimeout: retryForMs,
    // The activity sets each wait itself (`nextRetryDelay`); the server caps those at
    // `maximumInterval`, set above the policy's longest wait. These only space lost attempts.
    retry: { initialInterval: '5s', backoffCoefficient: 2, maximumInterval: '1h' },
  });
  try {
    const { status } = await deliverJobEndNotice(input);
    return { deliveryId: notice.deliveryId, status };
  } catch (err) {
    throw undelivered(err, input, retryForMs);
  }
}

/** The notification's own failure: why it ended undelivered, with the last attempt's problem. */
function undelivered(
  err: unknown,
  { target, notice }: DeliverJobEndNoticeInput,
  retryForMs: number,
): unknown {
  if (!(err instanceof ActivityFailure)) return err;
  // The last attempt's failure (a timeout's cause holds it).
  let cause: unknown = err.cause;
  while (cause instanceof TemporalFailure && !(cause instanceof ApplicationFailure)) cause = cause.cause;
  const last = cause instanceof ApplicationFailure ? cause : null;
  // The bound is the server's alone (the activity only says how long to wait), and ends it two
  // ways: the schedule-to-close timer fires during an attempt or between two (a TimeoutFailure),
  // or the server sees the next wait would pass it and ends on the last failure.
  const expired = err.cause instanceof TimeoutFailure || err.retryState === RetryState.TIMEOUT;
  if (!expired) return last ?? err;
  // The activity counts the attempts it refuses or retries; the bound is counted here.
  metricMeter
    .createCounter('agent_job_notifications', 'attempts', 'Job-end notice attempts by target and outcome')
    .add(1, { target, outcome: 'expired' });
  return ApplicationFailure.create({
    type: FailureType.NoticeUndelivered,
    message:
      `Notification target ${quoted(target)} did not take the notice of workflow ${quoted(notice.workflowId)} ` +
      `within ${formatBound(retryForMs)} (AGENT_NOTIFY_RETRY_FOR); it is not sent again. ` +
      (last === null
        ? 'The worker logged each attempt ("job-end notice not delivered").'
        : `Last attempt: ${last.message.replace(/; trying again\.$/, '.')}`),
    nonRetryable: true,
    details: [{ target, deliveryId: notice.deliveryId }],
  });
}
