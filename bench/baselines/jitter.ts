/**
 * The agent-job workflow's jitter, for what the benchmark sets beside it: every wait is the
 * interval ±10%, drawn uniformly (src/workflows/agent-job.ts keeps its constant private). No Node
 * modules and no randomness of its own, so the plain loop (Node's `Math.random`), the floor workflow
 * (workflow code, where `Math.random` is the seeded one) and the schedule's replay all draw the same
 * spread from one rule.
 */

/** The workflow's jitter of each wait, as a fraction. */
export const JITTER = 0.1;

/** The factor a wait is multiplied by: uniform in [1 − JITTER, 1 + JITTER). */
export function jitterFactor(random: () => number = Math.random): number {
  return 1 + (random() * 2 - 1) * JITTER;
}

/** `intervalMs` jittered, in whole milliseconds and at least 1, as the workflow's timer gets it. */
export function jitteredMs(intervalMs: number, random: () => number = Math.random): number {
  return Math.max(1, Math.round(intervalMs * jitterFactor(random)));
}
