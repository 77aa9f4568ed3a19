/**
 * When to poll the agent job, in one place for both sides of a poll:
 *
 * - the workflow's schedule ({@link PollSchedule}): the interval grows by the coefficient after each
 *   read up to the maximum, restarts after a follow-up message, is jittered, never runs past the
 *   deadline; the workflow waits it on a timer only where it decides the wait itself (the first
 *   wait, a failure it handles);
 * - polling by server-side retry (Temporal's polling guide, "activity retries"): one poll activity
 *   covers a whole wait. Each attempt makes one GET; while the job is `active` the attempt fails
 *   with a benign, retryable failure whose `nextRetryDelay` follows the same schedule, so the
 *   Temporal server waits between polls and writes no history for them. What the workflow must see
 *   or decide returns to it: a record that is not `active`, and failures it counts or waits for on
 *   its own timers.
 *
 * Pure: callers pass the time, the attempt and the random source (the workflow's seeded
 * `Math.random`, or the activity's).
 */
import { retryDelayMs, RETRY_JITTER, type Backoff } from './failure-policy/backoff.js';

/** Poll settings with every default applied, in milliseconds. */
export interface ResolvedPollSettings {
  initialIntervalMs: number;
  maxIntervalMs: number;
  backoffCoefficient: number;
}

/** Defaults of the input's `poll` settings (`PollSettings` in src/contract.ts). */
export const DEFAULT_POLL: ResolvedPollSettings = {
  initialIntervalMs: 5_000,
  maxIntervalMs: 60_000,
  backoffCoefficient: 1.5,
};

/**
 * Jitter of each wait between polls, as a fraction (±5%), so thousands of workflows do not poll
 * in lockstep: jobs started in the same second part at their first wait, and drift further apart
 * at every poll.
 *
 * Why not more: the slowest detections are the jobs that ended just after a poll and waited for the
 * longest wait there is, the interval plus the jitter, so every percent of jitter adds to the p99
 * detection latency, and more so on a loaded server (decision 0010 has the figures).
 */
export const POLL_JITTER = 0.05;

/**
 * The factor a wait between polls is multiplied by: uniform in [1 − POLL_JITTER, 1 + POLL_JITTER).
 * `random` is the caller's: the workflow's seeded `Math.random` in workflow code.
 */
export function pollJitterFactor(random: () => number): number {
  return 1 + (random() * 2 - 1) * POLL_JITTER;
}

/** The schedule of one workflow; `intervalMs` is carried across continue-as-new. */
export class PollSchedule {
  constructor(
    private readonly settings: Pick<
      ResolvedPollSettings,
      'initialIntervalMs' | 'maxIntervalMs' | 'backoffCoefficient'
    >,
    /** The wait before the next poll, before jitter. */
    public intervalMs: number = settings.initialIntervalMs,
  ) {}

  /**
   * The wait before the next poll in whole milliseconds: `retryInMs` after a failed read, else the
   * interval jittered; at least 1 ms and never past `deadlineMs`.
   */
  waitMs(now: number, deadlineMs: number, random: () => number, retryInMs: number | null = null): number {
    const wanted = retryInMs ?? this.intervalMs * pollJitterFactor(random);
    return Math.max(1, Math.min(Math.round(wanted), deadlineMs - now));
  }

  /** After a read of the job: the next wait is longer, up to the maximum. */
  grow(): void {
    this.intervalMs = Math.min(
      this.intervalMs * this.settings.backoffCoefficient,
      this.settings.maxIntervalMs,
    );
  }

  /** After a follow-up message: a new turn is watched as closely as a new job. */
  restart(): void {
    this.intervalMs = this.settings.initialIntervalMs;
  }
}

/**
 * Start-to-close timeout of one poll attempt: its GET is bounded at 20 s in the activity, and an
 * attempt lost with its worker is retried this long after it started (then after 1 s).
 */
export const POLL_ATTEMPT_TIMEOUT_MS = 30_000;

/**
 * The poll activity's longest retry delay. The server caps every retry delay, `nextRetryDelay`
 * included, at the retry policy's maximum interval: this is the schedule's longest wait with room
 * for the larger of its two jitters (a poll's, a failure's).
 */
export function pollRetryCapMs(maxIntervalMs: number): number {
  return Math.ceil(maxIntervalMs * (1 + Math.max(POLL_JITTER, RETRY_JITTER)));
}

/** Failure type of an attempt that found the agent job still active: the server polls again. */
export const STILL_ACTIVE = 'AgentJobStillActive';

