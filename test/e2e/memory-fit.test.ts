/**
 * A worker given the memory limit of deploy/k8s holds a full workflow cache under that limit: the
 * worker process sizes its cache from WORKER_MEMORY_LIMIT (as it would from the pod's cgroup),
 * then as many agent jobs as the cache holds stay open at once, every one cached, while the
 * process's peak resident memory (VmHWM, start-up included) is read from /proc.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { sampleProcess } from '../../bench/resources.js';
import { startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import { cacheSizeFor, parseMemoryQuantity, workflowHeapFor } from '../../src/config/memory.js';
import { ROOT, startSimulatedWorld, startWorkerProcess, uniqueId, waitFor } from '../harness.js';
import { createdJobs } from '../simulator-stats.js';

/** Workflows started at once; the dev server takes them as fast as it can. */
const START_BATCH = 25;
const { env, sim, workerEnv } = await startSimulatedWorld('memory-test', {
  // Open for the whole test: every workflow stays in the cache, waiting on its poll timer.
  simulator: { createsPerProjectPerHour: 0, defaultScenario: { durationMs: 3_600_000, outcome: 'pr' } },
});

/** The memory limit the Deployment gives the worker container. */
function manifestLimit(): number {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'deploy/k8s/worker-deployment.yaml'), 'utf8'));
  const deployment = docs.map((d) => d.toJS() as Record<string, never>).find((d) => d.kind === 'Deployment');
  const limit = (
    deployment as unknown as {
      spec: { template: { spec: { containers: { resources: { limits: { memory: string } } }[] } } };
    }
  ).spec.template.spec.containers[0]?.resources.limits.memory;
  const bytes = parseMemoryQuantity(limit ?? '');
  assert.ok(bytes !== null, 'the Deployment sets a memory limit');
  return bytes;
}

async function metric(port: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+(?:\\.\\d+)?)`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

test('a worker with the manifests’ memory limit holds its full workflow cache under that limit', async () => {
  const limit = manifestLimit();
  const cache = cacheSizeFor(limit);
  const limited = await workerEnv({ WORKER_MEMORY_LIMIT: String(limit) });
  const { vars, metricsPort } = limited;
  const worker = await startWorkerProcess(limited);
  assert.match(worker.stdout(), new RegExp(`"maxCachedWorkflows":${cache}\\b`));
  assert.match(worker.stdout(), /"memoryLimitFrom":"WORKER_MEMORY_LIMIT"/);
  assert.match(worker.stdout(), new RegExp(`"workflowHeapMiB":${workflowHeapFor(cache)}\\b`));

  const projectId = uniqueId('docs-memory');
  const handles: AgentJobHandle[] = [];
  const started = Date.now();
  for (let i = 0; i < cache; i += START_BATCH) {
    const batch = Array.from({ length: Math.min(START_BATCH, cache - i) }, (_, j) =>
      startAgentJob(
        env.client,
        { projectId, prompt: `Memory job ${i + j}`, poll: { initialInterval: '10m', backoffCoefficient: 1 } },
        { taskQueue: vars.TEMPORAL_TASK_QUEUE, key: `job-${i + j}` },
      ),
    );
    handles.push(...(await Promise.all(batch)));
  }
  try {
    await waitFor(() => createdJobs(sim, projectId) === cache, {
      what: `${cache} agent jobs created`,
      timeoutMs: 600_000,
      intervalMs: 500,
    });
    const cached = await waitFor(
      async () => {
        const size = await metric(metricsPort, 'temporal_sticky_cache_size');
        return size >= cache ? size : 0;
      },
      { what: `the worker to cache all ${cache} workflows`, timeoutMs: 120_000, intervalMs: 500 },
    );
    const pid = worker.child.pid;
    assert.ok(pid !== undefined);
    const { rssMiB, peakRssMiB } = sampleProcess(pid);
    const limitMiB = limit / 2 ** 20;
    process.stdout.write(
      `# memory: ${cached} workflows cached (cache ${cache} for a ${limitMiB} MiB limit) after ${((Date.now() - started) / 1000).toFixed(0)}s; ` +
        `RSS ${rssMiB.toFixed(0)} MiB, peak ${peakRssMiB.toFixed(0)} MiB (${((peakRssMiB / limitMiB) * 100).toFixed(0)}% of the limit)\n`,
    );
    assert.ok(peakRssMiB < limitMiB, `peak RSS ${peakRssMiB.toFixed(0)} MiB must stay under ${limitMiB} MiB`);
  } finally {
    // The suite's server outlives this file: leave no workflow running on it.
    for (let i = 0; i < handles.length; i += 50) {
      await Promise.all(
        handles.slice(i, i + 50).map((handle) => handle.terminate('memory test done').catch(() => undefined)),
      );
    }
    worker.child.kill('SIGTERM');
    await worker.exited;
  }
});
