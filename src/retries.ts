/**
 * How transient Agent Job API failures are retried: the backoff of each call, the one rule for the
 * wait before the next attempt, and the bounds on answers that may be final. The activities use it
 * for `nextRetryDelay` and the workflow for the waits it owns, so both sides compute the same wait.
 *
 * No Node modules, no clock, no randomness of its own: workflow code imports it, and passes its
 * seeded `Math.random`.
 */
import { ApiFailureType } from './agent-api/types.js';

/** An exponential backoff, in milliseconds. */
export interface Backoff {
  initialIntervalMs: number;
  backoffCoefficient: number;
  maximumIntervalMs: number;
}

/** Create: a new agent job is worth patience, and the API counts creates against an hourly budget. */
export const CREATE_BACKOFF: Backoff = {
  initialIntervalMs: 2_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 120_000,
};

/** Get: reads are cheap, and a poll that waits too long delays noticing the end of the job. */
export const GET_BACKOFF: Backoff = {
  initialIntervalMs: 1_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 60_000,
};

/** A follow-up message starts a turn, like a create: same patience (it counts against the same budget). */
export const MESSAGE_BACKOFF: Backoff = CREATE_BACKOFF;

/**
 * Longest `Retry-After` honoured: 10 minutes. A server may ask for an hour (the API's budget is
 * hourly); waiting in steps of at most this long keeps the workflow responsive to its deadline, to
 * `pollNow` and to operators, and the next refusal asks again.
 */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * Jitter added to every wait, as a fraction: 0 to +20%. Only upwards, so a wait never drops below
 * the backoff or the server's `Retry-After`; enough that workflows refused together do not return
 * together.
 */
export const RETRY_JITTER = 0.2;

/**
 * Answers that are usually transient but final when they persist: 404 on get or message (a job
 * just created may not be readable at once) and a body that is not a record (a proxy's maintenance
 * page). The bound counts consecutive answers of the type, so one stray 404 after an outage of 503s
 * never fails a job.
 */
export const CONSECUTIVE_ANSWER_BOUNDS: Readonly<Partial<Record<ApiFailureType, number>>> = {
  [ApiFailureType.JobNotFound]: 5,
  [ApiFailureType.UnexpectedResponse]: 5,
};

/** The backoff before attempt `failures + 1`, after `failures` (at least 1) failed attempts in a row. */
export function backoffMs(backoff: Backoff, failures: number): number {
  const exponent = Math.max(0, failures - 1);
  const wait = backoff.initialIntervalMs * backoff.backoffCoefficient ** exponent;
  return Math.min(Number.isFinite(wait) ? wait : backoff.maximumIntervalMs, backoff.maximumIntervalMs);
}

/** What {@link retryDelayMs} decides from. */
export interface RetryDelayInput {
  backoff: Backoff;
  /** Failed attempts in a row so far, at least 1. */
  failures: number;
  /** The server's `Retry-After` in ms (0 for a date in the past), or null when it sent none. */
  retryAfterMs: number | null;
  /** A uniform number in [0, 1): the workflow's seeded `Math.random`, or the activity's. */
  random: () => number;
}

/**
 * The wait before the next attempt: the policy's backoff, raised (never lowered) to the server's
 * `Retry-After` capped at {@link MAX_RETRY_AFTER_MS}, plus up to {@link RETRY_JITTER}. So
 * `Retry-After: 0` or a date in the past (clock skew) can never cause a retry storm. Callers cap
 * the result at their deadline.
 */
export function retryDelayMs(input: RetryDelayInput): number {
  const floor = backoffMs(input.backoff, input.failures);
  const asked =
    input.retryAfterMs === null ? 0 : Math.min(Math.max(0, input.retryAfterMs), MAX_RETRY_AFTER_MS);
  return Math.round(Math.max(floor, asked) * (1 + input.random() * RETRY_JITTER));
}

/** The Temporal retry policy of a {@link Backoff}. */
export function retryPolicyOf(backoff: Backoff): {
  initialInterval: number;
  backoffCoefficient: number;
  maximumInterval: number;
} {
  return {
    initialInterval: backoff.initialIntervalMs,
    backoffCoefficient: backoff.backoffCoefficient,
    maximumInterval: backoff.maximumIntervalMs,
  };
}
