/**
 * How a failure backs off: the backoff of each column of the table (./table.ts), the jitter on
 * every wait, and the cap on a server's `Retry-After`. One rule, {@link retryDelayMs}, sets every
 * wait: in the activities (as `nextRetryDelay`, the server retrying), in the workflow (on its own
 * timers) and between a job-end notice's attempts. The activities' retry policies are these
 * backoffs ({@link retryPolicyOf}), so an attempt lost with its worker is spaced alike.
 *
 * Pure: no Node modules, no clock; the caller passes the random source (the workflow's seeded
 * `Math.random`, or the activity's).
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
 * Jitter added to every wait, as a fraction: 0 to +20%. Only upwards, so a wait never drops below
 * the backoff or the server's `Retry-After`; enough that workflows refused together do not return
 * together.
 */
export const RETRY_JITTER = 0.2;

/**
 * The wait before the next attempt, after `failures` (at least 1) failed attempts in a row: the
 * backoff, raised (never lowered) to the server's `Retry-After` (`retryAfterMs`: 0 for a date in
 * the past, null when it sent none) capped at {@link MAX_RETRY_AFTER_MS}, plus up to
 * {@link RETRY_JITTER} from `random` (the workflow's seeded `Math.random`, or the activity's). So
 * `Retry-After: 0` or a date in the past (clock skew) can never cause a retry storm. Callers cap
 * the result at their deadline.
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
 * The wait before a job-end notice's attempt after `attempt` failed with `kind`, or null when the
 * delivery stops. `retryAfterMs` counts only where the table says the receiver may ask for a wait.
 * Whether the wait still fits the delivery's bound is the server's to say: it ends the delivery
 * when the next attempt would come after the schedule-to-close timeout.
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
