/**
 * A workflow waiting in its project's quota queue: when it asks again, when it checks that the
 * quota workflow still runs, and how it reads the quota's signals. The decisions of the requester's
 * wait (src/quota/requester.ts), pure and on a clock the caller passes (the workflow
 * clock), so they are unit-tested on a fake one.
 */
import type { QueuePlace } from '../contract.js';
import type { QuotaDeclined } from './messages.js';
import { RETRY_JITTER } from '../agent-api/failure-policy.js';
import { DEFAULT_QUOTA_LEASE_MS } from './settings.js';

/**
 * How long a requester waits without a word (no place, no grant) before it asks again under the
 * same request ID, and how long past its estimated start: the default lease, by which a grant lost
 * on its way would have come back to the budget. Asking again is idempotent. Also the longest
 * between two checks that the quota workflow still runs.
 */
export const QUOTA_REASK_MS = DEFAULT_QUOTA_LEASE_MS;

/** One request's schedule, from its first ask to its grant. */
export class AskSchedule {
  /** A terminated quota workflow is noticed within a lease: by then a grant lost with it would have come back too. */
  readonly #checkEveryMs: number;
  #reaskAt: number;
  #checkAt: number;
  /** Turned away by a full queue until the next ask: no run holds the request, so there is nothing to check. */
  #outOfQueue = false;

  /** Asked at `now`; `leaseMs` is the worker's lease (absent: the default). */
  constructor(now: number, leaseMs: number | undefined) {
    this.#checkEveryMs = Math.min(QUOTA_REASK_MS, leaseMs ?? QUOTA_REASK_MS);
    this.#reaskAt = now + QUOTA_REASK_MS;
    this.#checkAt = now + this.#checkEveryMs;
  }

  /** Asked again at `now`: both clocks start over. */
  asked(now: number): void {
    this.#reaskAt = now + QUOTA_REASK_MS;
    this.#checkAt = now + this.#checkEveryMs;
    this.#outOfQueue = false;
  }

  /**
   * A full queue declined the request: ask again at the time it names (at least 1 s away), plus up
   * to {@link RETRY_JITTER}, so the turned-away do not return together. Returns that time.
   */
  declined(declined: QuotaDeclined, now: number, random: () => number): number {
    const retryAt = Date.parse(declined.retryAt);
    const waitMs = Math.max(1_000, (Number.isNaN(retryAt) ? 0 : retryAt) - now);
    this.#reaskAt = now + Math.round(waitMs * (1 + random() * RETRY_JITTER));
    this.#outOfQueue = true;
    return this.#reaskAt;
  }

  /** A place was heard: ask again only {@link QUOTA_REASK_MS} past when it was told or the start it estimated. */
  placeHeard(place: QueuePlace | undefined): void {
    this.#reaskAt = Math.max(this.#reaskAt, reaskAfter(place));
  }

  /** The time to ask again has come. */
  dueToAsk(now: number): boolean {
    return now >= this.#reaskAt;
  }

  /** How long to wait for a word before looking again: until the next ask, check or `deadlineMs`. */
  wakeInMs(now: number, deadlineMs: number): number {
    return Math.max(1, Math.min(deadlineMs, this.#reaskAt, this.#checkAt) - now);
  }

  /**
   * Whether to check now that the quota workflow still holds the request (not when an ask is due
   * anyway, nor while a full queue keeps it out); the next check is then a period away.
   */
  dueToCheck(now: number): boolean {
    if (this.#outOfQueue || now < this.#checkAt || now >= this.#reaskAt) return false;
    this.#checkAt = now + this.#checkEveryMs;
    return true;
  }

  /**
   * The quota no longer holds the request: its workflow no longer runs, or a run started since
   * never heard of it (it answered `not-queued`). Ask again now.
   */
  notHeld(now: number): void {
    this.#reaskAt = now;
  }
}

function reaskAfter(place: QueuePlace | undefined): number {
  const told = Math.max(Date.parse(place?.asOf ?? ''), Date.parse(place?.earliestStartAt ?? ''));
  return Number.isNaN(told) ? -Infinity : told + QUOTA_REASK_MS;
}

/** The use name of a signal's request ID: what follows the last `/` (`create-0-1`, `create-0-1.2`); null when malformed. */
export function useNameOf(signal: unknown): string | null {
  const requestId = (signal as { requestId?: unknown } | null)?.requestId;
  return typeof requestId === 'string' ? requestId.slice(requestId.lastIndexOf('/') + 1) : null;
}

/** The place in a place signal, or null when it is malformed. */
export function placeOf(signal: unknown): QueuePlace | null {
  const { position, queueLength, earliestStartAt, asOf } = (signal ?? {}) as Partial<
    Record<keyof QueuePlace, unknown>
  >;
  if (typeof position !== 'number' || typeof queueLength !== 'number') return null;
  if (typeof earliestStartAt !== 'string' || typeof asOf !== 'string') return null;
  return { position, queueLength, earliestStartAt, asOf };
}
