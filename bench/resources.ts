/**
 * CPU time and memory of a process, read from Linux's /proc the way `ps` and `top` do. The
 * benchmark reads them for the worker from outside its process, so the figures include the SDK's
 * Rust core threads and cost the worker nothing to produce.
 */
import { readFileSync } from 'node:fs';

/** One reading of a process. */
export interface ProcessSample {
  /** User plus system CPU time since the process started, in seconds. */
  cpuSeconds: number;
  /** Resident memory now (VmRSS), in MiB. */
  rssMiB: number;
  /** Peak resident memory since the process started (VmHWM), in MiB. */
  peakRssMiB: number;
}

/**
 * Clock ticks per second of /proc's CPU counters: USER_HZ, which Linux fixes at 100 for user space
 * on x86 and arm64 whatever the kernel's own tick rate (`getconf CLK_TCK` prints it).
 */
const CLOCK_TICKS = 100;

/**
 * Reads CPU time and memory of `pid`. Throws when the process is gone, so a reading can never be
 * silently taken from nothing.
 */
export function sampleProcess(pid: number): ProcessSample {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, so 11 and 12 after the name.
  const ticks = Number(fields[11]) + Number(fields[12]);
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return {
    cpuSeconds: ticks / CLOCK_TICKS,
    rssMiB: statusKiB(status, 'VmRSS') / 1024,
    peakRssMiB: statusKiB(status, 'VmHWM') / 1024,
  };
}

function statusKiB(status: string, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
  if (!match) throw new Error(`no ${field} in /proc status`);
  return Number(match[1]);
}

/**
 * Samples a process every `intervalMs` to keep the highest resident memory seen while a scenario
 * runs (VmHWM also includes start-up, when the bundle is loaded).
 */
export class ResourceWatch {
  #peakRssMiB = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(
    private readonly pid: number,
    intervalMs = 250,
  ) {
    this.#timer = setInterval(() => this.#sample(), intervalMs);
    this.#sample();
  }

  /** The highest VmRSS seen so far, in MiB. */
  get peakRssMiB(): number {
    return this.#peakRssMiB;
  }

  /** Stops sampling, after one last reading. */
  stop(): void {
    clearInterval(this.#timer);
    this.#sample();
  }

  #sample(): void {
    try {
      this.#peakRssMiB = Math.max(this.#peakRssMiB, sampleProcess(this.pid).rssMiB);
    } catch (err) {
      // The process exited between two readings; the caller learns that from the process itself.
      clearInterval(this.#timer);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}
