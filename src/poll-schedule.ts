/**
 * When to poll the agent job: the workflow's own waits ({@link PollSchedule}) and the poll activity's
 * retries, on one schedule (docs/decisions/0010-poll-by-server-side-retry.md). Pure: callers pass the
 * time, the attempt and the random source (the workflow's seeded `Math.random`, or the activity's).
 */
import { retryDelayMs, RETRY_JITTER, type Backoff } from './failure-policy/backoff.js';

/** Defaults of the input's `poll` settings (`PollSettings` in src/contract.ts). */
export const DEFAULT_POLL = {
  initialIntervalMs: 5_000,
  maxIntervalMs: 60_000,
  backoffCoefficient: 1.5,
};

/** Poll settings with every default applied, in milliseconds. */
export type ResolvedPollSettings = typeof DEFAULT_POLL;

/**
 * Jitter of each wait between polls, as a fraction (±5%), so workflows started together drift apart
 * instead of polling in lockstep. Not more: every percent adds to the p99 detection latency
 * (decision 0010).
 */
export const POLL_JITTER = 0.05;

/** The factor a wait between polls is multiplied by: uniform in [1 − POLL_JITTER, 1 + POLL_JITTER). */
export function pollJitterFactor(random: () => number): number {
  return 1 + (random() * 2 - 1) * POLL_JITTER;
}

/** The schedule of one workflow; `intervalMs` is carried across continue-as-new. */
export class PollSchedule {
  constructor(
    private readonly settings: ResolvedPollSettings,
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
    const { backoffCoefficient, maxIntervalMs } = this.settings;
    this.intervalMs = Math.min(this.intervalMs * backoffCoefficient, maxIntervalMs);
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
 * The poll activity's retry policy's maximum interval, where the server caps every retry delay
 * (`nextRetryDelay` included): the schedule's longest wait with room for the larger jitter.
 */
export function pollRetryCapMs(maxIntervalMs: number): number {
  return Math.ceil(maxIntervalMs * (1 + Math.max(POLL_JITTER, RETRY_JITTER)));
}

/** Failure type of an attempt that found the agent job still active: the server polls again. */
export const STILL_ACTIVE = 'AgentJobStillActive';

/**
 * Failure type of a poll attempt that started at or after the workflow's deadline (one lost with its
 * worker, retried after its timeout): final, read by the workflow as its deadline. The deadline
 * travels in the activity's input instead of a schedule-to-close timeout, whose timer the server
 * sets again at every attempt, at a CPU cost per poll (decision 0010).
 */
export const POLL_PAST_DEADLINE = 'AgentJobPollPastDeadline';

/** A poll activity's schedule; `intervalMs` is the wait after its first attempt, before jitter. */
export type PollScheduleInput = Omit<ResolvedPollSettings, 'initialIntervalMs'> & { intervalMs: number };

/** The wait after attempt `attempt` (1-based), before jitter: the interval grown once per earlier attempt. */
export function intervalAfterAttempt(schedule: PollScheduleInput, attempt: number): number {
  const grown = schedule.intervalMs * schedule.backoffCoefficient ** Math.max(0, attempt - 1);
  return Math.min(Number.isFinite(grown) ? grown : schedule.maxIntervalMs, schedule.maxIntervalMs);
}

/**
 * An attempt read a record: an `active` one is polled again (the server retries) after the
 * schedule's jittered wait, unless that wait reaches the deadline (`remainingMs`); any other
 * returns to the workflow.
 */
export function afterRecord(
  status: string,
  schedule: PollScheduleInput,
  attempt: number,
  remainingMs: number,
  random: () => number,
): { kind: 'poll-again'; delayMs: number } | { kind: 'return' } {
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
 * back to the workflow, which waits it on its own timer (where the status query shows it). 404s,
 * non-records and the deadline go back by the activities' common rules (src/activities/failures.ts).
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
 * out): the polls made and the interval reached, for a poll activity the workflow cancelled
 * (`pollNow`, a follow-up), so that the next one goes on from there.
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
