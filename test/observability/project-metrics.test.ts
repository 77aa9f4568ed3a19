/**
 * The per-project view as an operator scrapes it: the real worker process with its quota on and
 * METRICS_MAX_PROJECTS=2, jobs of three projects against the simulator (one answers a 429 once), and
 * `/metrics` read over HTTP. Every series the Grafana dashboard queries is checked here.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { startAgentJob } from '../../src/client/index.js';
import { OTHER_PROJECTS } from '../../src/observability/project-metrics.js';
import { spawnTs, startTestSimulator, temporalEnv, uniqueId, waitFor, workerProcessEnv } from '../harness.js';

/** The value of the one series of `name` whose labels include every pair of `labels`, or null. */
function valueOf(text: string, name: string, labels: Record<string, string>): number | null {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const inner = line.slice(name.length + 1, line.lastIndexOf('}'));
    if (Object.entries(labels).every(([key, value]) => inner.includes(`${key}="${value}"`))) {
      return Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return null;
}

test('per-project metrics: outcomes, time to PR, uses against the budget, 429s, the queue and its wait, bounded labels', async () => {
  const env = await temporalEnv();
  const apiKey = `metrics-key-${randomUUID()}`;
  const sim = await startTestSimulator({ apiKeys: [apiKey], defaultScenario: { durationMs: 200 } });
  const busy = uniqueId('busy');
  const limited = uniqueId('limited');
  const third = uniqueId('third');
  sim.setScenario(limited, {
    faults: { rules: [{ endpoint: 'create', kind: 'status', status: 429, first: 1 }] },
  });
  const { vars, taskQueue, metricsPort } = await workerProcessEnv(
    env,
    { url: sim.url, apiKey },
    { AGENT_API_PROJECT_QUOTA: '2/3s', METRICS_MAX_PROJECTS: '2' },
  );
  const worker = spawnTs('src/worker.ts', [], vars);
  await worker.waitForOutput(/worker running/, 'the worker to run');

  const start = (projectId: string) =>
    startAgentJob(
      env.client,
      { projectId, prompt: 'Document it', poll: { initialInterval: '100ms' } },
      { taskQueue },
    );
  // The busy project first, so that it and the limited one hold the two labels.
  const handles = [await start(busy), await start(busy), await start(busy)];
  handles.push(await start(limited));
  await waitFor(() => sim.stats().jobsPerProject[limited] === 1, {
    what: 'the limited project to get its job',
  });
  handles.push(await start(third));
  const results = await Promise.all(handles.map((handle) => handle.result()));
  assert.ok(results.every((result) => result.prLink !== null));

  const scrape = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((res) => res.text());
  // Workflow reports reach the meter when their task completes; wait for the last of them.
  const text = await waitFor(
    async () => {
      const body = await scrape();
      return valueOf(body, 'agent_project_jobs_ended_total', { project: OTHER_PROJECTS }) === 1 ? body : null;
    },
    { what: 'the third project counted as _other' },
  );
  const series = (name: string, labels: Record<string, string>) => {
    const value = valueOf(text, name, labels);
    assert.notEqual(
      value,
      null,
      `${name} ${JSON.stringify(labels)} in:\n${text
        .split('\n')
        .filter((l) => l.startsWith('agent_project'))
        .join('\n')}`,
    );
    return value as number;
  };
  assert.equal(series('agent_project_jobs_ended_total', { project: busy, outcome: 'completed' }), 3);
  assert.equal(series('agent_project_jobs_ended_total', { project: limited, outcome: 'completed' }), 1);
  assert.equal(series('agent_project_time_to_pr_seconds_count', { project: busy }), 3);
  assert.ok(series('agent_project_time_to_pr_seconds_sum', { project: busy }) > 0);
  assert.equal(series('agent_project_api_uses_total', { project: busy, kind: 'create' }), 3);
  assert.equal(series('agent_project_rate_limited_total', { project: limited, operation: 'createJob' }), 1);
  assert.equal(series('agent_project_quota_budget_uses', { project: busy }), 2);
  assert.ok(series('agent_project_quota_used_uses', { project: busy }) <= 2);
  assert.equal(series('agent_project_quota_queued_jobs', { project: busy }), 0);
  // Two uses per 3 s: the third create of the busy project waited for the window.
  assert.ok(series('agent_project_quota_wait_seconds_count', { project: busy }) >= 3);
  assert.ok(series('agent_project_quota_wait_seconds_sum', { project: busy }) >= 1);
  // Nothing carries the third project's own ID: the labels are bounded.
  assert.ok(!text.includes(third), 'the third project has a label of its own');

  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
});
