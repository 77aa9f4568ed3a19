/**
 * When to poll next: the interval grows by the coefficient after each read up to the maximum,
 * restarts after a follow-up message, is jittered, and never runs past the deadline. Pure: the
 * caller passes the time and the random source (the workflow's seeded `Math.random`).
 */
import { pollJitterFactor, type ResolvedPollSettings } from '../../contract.js';

/** The schedule of one workflow; `intervalMs` is carried across continue-as-new. */
export class PollSchedule {
  constructor(
    private readonly settings: Pick<
      ResolvedPollSettings,
      'initialIntervalMs' | 'maxIntervalMs' | 'backoffCoefficient'
    >,
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
    this.intervalMs = Math.min(
      this.intervalMs * this.settings.backoffCoefficient,
      this.settings.maxIntervalMs,
    );
  }

  /** After a follow-up message: a new turn is watched as closely as a new job. */
  restart(): void {
    this.intervalMs = this.settings.initialIntervalMs;
  }
}
