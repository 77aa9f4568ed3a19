/** The memory limit sources and the sizing rule of src/config/memory.ts, and its settings. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/settings.js';
import { DEFAULT_MAX_CACHED_WORKFLOWS, loadWorkerConfig } from '../../src/config/worker.js';
import {
  BASE_MIB,
  cacheSizeFor,
  cgroupMemoryLimit,
  HEADROOM,
  MIB_PER_1000_WORKFLOWS,
  parseMemoryQuantity,
  workflowHeapFor,
} from '../../src/config/memory.js';

const GiB = 2 ** 30;
const base = { AGENT_API_BASE_URL: 'http://127.0.0.1:8787', AGENT_API_KEY: 'k' };
const files = (entries: Record<string, string>) => (path: string) => entries[path] ?? null;

test('quantities in Kubernetes units', () => {
  assert.equal(parseMemoryQuantity('1Gi'), GiB);
  assert.equal(parseMemoryQuantity('1536Mi'), 1.5 * GiB);
  assert.equal(parseMemoryQuantity('2G'), 2e9);
  assert.equal(parseMemoryQuantity('1073741824'), GiB);
  for (const bad of ['', 'lots', '-1Gi', '0', '1Ti']) assert.equal(parseMemoryQuantity(bad), null, bad);
});

test('the cgroup limit: v2 first, then v1, and "no limit" in either form', () => {
  assert.deepEqual(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory.max': `${GiB}\n` })), {
    bytes: GiB,
    source: 'cgroup v2',
  });
  assert.equal(cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory.max': 'max\n' })), null);
  assert.deepEqual(
    cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': `${2 * GiB}` })),
    {
      bytes: 2 * GiB,
      source: 'cgroup v1',
    },
  );
  assert.equal(
    cgroupMemoryLimit(files({ '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712' })),
    null,
  );
  assert.equal(cgroupMemoryLimit(files({})), null);
});

test('the cache grows with the limit and its planned memory stays under it', () => {
  assert.equal(cacheSizeFor(GiB), 1100);
  assert.equal(cacheSizeFor(2 * GiB), 2700);
  assert.equal(cacheSizeFor(128 * 2 ** 20), 10, 'a tiny limit still gets a usable cache');
  for (const gib of [0.5, 1, 2, 4, 8]) {
    const cache = cacheSizeFor(gib * GiB);
    const plannedMiB = BASE_MIB + (cache / 1000) * MIB_PER_1000_WORKFLOWS;
    assert.ok(plannedMiB <= gib * 1024 * (1 - HEADROOM), `${gib} GiB`);
    assert.ok(workflowHeapFor(cache) < gib * 1024, `${gib} GiB: the heap fits`);
  }
});

test('the worker config: WORKER_MEMORY_LIMIT over the cgroup, an explicit cache over both', () => {
  const cgroup = () => ({ bytes: 2 * GiB, source: 'cgroup v2' as const });
  assert.equal(loadWorkerConfig(base, cgroup).memory.maxCachedWorkflows, 2700);
  const fromSetting = loadWorkerConfig({ ...base, WORKER_MEMORY_LIMIT: '1Gi' }, cgroup);
  assert.equal(fromSetting.memory.maxCachedWorkflows, 1100);
  assert.equal(fromSetting.memory.limit?.source, 'WORKER_MEMORY_LIMIT');
  const explicit = loadWorkerConfig({ ...base, WORKER_MAX_CACHED_WORKFLOWS: '500' }, cgroup);
  assert.equal(explicit.memory.maxCachedWorkflows, 500);
  assert.equal(explicit.memory.workflowHeapMiB, workflowHeapFor(500));
  const none = loadWorkerConfig(base, () => null);
  assert.equal(none.memory.maxCachedWorkflows, DEFAULT_MAX_CACHED_WORKFLOWS);
  assert.equal(none.memory.workflowHeapMiB, null);
  assert.throws(
    () => loadWorkerConfig({ ...base, WORKER_MEMORY_LIMIT: 'plenty' }, cgroup),
    (err: unknown) => err instanceof ConfigError && err.setting === 'WORKER_MEMORY_LIMIT',
  );
});
