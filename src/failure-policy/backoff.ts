/**
 * How a failure backs off: the backoff of each column of the table (./table.ts), the jitter, the
 * cap on `Retry-After`. One rule, {@link retryDelayMs}, sets every wait: the activities'
 * `nextRetryDelay`, the workflow's timers, a notice's attempts; the activities' retry policies are
 * these backoffs ({@link retryPolicyOf}), so an attempt lost with its worker is spaced alike.
 * Pure: the caller passes the random source.
 */
import type { FailureKind } from './kinds.js';
import { POLICY, type ApiOperation } from './table.js';

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
 * A job-end notice's delivery: 5 s, doubling, at most 10 min, so a receiver down for an hour is
 * tried about a dozen times and one down for the whole bound (24 h by default) about 150.
 */
export const DELIVERY_BACKOFF: Backoff = {
  initialIntervalMs: 5_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 10 * 60_000,
};

/** The backoff of each column. */
export const BACKOFFS: Readonly<Record<ApiOperation | 'delivery', Backoff>> = {
  createJob: CREATE_BACKOFF,
  getJob: GET_BACKOFF,
  sendMessage: MESSAGE_BACKOFF,
  delivery: DELIVERY_BACKOFF,
};

/**
 * Longest `Retry-After` honoured: 10 minutes. A server may ask for an hour (the API's budget is
 * hourly); waiting in steps of at most this long keeps the workflow responsive to its deadline, to
 * `pollNow` and to operators, and the next refusal asks again.
 */
export const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * Jitter added to every wait: 0 to +20%, only upwards (never below the backoff or `Retry-After`),
 * so that workflows refused together do not return together.
 */
export const RETRY_JITTER = 0.2;

/**
 * The wait after `failures` (at least 1) failed attempts in a row: the backoff, raised (never
 * lowered) to the server's `Retry-After` capped at {@link MAX_RETRY_AFTER_MS}, plus jitter; so
 * `Retry-After: 0` or a date in the past can never cause a retry storm. Callers cap it at their deadline.
 */
export function retryDelayMs({
  backoff,
  failures,
  retryAfterMs,
  random,
}: {
  backoff: Backoff;
  failures: number;
  retryAfterMs: number | null;
  random: () => number;
}): number {
  const grown = backoff.initialIntervalMs * backoff.backoffCoefficient ** Math.max(0, failures - 1);
  const floor = Math.min(
    Number.isFinite(grown) ? grown : backoff.maximumIntervalMs,
    backoff.maximumIntervalMs,
  );
  const asked = retryAfterMs === null ? 0 : Math.min(Math.max(0, retryAfterMs), MAX_RETRY_AFTER_MS);
  return Math.round(Math.max(floor, asked) * (1 + random() * RETRY_JITTER));
}

/**
 * The wait before a job-end notice's next attempt, or null when the delivery stops. Whether it
 * still fits the delivery's bound is the server's to say (the schedule-to-close timeout).
 */
export function nextDeliveryDelayMs(input: {
  kind: FailureKind;
  attempt: number;
  retryAfterMs: number | null;
  backoff?: Backoff;
  random: () => number;
}): number | null {
  const { delivery } = POLICY[input.kind];
  if (delivery.bound === 'final') return null;
  return retryDelayMs({
    backoff: input.backoff ?? DELIVERY_BACKOFF,
    failures: Math.max(1, input.attempt),
    retryAfterMs: delivery.readsRetryAfter ? input.retryAfterMs : null,
    random: input.random,
  });
}

/** The Temporal retry policy of a {@link Backoff}. */
export function retryPolicyOf(backoff: Backoff) {
  return {
    initialInterval: backoff.initialIntervalMs,
    backoffCoefficient: backoff.backoffCoefficient,
    maximumInterval: backoff.maximumIntervalMs,
  };
}
