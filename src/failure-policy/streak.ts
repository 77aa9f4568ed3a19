/**
 * A streak of failures of one Agent Job API call as the workflow counts it (carried across
 * continue-as-new), when the table's bound for it (`StreakBound`) is reached, and the wait before
 * the next attempt. Pure: the caller passes the time and the random source.
 */
import { retryDelayMs, type Backoff } from './backoff.js';
import type { ApiOperation, StreakBound } from './table.js';

/** Answers in a row after which an `in-a-row` failure is final, and a `blip` of a job never answered. */
export const ANSWERS_IN_A_ROW = 5;

/** Default of the input's `blipTolerance`. */
export const DEFAULT_BLIP_TOLERANCE_MS = 30 * 60_000;

/**
 * Default of the input's `credentialTolerance`: an hour. Rotating an expired or revoked key takes
 * an operator minutes; while it lasts, the jobs already made run on at the API, and a workflow that
 * gave up would leave its job unwatched and its pull request unreported.
 */
export const DEFAULT_CREDENTIAL_TOLERANCE_MS = 60 * 60_000;

/** Default of `AGENT_NOTIFY_RETRY_FOR`: how long a notice is tried before it is given up, 24 h. */
export const DEFAULT_NOTIFY_RETRY_FOR_MS = 24 * 60 * 60_000;

/** The tolerances a workflow runs with, in ms. */
export interface Tolerances {
  /** `blipTolerance`, or null while the API has not answered for the job (a count bounds it then). */
  blipMs: number | null;
  /** `credentialTolerance`. */
  credentialMs: number;
}

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
  type: string;
  /** How the policy bounds a streak of it. */
  bound: StreakBound;
  operation: ApiOperation;
  /**
   * For a refused key: how long ago this worker last had another answer from the project (null:
   * never), which decides whether a create's key may be in rotation.
   */
  keyAnsweredAgoMs?: number | null;
}

/** Counts failures in a row. */
export class FailureStreak {
  readonly state: FailureStreakState;

  constructor(carried?: FailureStreakState) {
    this.state = carried ?? { failures: 0, type: null, sameType: 0 };
  }

  /**
   * Counts `failure`, met at activity attempt `attempt`, at workflow time `nowMs`. At a later
   * attempt than 1, Temporal retried other answers in between, so a run of one type restarts.
   * `startsStreak`: the first failure after a success (worth one log line); `boundReached`: what
   * ended the streak (the failure is final), or null.
   */
  failed(
    failure: CountedFailure,
    attempt: number,
    nowMs: number,
    tolerances: Tolerances,
  ): { startsStreak: boolean; boundReached: string | null } {
    const s = this.state;
    const attempts = Math.max(1, attempt);
    const continues = attempts === 1 && s.type === failure.type;
    s.sameType = continues ? s.sameType + 1 : 1;
    if (!continues || s.sameTypeSinceMs == null) s.sameTypeSinceMs = nowMs;
    s.type = failure.type;
    s.failures += attempts;
    return {
      startsStreak: s.failures === attempts,
      boundReached: this.#boundReached(failure, nowMs - s.sameTypeSinceMs, tolerances),
    };
  }

  /** A success ends the streak; returns how many failures it had. */
  succeeded(): number {
    const failures = this.state.failures;
    Object.assign(this.state, { failures: 0, type: null, sameType: 0, sameTypeSinceMs: null });
    return failures;
  }

  /** The wait before the next attempt ({@link retryDelayMs} for this streak), never past `remainingMs`. */
  retryInMs(
    backoff: Backoff,
    retryAfterMs: number | null,
    random: () => number,
    remainingMs: number,
  ): number {
    const wait = retryDelayMs({ backoff, failures: Math.max(1, this.state.failures), retryAfterMs, random });
    return Math.min(wait, remainingMs);
  }

  /** Whether the run of `failure`'s type, lasting `lastedMs`, is over: what was reached, or null. */
  #boundReached(failure: CountedFailure, lastedMs: number, tolerances: Tolerances): string | null {
    switch (failure.bound) {
      case 'deadline':
        return null;
      case 'final':
        return 'a final answer';
      case 'in-a-row':
        return this.#inARow();
      case 'blip':
        if (tolerances.blipMs === null) return this.#inARow();
        return this.#lasted(lastedMs, tolerances.blipMs, 'the blip tolerance');
      case 'credentials': {
        const ago = failure.keyAnsweredAgoMs ?? null;
        if (failure.operation === 'createJob' && (ago === null || ago > tolerances.credentialMs)) {
          return 'a refused key with no answer from this project within the credential tolerance (no agent job was created)';
        }
        return this.#lasted(lastedMs, tolerances.credentialMs, 'the credential tolerance');
      }
    }
  }

  #inARow(): string | null {
    const inARow = this.state.sameType;
    return inARow >= ANSWERS_IN_A_ROW ? `${inARow} such answers in a row` : null;
  }

  #lasted(lastedMs: number, toleranceMs: number, name: string): string | null {
    if (lastedMs < toleranceMs) return null;
    const s = (ms: number) => Math.round(ms / 1000);
    return `such answers for ${s(lastedMs)}s (${this.state.sameType} in a row), past ${name} of ${s(toleranceMs)}s`;
  }
}
