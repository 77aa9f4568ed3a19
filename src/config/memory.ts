/**
 * Sizes the worker's workflow cache and workflow-thread heap to its memory limit (WORKER_MEMORY_LIMIT,
 * else the cgroup's), so a pod with a full cache stays under its limit instead of being OOM-killed.
 * The constants come from the benchmark's load tables (docs/PERFORMANCE.md), and
 * test/deploy/memory.test.ts checks them against those tables.
 */
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';

/** Resident memory of a worker with an empty cache (runtime, SDK core, workflow bundle), MiB. */
export const BASE_MIB = 250;
/** Resident memory per 1,000 cached workflows, MiB: above every median the benchmark measured. */
export const MIB_PER_1000_WORKFLOWS = 500;
/** Share of the limit left unplanned, for garbage not yet collected and bursts of activities. */
export const HEADROOM = 0.2;
/** Cache sizes are rounded down to this step, so a small change of the limit keeps the same size. */
const CACHE_STEP = 100;
/** Below this the cache hardly helps (the SDK's own minimum is 2); a smaller pod gets this much. */
const MIN_CACHE = 10;

/** A memory limit in bytes and where it came from (for the start log line). */
export interface MemoryLimit {
  bytes: number;
  source: 'WORKER_MEMORY_LIMIT' | 'cgroup v2' | 'cgroup v1';
}

const MiB = 1024 * 1024;
/** cgroup v1 reports "no limit" as a page-aligned number near 2^63. */
const CGROUP_V1_UNLIMITED = 2 ** 60;

const UNITS: Record<string, number> = {
  '': 1,
  k: 1000,
  m: 1000 ** 2,
  g: 1000 ** 3,
  ki: 1024,
  mi: 1024 ** 2,
  gi: 1024 ** 3,
};

/** Bytes of a Kubernetes-style quantity (`1Gi`, `1536Mi`, `2G`, or bytes, any case), or null. */
export function parseMemoryQuantity(text: string): number | null {
  const match = /^(\d+(?:\.\d+)?)\s*([kmg]i?)?b?$/i.exec(text.trim());
  if (!match) return null;
  const unit = UNITS[(match[2] ?? '').toLowerCase()];
  if (unit === undefined) return null;
  const bytes = Math.floor(Number(match[1]) * unit);
  return bytes > 0 ? bytes : null;
}

function readIfPresent(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

/**
 * The container's memory limit from the cgroup file system, or null when there is none. `read`
 * gives a file's text, or null when it does not exist (no cgroup of that version).
 */
export function cgroupMemoryLimit(read = readIfPresent): MemoryLimit | null {
  const limit = (bytes: number, source: MemoryLimit['source']) =>
    Number.isFinite(bytes) && bytes > 0 ? { bytes, source } : null;
  const v2 = read('/sys/fs/cgroup/memory.max')?.trim();
  if (v2) return v2 === 'max' ? null : limit(Number(v2), 'cgroup v2');
  const v1 = Number(read('/sys/fs/cgroup/memory/memory.limit_in_bytes')?.trim() || NaN);
  return v1 >= CGROUP_V1_UNLIMITED ? null : limit(v1, 'cgroup v1');
}

/** Cached workflows that fit in `limitBytes` by the rule above, rounded down to a step of 100. */
export function cacheSizeFor(limitBytes: number): number {
  const budgetMiB = (limitBytes / MiB) * (1 - HEADROOM) - BASE_MIB;
  const fits = Math.floor((budgetMiB / MIB_PER_1000_WORKFLOWS) * 1000);
  return Math.max(MIN_CACHE, Math.floor(fits / CACHE_STEP) * CACHE_STEP);
}

/**
 * The heap of the workflow thread for a cache of `cached` workflows: the workflows' share of the
 * budget, so V8 collects garbage before the container reaches its limit, not after.
 */
export function workflowHeapFor(cached: number): number {
  // 64 MiB over the cache's share: the bundle, the young generation and one activation's garbage.
  return Math.ceil((cached * MIB_PER_1000_WORKFLOWS) / 1000) + 64;
}

/**
 * Gives the workflow thread a heap of `mib` MiB, unless `--max-old-space-size` is set explicitly
 * (then false). V8 reads its flags when an isolate is created, so this must run before `Worker.create`
 * starts the workflow thread; the main thread's heap stays as it is.
 */
export function applyWorkflowHeap(mib: number, env: NodeJS.ProcessEnv = process.env): boolean {
  const explicit = [...process.execArgv, env.NODE_OPTIONS ?? ''].some((arg) =>
    arg.includes('--max-old-space-size'),
  );
  if (explicit) return false;
  setFlagsFromString(`--max-old-space-size=${mib}`);
  return true;
}
