/**
 * The workflow's poll schedule, replayed without a server: how many polls a job of a given length
 * takes, so that costs measured on time-scaled runs can be checked against real time. The
 * schedule is the workflow's own (src/poll-schedule.ts).
 */
import { PollSchedule, type ResolvedPollSettings } from '../src/poll-schedule.js';
import { spread, type Spread } from './stats.js';

/** A poll schedule in milliseconds. */
export type Schedule = Pick<
  ResolvedPollSettings,
  'initialIntervalMs' | 'maxIntervalMs' | 'backoffCoefficient'
>;

/** `schedule` with every interval divided by `factor` (time runs `factor` times faster). */
export function scaleSchedule(schedule: Schedule, factor: number): Schedule {
  return {
    initialIntervalMs: schedule.initialIntervalMs / factor,
    maxIntervalMs: schedule.maxIntervalMs / factor,
    backoffCoefficient: schedule.backoffCoefficient,
  };
}

/**
 * The poll that first sees a job that ends `jobMs` after its creation: how many polls it took and
 * when it came, with no time spent between a timer and its poll (true to within milliseconds at
 * real-time intervals of seconds). `random` draws the jitter; `() => 0.5` gives none.
 */
export function detect(
  jobMs: number,
  schedule: Schedule,
  random: () => number = Math.random,
): { polls: number; atMs: number } {
  const polling = new PollSchedule(schedule);
  let elapsed = 0;
  let polls = 0;
  for (;;) {
    elapsed += polling.waitMs(elapsed, Infinity, random);
    polls++;
    if (elapsed >= jobMs) return { polls, atMs: elapsed };
    polling.grow();
  }
}

/**
 * {@link detect} over 1,001 draws: the polls' median and range for a job of exactly `jobMs`,
 * and the mean wait from a job's end to the poll that sees it, for jobs of `jobMs` ±10% (a job
 * that ends exactly on a poll would make a fixed schedule look instant). `jittered: false` for a
 * schedule without jitter, such as a retry policy's.
 */
export function replay(
  jobMs: number,
  schedule: Schedule,
  { jittered = true } = {},
): { polls: Spread; meanDelayMs: number } {
  const samples = 1_001;
  const random = jittered ? Math.random : () => 0.5;
  const polls = Array.from({ length: samples }, () => detect(jobMs, schedule, random).polls);
  let delay = 0;
  for (let i = 0; i < samples; i++) {
    const length = jobMs * (1 + (Math.random() * 2 - 1) * 0.1);
    delay += detect(length, schedule, random).atMs - length;
  }
  return { polls: spread(polls) as Spread, meanDelayMs: delay / samples };
}

/** A fixed cadence: every wait `cadenceMs`, as the load runs poll. */
export function fixedSchedule(cadenceMs: number): Schedule {
  return { initialIntervalMs: cadenceMs, maxIntervalMs: cadenceMs, backoffCoefficient: 1 };
}
