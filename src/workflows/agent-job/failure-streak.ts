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
}

/** What one failure means. */
export interface FailureVerdict {
  /** The first failure after a success: worth one log line, where the rest are not. */
  startsStreak: boolean;
  /** Set when the failure's type has a bound and reached it: the failure is final. */
  boundReached: number | null;
}

/** Counts failures in a row. */
export class FailureStreak {
  readonly state: FailureStreakState;

  constructor(carried?: FailureStreakState) {
    this.state = carried ?? { failures: 0, type: null, sameType: 0 };
  }

  /**
   * Counts a failure of `type` met at activity attempt `attempt`. At attempt 1 it follows the
   * previous failure directly; at a later one, Temporal retried other answers in between, so a
   * run of one type restarts.
   */
  failed(type: string, attempt: number): FailureVerdict {
    const s = this.state;
    const attempts = Math.max(1, attempt);
    s.sameType = attempts === 1 && s.type === type ? s.sameType + 1 : 1;
    s.type = type;
    s.failures += attempts;
    const bound = CONSECUTIVE_ANSWER_BOUNDS[type as keyof typeof CONSECUTIVE_ANSWER_BOUNDS];
    return {
      startsStreak: s.failures === attempts,
      boundReached: bound !== undefined && s.sameType >= bound ? s.sameType : null,
    };
  }

  /** A success ends the streak; returns how many failures it had. */
  succeeded(): number {
    const failures = this.state.failures;
    Object.assign(this.state, { failures: 0, type: null, sameType: 0 });
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
