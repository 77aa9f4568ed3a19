/**
 * The memory sizing rule (src/config/memory.ts), the limits of deploy/k8s and docker-compose.yml,
 * the figures the README and the manifests' comments quote, and the memory the benchmark measured
 * (docs/PERFORMANCE.md) must agree: this fails when one of them changes alone.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { loadWorkerConfig } from '../../src/config/worker.js';
import {
  BASE_MIB,
  cacheSizeFor,
  HEADROOM,
  MIB_PER_1000_WORKFLOWS,
  parseMemoryQuantity,
} from '../../src/config/memory.js';
import { ROOT } from '../harness.js';

const MiB = 2 ** 20;
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

interface Container {
  resources?: { requests?: { memory?: string }; limits?: { memory?: string } };
  env?: { name: string; value?: string }[];
}

function k8sWorker(): { limit: number; request: number; env: Record<string, string> } {
  const docs = parseAllDocuments(read('deploy/k8s/worker-deployment.yaml')).map((d) => d.toJS() as unknown);
  const deployment = docs.find((d) => (d as { kind?: string }).kind === 'Deployment') as {
    spec: { template: { spec: { containers: Container[] } } };
  };
  const container = deployment.spec.template.spec.containers[0] as Container;
  const limit = parseMemoryQuantity(container.resources?.limits?.memory ?? '');
  const request = parseMemoryQuantity(container.resources?.requests?.memory ?? '');
  assert.ok(limit !== null && request !== null, 'the worker sets a memory request and limit');
  const configMap = parse(read('deploy/k8s/configmap.yaml')) as { data: Record<string, string> };
  const literal = Object.fromEntries((container.env ?? []).map((e) => [e.name, e.value ?? '']));
  return { limit, request, env: { ...configMap.data, ...literal } };
}

/** Compose byte values are binary: `1g` is 1 GiB. */
function composeBytes(value: string): number {
  const match = /^(\d+)([bkmg])?$/i.exec(value.trim());
  assert.ok(match, `"${value}" is not a compose byte value`);
  const power = { b: 0, k: 1, m: 2, g: 3 }[(match[2] ?? 'b').toLowerCase() as 'b'];
  return Number(match[1]) * 1024 ** power;
}

function composeWorkerLimit(): number {
  const compose = parse(read('docker-compose.yml'), { merge: true }) as {
    services: { worker: { deploy?: { resources?: { limits?: { memory?: string } } } } };
  };
  const memory = compose.services.worker.deploy?.resources?.limits?.memory;
  assert.ok(memory, 'docker-compose.yml gives the worker a memory limit');
  return composeBytes(String(memory));
}

/** "this worker" rows of the benchmark's tables: N, median peak RSS and its worst repetition. */
function measured(): { n: number; peakMiB: number; worstPeakMiB: number }[] {
  const rows: { n: number; peakMiB: number; worstPeakMiB: number }[] = [];
  let header: string[] | null = null;
  for (const line of read('docs/PERFORMANCE.md').split('\n')) {
    if (!line.startsWith('|')) {
      header = null;
      continue;
    }
    const cells = line
      .slice(1, -1)
      .split('|')
      .map((c) => c.trim());
    if (cells.includes('peak RSS MiB') && cells.includes('N')) {
      header = cells;
      continue;
    }
    if (header === null || !cells.includes('this worker')) continue;
    const peak = cells[header.indexOf('peak RSS MiB')] ?? '';
    const [median, , worst] = (/^(\d+)(?: \((\d+)–(\d+)\))?/.exec(peak) ?? []).slice(1).map(Number);
    if (median === undefined || Number.isNaN(median)) continue;
    rows.push({ n: Number(cells[0]), peakMiB: median, worstPeakMiB: Number.isNaN(worst) ? median : worst! });
  }
  return rows;
}

const modelMiB = (cached: number) => BASE_MIB + (cached * MIB_PER_1000_WORKFLOWS) / 1000;

test('the Kubernetes and compose workers get the same memory limit, requested in full', () => {
  const k8s = k8sWorker();
  assert.equal(composeWorkerLimit(), k8s.limit);
  assert.equal(k8s.request, k8s.limit);
});

test('the worker sizes a cache from the manifests that fits under their limit', () => {
  const { limit, env } = k8sWorker();
  // The ring is a Secret mounted in the pod; the sizing does not read it.
  const config = loadWorkerConfig(
    { ...env, AGENT_API_KEY_FILE: '', AGENT_API_KEY: 'placeholder', TEMPORAL_PAYLOAD_KEYS_FILE: '' },
    () => ({
      bytes: limit,
      source: 'cgroup v2',
    }),
  );
  assert.equal(
    config.memory.maxCachedWorkflows,
    cacheSizeFor(limit),
    'the manifests leave the cache to the rule',
  );
  assert.ok(modelMiB(config.memory.maxCachedWorkflows) <= (limit / MiB) * (1 - HEADROOM));
  assert.ok(config.memory.workflowHeapMiB !== null && config.memory.workflowHeapMiB < limit / MiB);
});

test('the rule predicts at least every peak the benchmark measured from N=1,000 up', () => {
  const rows = measured().filter((row) => row.n >= 1000);
  assert.ok(rows.length >= 2, 'docs/PERFORMANCE.md has memory figures for N >= 1,000');
  for (const row of rows) {
    assert.ok(
      modelMiB(row.n) >= row.peakMiB,
      `N=${row.n}: measured ${row.peakMiB} MiB, the rule plans ${modelMiB(row.n)} MiB`,
    );
    assert.ok(
      modelMiB(row.n) / (1 - HEADROOM) >= row.worstPeakMiB,
      `N=${row.n}: the worst repetition (${row.worstPeakMiB} MiB) must stay within the headroom`,
    );
  }
});

test('the README, the manifests and the compose file quote the figures of the rule', () => {
  const { limit } = k8sWorker();
  const cache = cacheSizeFor(limit).toLocaleString('en-US');
  const readme = read('README.md');
  const rule = /\(limit × ([\d.]+) − (\d+) MiB\) ÷ (\d+) MiB per 1,000/.exec(readme);
  assert.ok(rule, 'the README states the rule');
  assert.deepEqual(rule.slice(1).map(Number), [1 - HEADROOM, BASE_MIB, MIB_PER_1000_WORKFLOWS]);
  const pod =
    /A (\d+) GiB pod, the limit of `deploy\/k8s\/` and `docker-compose.yml`, caches ([\d,]+) workflows/.exec(
      readme.replace(/\s+/g, ' '),
    );
  assert.ok(pod, 'the README states what a pod of the manifests caches');
  assert.equal(Number(pod[1]) * 1024 * MiB, limit);
  assert.equal(pod[2], cache);
  for (const file of [
    'deploy/k8s/configmap.yaml',
    'deploy/k8s/worker-deployment.yaml',
    'docker-compose.yml',
  ]) {
    const quoted = [...read(file).matchAll(/([\d,]+) workflows/g)].map((m) => m[1]);
    assert.ok(quoted.length > 0, `${file} says what the cache holds`);
    for (const figure of quoted)
      assert.equal(figure, cache, `${file} quotes ${figure}, the rule gives ${cache}`);
  }
});
