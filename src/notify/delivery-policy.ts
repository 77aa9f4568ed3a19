/**
 * What a failed delivery of a job-end notice does, in one table keyed by what happened (the same
 * kinds the Agent Job API's failure policy classifies: ../agent-api/failure-kinds.ts), and how
 * long it waits before the next attempt. A receiver that is down, overloaded or not reachable
 * yet (5xx, 408, 425, 429, a refused or broken connection, a timeout, a TLS handshake that
 * failed) is tried again, for a bounded time (`AGENT_NOTIFY_RETRY_FOR`); one that refuses the
 * notice (other 4xx, a redirect) will refuse it again, so the delivery stops at once.
 * docs/failure-policy.md prints the table.
 *
 * Pure: no Node modules, no clock.
 */
import { FailureKind } from '../agent-api/failure-kinds.js';
import { retryDelayMs, type Backoff } from '../agent-api/failure-policy.js';

/** What one kind of failed delivery does: tried again, or the delivery ends undelivered. */
export interface DeliveryVerdict {
  retry: boolean;
  /** The receiver's `Retry-After` raises the wait (429 and 503 define it for this). */
  readsRetryAfter: boolean;
}

const retry: DeliveryVerdict = { retry: true, readsRetryAfter: false };
const retryAfter: DeliveryVerdict = { retry: true, readsRetryAfter: true };
const stop: DeliveryVerdict = { retry: false, readsRetryAfter: false };

/** Default of `AGENT_NOTIFY_RETRY_FOR`: how long a notice is tried before it is given up, 24 h. */
export const DEFAULT_NOTIFY_RETRY_FOR_MS = 24 * 60 * 60_000;

/**
 * The table. A redirect stops: a webhook that moved is a configuration to fix, and following it
 * would send the signed notice to a host no one configured. A TLS failure is retried: a
 * certificate being renewed is fixed within the bound, and the bound ends a broken one.
 */
export const DELIVERY_POLICY: Readonly<Record<FailureKind, DeliveryVerdict>> = {
  [FailureKind.Malformed]: stop,
  [FailureKind.NotSendable]: stop,
  [FailureKind.KeyRefused]: stop,
  [FailureKind.Forbidden]: stop,
  [FailureKind.NotFound]: stop,
  [FailureKind.NotProcessed]: retry,
  [FailureKind.RateLimited]: retryAfter,
  [FailureKind.Unavailable]: retryAfter,
  [FailureKind.ServerError]: retry,
  [FailureKind.Redirect]: stop,
  [FailureKind.SeeOther]: stop,
  [FailureKind.OddStatus]: stop,
  [FailureKind.NotConnected]: retry,
  [FailureKind.TlsRejected]: retry,
  [FailureKind.ProxyRefused]: stop,
  [FailureKind.ConnectTimeout]: retry,
  [FailureKind.LostAfterSend]: retry,
  [FailureKind.NoAnswerInTime]: retry,
  [FailureKind.ShutdownBeforeSend]: retry,
  [FailureKind.NotARecord]: stop,
  [FailureKind.InvalidRecord]: stop,
};

/**
 * The backoff between delivery attempts: 5 s, doubling, at most 10 min, so a receiver down for an
 * hour is tried about a dozen times and one down for the whole bound (24 h by default) about 150.
 */
export const DELIVERY_BACKOFF: Backoff = {
  initialIntervalMs: 5_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 10 * 60_000,
};

/**
 * The wait before the attempt after `attempt` failed with `kind`, or null when the delivery stops.
 * `retryAfterMs` counts only where the table says the receiver may ask for a wait.
 */
export function nextDeliveryDelayMs(input: {
  kind: FailureKind;
  attempt: number;
  retryAfterMs: number | null;
  backoff?: Backoff;
  random: () => number;
}): number | null {
  const verdict = DELIVERY_POLICY[input.kind];
  if (!verdict.retry) return null;
  return retryDelayMs({
    backoff: input.backoff ?? DELIVERY_BACKOFF,
    failures: Math.max(1, input.attempt),
    retryAfterMs: verdict.readsRetryAfter ? input.retryAfterMs : null,
    random: input.random,
  });
}

/**
 * Whether the next attempt, `delayMs` from `nowMs`, would come after the bound: `boundMs` from the
 * first attempt's schedule (`AGENT_NOTIFY_RETRY_FOR`, the activity's schedule-to-close timeout). The
 * delivery then ends at once, naming the last problem, rather than at the server's timer, whose
 * failure does not carry it. A bound of 0 is none.
 */
export function outlastsBound(input: {
  nowMs: number;
  delayMs: number;
  firstScheduledMs: number;
  boundMs: number;
}): boolean {
  return input.boundMs > 0 && input.nowMs + input.delayMs >= input.firstScheduledMs + input.boundMs;
}

/** `24h`, `90m`, `3s`: a bound as AGENT_NOTIFY_RETRY_FOR is written. */
export function formatBound(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  return `${Math.round(ms / 1000)}s`;
}
