/**
 * The Agent Job API's failures in a row, as the workflow counts them: they set the wait before
 * the next attempt and the bounds on answers that are final only when they persist. Pure: the
 * caller passes the random source (the workflow's seeded `Math.random`).
 */
import { CONSECUTIVE_ANSWER_BOUNDS, retryDelayMs, type Backoff } from '../../retries.js';

/** The streak, as carried across continue-as-new. */
export interface FailureStreakState {
  /** Failed attempts in a row; 0 after a success. */
  failures: number;
  /** Type of the latest failure, null after a success. */
  type: string | null;
  /** Latest failures in a row of that type. */
  sameType: number;
  /** Workflow time of the first of those, epoch ms. */
  sameTypeSinceMs?: number | null;
}

/** What one failure means. */
export interface FailureVerdict {
  /** The first failure after a success: worth one log line, where the rest are not. */
  startsStreak: boolean;
  /** Set when the failure's type has a bound and reached it (what was reached): the failure is final. */
  boundReached: string | null;
}

/** Counts failures in a row. */
export class FailureStreak {
  readonly state: FailureStreakState;

  constructor(carried?: FailureStreakState) {
    this.state = carried ?? { failures: 0, type: null, sameType: 0 };
  }

  /**
   * Counts a failure of `type` met at activity attempt `attempt`, at workflow time `nowMs`. At
   * attempt 1 it follows the previous failure directly; at a later one, Temporal retried other
   * answers in between, so a run of one type restarts.
   *
   * Answers with a bound (404, a body that is not a record) are final once they persist: for
   * `toleranceMs` when it is set (a job the API has answered before: a failover or maintenance
   * pages pass), else after the bound's count in a row (a job never seen: likely a wrong ID).
   */
  failed(type: string, attempt: number, nowMs: number, toleranceMs: number | null = null): FailureVerdict {
    const s = this.state;
    const attempts = Math.max(1, attempt);
    const continues = attempts === 1 && s.type === type;
    s.sameType = continues ? s.sameType + 1 : 1;
    if (!continues || s.sameTypeSinceMs == null) s.sameTypeSinceMs = nowMs;
    s.type = type;
    s.failures += attempts;
    return { startsStreak: s.failures === attempts, boundReached: this.#bound(type, nowMs, toleranceMs) };
  }

  #bound(type: string, nowMs: number, toleranceMs: number | null): string | null {
    const s = this.state;
    const count = CONSECUTIVE_ANSWER_BOUNDS[type as keyof typeof CONSECUTIVE_ANSWER_BOUNDS];
    if (count === undefined) return null;
    if (toleranceMs === null) return s.sameType >= count ? `${s.sameType} such answers in a row` : null;
    const lastedMs = nowMs - (s.sameTypeSinceMs ?? nowMs);
    if (lastedMs < toleranceMs) return null;
    return `such answers for ${Math.round(lastedMs / 1000)}s (${s.sameType} in a row), past the blip tolerance of ${Math.round(toleranceMs / 1000)}s`;
  }

  /** A success ends the streak; returns how many failures it had. */
  succeeded(): number {
    const failures = this.state.failures;
    Object.assign(this.state, { failures: 0, type: null, sameType: 0, sameTypeSinceMs: null });
    return failures;
  }

  /**
   * The wait before the next attempt: the backoff for this streak, raised to a capped
   * `Retry-After`, jittered, and never past `remainingMs`.
   */
  retryInMs(
    backoff: Backoff,
    retryAfterMs: number | null,
    random: () => number,
    remainingMs: number,
  ): number {
    const wait = retryDelayMs({ backoff, failures: Math.max(1, this.state.failures), retryAfterMs, random });
    return Math.min(wait, remainingMs);
  }
}
