/** What the activities read of the attempt they run in. */
import { cancellationDetails, type Info } from '@temporalio/activity';

/**
 * Whether the worker is stopping: the SDK cancels running activities when its shutdown grace ends.
 * Not the workflow's cancellation: a create or message already sent is let finish.
 */
export function workerStopping(): boolean {
  return cancellationDetails()?.workerShutdown === true;
}

/** Time left before this attempt's start-to-close timeout or the schedule-to-close one, whichever is first. */
export function timeLeftMs(info: Info): number {
  const attemptLeft = info.startToCloseTimeoutMs
    ? info.currentAttemptScheduledTimestampMs + info.startToCloseTimeoutMs - Date.now()
    : Number.POSITIVE_INFINITY;
  return Math.min(attemptLeft, remainingMs(info));
}

/**
 * Time left before the workflow's deadline: `deadlineMs` when the input carries it (the poll
 * activity's, which has no schedule-to-close timeout), else the activity's schedule-to-close timeout.
 */
export function remainingMs(info: Info, deadlineMs?: number): number {
  if (deadlineMs !== undefined) return deadlineMs - Date.now();
  if (!info.scheduleToCloseTimeoutMs) return Number.POSITIVE_INFINITY;
  return info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs - Date.now();
}
