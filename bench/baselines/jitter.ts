/**
 * The agent-job workflow's jitter (the contract's `pollJitterFactor`), as a whole-millisecond wait
 * for what the benchmark runs beside the worker: the plain loop (Node's `Math.random`) and the
 * floor workflow (workflow code, where `Math.random` is the seeded one) draw the same spread.
 */
import { pollJitterFactor } from '../../src/poll-schedule.js';

/** `intervalMs` jittered, in whole milliseconds and at least 1, as the workflow's timer gets it. */
export function jitteredMs(intervalMs: number, random: () => number = Math.random): number {
  return Math.max(1, Math.round(intervalMs * pollJitterFactor(random)));
}
