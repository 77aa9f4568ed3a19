/**
 * CPU time and memory, read from Linux's /proc the way `ps` and `top` do: of a process (the
 * benchmark reads the worker's from outside it, so the figures include the SDK's Rust core threads
 * and cost the worker nothing to produce), of each of its threads, and of the whole machine; and
 * where a run was taken: the machine, how busy it was, and the versions of everything measured.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './build.js';

/**
 * Clock ticks per second of /proc's CPU counters: USER_HZ, which Linux fixes at 100 for user space
 * on x86 and arm64 whatever the kernel's own tick rate (`getconf CLK_TCK` prints it).
 */
const CLOCK_TICKS = 100;

/** The name and the user plus system CPU seconds in a /proc/…/stat line of a process or a thread. */
function statCpu(path: string): { name: string; cpuSeconds: number } {
  const stat = readFileSync(path, 'utf8');
  // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime and stime are fields 14 and 15 of the whole line, so 11 and 12 after the name.
  const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  return { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), cpuSeconds };
}

/**
 * Reads CPU time (user plus system since its start, s) and memory (now and peak since its start,
 * MiB) of `pid`. Throws when the process is gone, so a reading is never silently taken from nothing.
 */
export function sampleProcess(pid: number) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kiB = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!match) throw new Error(`no ${field} in /proc status`);
    return Number(match[1]);
  };
  return {
    cpuSeconds: statCpu(`/proc/${pid}/stat`).cpuSeconds,
    rssMiB: kiB('VmRSS') / 1024,
    peakRssMiB: kiB('VmHWM') / 1024,
  };
}

/** CPU seconds of each thread of a process, by thread ID, with the thread's name. */
export function threadCpu(pid: number): Map<string, { name: string; cpuSeconds: number }> {
  const threads = new Map<string, { name: string; cpuSeconds: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      threads.set(tid, statCpu(`/proc/${pid}/task/${tid}/stat`));
    } catch (err) {
      // A thread that ended between the listing and the read.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
  return threads;
}

/**
 * Samples a process every `intervalMs` to keep the highest resident memory seen while a scenario
 * runs (VmHWM also includes start-up, when the bundle is loaded). `stop()` takes one last reading
 * and returns the highest VmRSS seen, in MiB.
 */
export function watchPeakRss(pid: number, intervalMs = 250): { stop(): number } {
  let peakMiB = 0;
  const sample = () => {
    try {
      peakMiB = Math.max(peakMiB, sampleProcess(pid).rssMiB);
    } catch (err) {
      // The process exited between two readings; the caller learns that from the process itself.
      clearInterval(timer);
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  };
  const timer = setInterval(sample, intervalMs);
  sample();
  return {
    stop: () => {
      clearInterval(timer);
      sample();
      return peakMiB;
    },
  };
}

/** The kernel's CPU time counters of all cores together (/proc/stat, first line), in ticks. */
type CpuTimes = ReturnType<typeof cpuTimes>;

/** Reads the machine-wide CPU counters. */
export function cpuTimes() {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  // cpu user nice system idle iowait irq softirq steal guest guest_nice
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const busy = user + nice + system + irq + softirq;
  return { busy, steal, total: busy + idle + iowait + steal };
}

/** Busy and steal percentages between two readings. */
export function cpuShares(from: CpuTimes, to: CpuTimes): { busy: number; steal: number } {
  const total = to.total - from.total;
  if (total <= 0) return { busy: Number.NaN, steal: Number.NaN };
  return { busy: ((to.busy - from.busy) / total) * 100, steal: ((to.steal - from.steal) / total) * 100 };
}

/** The machine and the versions. */
export type MachineInfo = ReturnType<typeof describeMachine> & {
  /** The Temporal CLI whose dev server the older runs measured (dev/dev-server.ts runs Temporal Server now). */
  temporalCli?: string;
};

/** Describes this machine; `serverVersion` comes from the running server. */
export function describeMachine(serverVersion: string) {
  const cores = cpus();
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
  };
  return {
    cpuModel: cores[0]?.model.trim() ?? 'unknown',
    cpuCount: cores.length,
    totalMemoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    kernel: release(),
    node: process.version,
    temporalServer: serverVersion,
    temporalSdk: pkg.dependencies?.['@temporalio/worker'] ?? 'unknown',
    /** 1-minute load average when the run started and when it ended. */
    loadAverageAtStart: currentLoad(),
    loadAverageAtEnd: null as number | null,
    /**
     * Over the whole run, the share of all cores' time that was busy (by anything: the benchmark and
     * whatever else ran) and that the hypervisor gave to other machines (steal), in percent.
     */
    cpuBusyPercent: null as number | null,
    cpuStealPercent: null as number | null,
  };
}

/** The current 1-minute load average. */
export function currentLoad(): number {
  return loadavg()[0] ?? Number.NaN;
}
