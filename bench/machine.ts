/**
 * Where a run was taken: the machine, how busy it was, and the versions of everything measured.
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './build.js';

/** The machine and the versions. */
export interface MachineInfo {
  cpuModel: string;
  cpuCount: number;
  totalMemoryGiB: number;
  kernel: string;
  node: string;
  /**
   * The Temporal CLI whose dev server the older runs measured; the server is now Temporal Server
   * itself (dev/dev-server.ts), and `temporalServer` says which release.
   */
  temporalCli?: string;
  temporalServer: string;
  temporalSdk: string;
  /** 1-minute load average when the run started and when it ended. */
  loadAverageAtStart: number;
  loadAverageAtEnd: number | null;
  /**
   * Over the whole run, the share of all cores' time that was busy (by anything: the benchmark and
   * whatever else ran) and that the hypervisor gave to other machines (steal), in percent.
   */
  cpuBusyPercent: number | null;
  cpuStealPercent: number | null;
}

/** The kernel's CPU time counters of all cores together (/proc/stat, first line), in ticks. */
export interface CpuTimes {
  busy: number;
  steal: number;
  total: number;
}

/** Reads the machine-wide CPU counters. */
export function cpuTimes(): CpuTimes {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  // cpu user nice system idle iowait irq softirq steal guest guest_nice
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0);
  const total = busy + (idle ?? 0) + (iowait ?? 0) + (steal ?? 0);
  return { busy, steal: steal ?? 0, total };
}

/** Busy and steal percentages between two readings. */
export function cpuShares(from: CpuTimes, to: CpuTimes): { busy: number; steal: number } {
  const total = to.total - from.total;
  if (total <= 0) return { busy: Number.NaN, steal: Number.NaN };
  return { busy: ((to.busy - from.busy) / total) * 100, steal: ((to.steal - from.steal) / total) * 100 };
}

/** Describes this machine; `serverVersion` comes from the running server. */
export function describeMachine(serverVersion: string): MachineInfo {
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
    loadAverageAtStart: loadavg()[0] ?? Number.NaN,
    loadAverageAtEnd: null,
    cpuBusyPercent: null,
    cpuStealPercent: null,
  };
}

/** The current 1-minute load average. */
export function currentLoad(): number {
  return loadavg()[0] ?? Number.NaN;
}