/**
 * Failure type of a poll attempt that started at or after the workflow's deadline (an attempt lost
 * with its worker, retried after its timeout): final, and the workflow reads it as its deadline.
 * The poll activity has no schedule-to-close timeout: the deadline travels in its input and its
 * attempts keep to it, because the server sets that timeout's timer again at every attempt: at
 * N = 2,000 it spent 7.4 to 7.6 ms of CPU per poll with it, 5.9 to 6.7 without (bench:profile).
 */
export const POLL_PAST_DEADLINE = 'AgentJobPollPastDeadline';

/** The schedule one poll activity follows, from its first attempt. */
export interface PollScheduleInput {
  /** The wait after the first attempt, before jitter. */
  intervalMs: number;
  maxIntervalMs: ResolvedPollSettings['maxIntervalMs'];
  backoffCoefficient: ResolvedPollSettings['backoffCoefficient'];
}

/** The wait after attempt `attempt` (1-based), before jitter: the interval grown once per attempt before it. */
export function intervalAfterAttempt(schedule: PollScheduleInput, attempt: number): number {
  const grown = schedule.intervalMs * schedule.backoffCoefficient ** Math.max(0, attempt - 1);
  return Math.min(Number.isFinite(grown) ? grown : schedule.maxIntervalMs, schedule.maxIntervalMs);
}

/** What one attempt that read a record does. */
export type RecordVerdict =
  /** Poll again after this many ms: the server retries. */
  | { kind: 'poll-again'; delayMs: number }
  /** Back to the workflow with the record (it ended, is in an odd status, or the deadline comes first). */
  | { kind: 'return' };

/**
 * An attempt read a record: an `active` one is polled again after the schedule's jittered wait,
 * unless that wait reaches the deadline (`remainingMs`), where the workflow takes over.
 */
export function afterRecord(
  status: string,
  schedule: PollScheduleInput,
  attempt: number,
  remainingMs: number,
  random: () => number,
): RecordVerdict {
  if (status !== 'active') return { kind: 'return' };
  const delayMs = Math.max(1, Math.round(intervalAfterAttempt(schedule, attempt) * pollJitterFactor(random)));
  return delayMs >= remainingMs ? { kind: 'return' } : { kind: 'poll-again', delayMs };
}

/** What one attempt that met a transient API error does. */
export type ErrorVerdict =
  | { kind: 'retry'; delayMs: number }
  /** Back to the workflow: the wait is one it should own. */
  | { kind: 'hand-back' };

/**
 * An attempt met a transient API error: the server retries it at the poll schedule's pace, raised
 * to the server's `Retry-After`, but a `Retry-After` longer than the longest wait between polls goes
 * back to the workflow, which waits it on its own timer (where the status query shows it). The
 * activities hand back by their common rules too: answers the workflow counts in a row (404, a body
 * that is not a record) and waits that reach the deadline.
 */
export function afterTransientError(
  retryAfterMs: number | null,
  schedule: PollScheduleInput,
  attempt: number,
  random: () => number,
): ErrorVerdict {
  if (retryAfterMs !== null && retryAfterMs > schedule.maxIntervalMs) return { kind: 'hand-back' };
  const backoff: Backoff = {
    initialIntervalMs: schedule.intervalMs,
    backoffCoefficient: schedule.backoffCoefficient,
    maximumIntervalMs: schedule.maxIntervalMs,
  };
  return { kind: 'retry', delayMs: retryDelayMs({ backoff, failures: attempt, retryAfterMs, random }) };
}

/**
 * Where a schedule that started at `intervalMs` stands after `elapsedMs` of polling (jitter left
 * out): the polls made and the interval reached. The workflow uses it for a poll activity it
 * cancelled (`pollNow`, a follow-up), whose attempts it never sees, so the next one goes on from
 * there rather than from the start.
 */
export function scheduleAfter(
  schedule: PollScheduleInput,
  elapsedMs: number,
): { polls: number; intervalMs: number } {
  let polls = 0;
  let at = 0;
  // The first attempt runs at once; each later one after the interval the one before set.
  while (at <= elapsedMs && polls < 100_000) {
    polls++;
    const interval = intervalAfterAttempt(schedule, polls);
    if (interval >= schedule.maxIntervalMs) {
      // The rest at the maximum: count them without a loop per poll.
      polls += Math.floor(Math.max(0, elapsedMs - at) / schedule.maxIntervalMs);
      return { polls, intervalMs: schedule.maxIntervalMs };
    }
    at += interval;
  }
  return { polls, intervalMs: intervalAfterAttempt(schedule, polls + 1) };
}
