/**
 * The benchmark's waits on conditions it can only look at (the simulator's counts, visibility, a
 * history), each with a deadline that says what it waited for when it gives up. A process's log
 * line is waited for as an event (./processes.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** How one wait looks and when it gives up. */
export interface WaitOptions<T> {
  /** Looks once: a value ends the wait with it, undefined looks again; a throw ends the wait too. */
  check: () => T | undefined | Promise<T | undefined>;
  /** Epoch ms after which the wait gives up. */
  deadline: number;
  /** Pause between looks, ms. */
  everyMs: number;
  /** What the wait ends with when the deadline comes first: a value, or a throw. */
  late: () => T;
}

/** Looks with `check` every `everyMs` until it gives a value, or until the deadline (then `late()`). */
export async function waitUntil<T>(options: WaitOptions<T>): Promise<T> {
  for (;;) {
    const value = await options.check();
    if (value !== undefined) return value;
    if (Date.now() > options.deadline) return options.late();
    await sleep(options.everyMs);
  }
}
