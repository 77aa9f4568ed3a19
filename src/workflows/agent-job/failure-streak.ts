/**
 * The Agent Job API's failures in a row, as the workflow counts them: they set the wait before
 * the next attempt, and the failure policy (../../agent-api/failure-policy.ts) says when a streak of
 * one type is over. Pure: the caller passes the time and the random source (the workflow's seeded
 * `Math.random`).
 */
import {
  boundReached,
  retryDelayMs,
  type ApiOperation,
  type Backoff,
  type StreakBound,
  type Tolerances,
} from '../../agent-api/failure-policy.js';

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

/** One failure as the streak counts it. */
export interface CountedFailure {
  /** Its failure type. */
  type: string;
  /** How the policy bounds a streak of it. */
  bound: StreakBound;
  /** The call that met it. */
  operation: ApiOperation;
  /** For a refused key: how long ago this worker last had another answer from the project. */
  keyAnsweredAgoMs?: number | null;
}

/** What one failure means. */
export interface FailureVerdict {
  /** The first failure after a success: worth one log line, where the rest are not. */
  startsStreak: boolean;
  /** Set when the streak is over (what was reached): the failure is final. */
  boundReached: string | null;
}

/** Counts failures in a row. */
export class FailureStreak {
  readonly state: FailureStreakState;

  constructor(carried?: FailureStreakState) {
    this.state = carried ?? { failures: 0, type: null, sameType: 0 };
  }

  /**
   * Counts `failure`, met at activity attempt `attempt`, at workflow time `nowMs`. At attempt 1 it
   * follows the previous failure directly; at a later one, Temporal retried other answers in
   * between, so a run of one type restarts.
   */
  failed(failure: CountedFailure, attempt: number, nowMs: number, tolerances: Tolerances): FailureVerdict {
    const s = this.state;
    const attempts = Math.max(1, attempt);
    const continues = attempts === 1 && s.type === failure.type;
    s.sameType = continues ? s.sameType + 1 : 1;
    if (!continues || s.sameTypeSinceMs == null) s.sameTypeSinceMs = nowMs;
    s.type = failure.type;
    s.failures += attempts;
    const streak = { inARow: s.sameType, lastedMs: nowMs - s.sameTypeSinceMs };
    return {
      startsStreak: s.failures === attempts,
      boundReached: boundReached(
        failure.bound,
        streak,
        tolerances,
        failure.keyAnsweredAgoMs ?? null,
        failure.operation,
      ),
    };
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
