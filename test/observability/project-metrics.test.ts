/**
 * The per-project view as an operator sees it: the real worker process with its quota on and
 * METRICS_MAX_PROJECTS=2, jobs of three projects against the simulator (one answers a 429 once),
 * `/metrics` read over HTTP, and a real Prometheus (Debian's) scraping the worker and answering
 * every query of the Grafana dashboard in deploy/grafana.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { freePort } from '../../dev/dev-server.js';
import { findOnPath } from '../../dev/temporal-cli.js';
import { startAgentJob } from '../../src/client/index.js';
import { FailureType } from '../../src/contract.js';
import { OTHER_PROJECTS } from '../../src/observability/project-metrics.js';
import { onCleanup, ROOT, spawnTs, startSimulatedWorld, uniqueId, waitFor } from '../harness.js';

/** A Prometheus server scraping `target` every second, stopped after the file's tests. */
async function startPrometheus(target: string): Promise<{ query(expr: string): Promise<PromSample[]> }> {
  const binary = findOnPath('prometheus');
  assert.ok(
    binary,
    "Prometheus is not installed (Debian: apt-get install -y prometheus; npm test's setup does it)",
  );
  const dir = mkdtempSync(join(tmpdir(), 'prometheus-test-'));
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    JSON.stringify({
      global: { scrape_interval: '1s' },
      scrape_configs: [{ job_name: 'worker', static_configs: [{ targets: [target] }] }],
    }),
  );
  const port = await freePort();
  const child = spawn(
    binary,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit');
  onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  });
  const query = async (expr: string) => {
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await res.json()) as { status: string; error?: string; data: { result: PromSample[] } };
    assert.equal(body.status, 'success', `${expr}: ${body.error}`);
    return body.data.result;
  };
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited: ${stderr}`);
      return (await query('up{job="worker"} == 1')).length === 1;
    },
    { what: 'Prometheus to scrape the worker', timeoutMs: 30_000, intervalMs: 200 },
  );
  return { query };
}

interface PromSample {
  metric: Record<string, string>;
  value: [number, string];
}

/** The dashboard's queries, with Grafana's variables set as a viewer of every project would have them. */
function dashboardQueries(): string[] {
  const dashboard = JSON.parse(
    readFileSync(join(ROOT, 'deploy/grafana/agent-jobs-per-project.json'), 'utf8'),
  ) as { panels: { targets?: { expr: string }[] }[] };
  return dashboard.panels
    .flatMap((panel) => panel.targets ?? [])
    .map(({ expr }) =>
      expr.replaceAll('$project', '.*').replaceAll('$__rate_interval', '1m').replaceAll('$__range', '5m'),
    );
}

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
  const { env, sim, workerEnv } = await startSimulatedWorld('metrics', { durationMs: 200 });
  const busy = uniqueId('busy');
  const limited = uniqueId('limited');
  const third = uniqueId('third');
  sim.setScenario(limited, {
    faults: {
      rules: [
        { endpoint: 'create', kind: 'status', status: 429, first: 1 },
        // One read refused (a key losing its scope for a moment): the workflow waits for the key.
        { endpoint: 'get', kind: 'status', status: 403, first: 1 },
      ],
    },
  });
  // Its agent job fails: an end without a pull request, under the failure type.
  sim.setScenario(third, { outcome: 'failed' });
  const { vars, taskQueue, metricsPort } = await workerEnv({
    AGENT_API_PROJECT_QUOTA: '2/3s',
    METRICS_MAX_PROJECTS: '2',
  });
  const worker = spawnTs('src/worker.ts', [], vars);
  await worker.waitForOutput(/worker running/, 'the worker to run');
  const prometheus = await startPrometheus(`127.0.0.1:${metricsPort}`);

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
  const ends = await Promise.allSettled(handles.map((handle) => handle.result()));
  assert.ok(ends.slice(0, 4).every((end) => end.status === 'fulfilled' && end.value.prLink !== null));
  assert.equal(ends[4]?.status, 'rejected');
  // The dashboard's quantiles are rates: once Prometheus holds the busy project's histograms, one
  // more job of it adds an observation it sees happen.
  await waitFor(
    async () =>
      (await prometheus.query(`agent_project_time_to_pr_seconds_count{project="${busy}"} == 3`)).length ===
        1 &&
      (await prometheus.query(`agent_project_quota_wait_seconds_count{project="${busy}"} == 3`)).length === 1,
    { what: "Prometheus to hold the busy project's histograms", intervalMs: 200 },
  );
  assert.notEqual((await (await start(busy)).result()).prLink, null);

  const scrape = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((res) => res.text());
  // Workflow reports reach the meter when their task completes; wait for the last of them.
  const text = await waitFor(
    async () => {
      const body = await scrape();
      const other = { project: OTHER_PROJECTS, outcome: FailureType.AgentJobFailed };
      const busyDone = valueOf(body, 'agent_project_jobs_ended_total', {
        project: busy,
        outcome: 'completed',
      });
      return valueOf(body, 'agent_project_jobs_ended_total', other) === 1 && busyDone === 4 ? body : null;
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
  assert.equal(series('agent_project_jobs_ended_total', { project: busy, outcome: 'completed' }), 4);
  assert.equal(series('agent_project_jobs_ended_total', { project: limited, outcome: 'completed' }), 1);
  assert.equal(series('agent_project_time_to_pr_seconds_count', { project: busy }), 4);
  // The failed job counts in the job time, not in the time to a pull request.
  assert.equal(series('agent_project_job_seconds_count', { project: OTHER_PROJECTS }), 1);
  assert.equal(valueOf(text, 'agent_project_time_to_pr_seconds_count', { project: OTHER_PROJECTS }), null);
  assert.ok(series('agent_project_time_to_pr_seconds_sum', { project: busy }) > 0);
  assert.equal(series('agent_project_api_uses_total', { project: busy, kind: 'create' }), 4);
  assert.equal(series('agent_project_rate_limited_total', { project: limited, operation: 'createJob' }), 1);
  // The limited project's workflow waited for a working key, then went on: counted, then not.
  assert.equal(series('agent_project_workflows_waiting_for_key', { project: limited }), 0);
  assert.equal(series('agent_project_quota_budget_uses', { project: busy }), 2);
  assert.ok(series('agent_project_quota_used_uses', { project: busy }) <= 2);
  assert.equal(series('agent_project_quota_queued_jobs', { project: busy }), 0);
  // Two uses per 3 s: the third create of the busy project waited for the window.
  assert.ok(series('agent_project_quota_wait_seconds_count', { project: busy }) >= 4);
  assert.ok(series('agent_project_quota_wait_seconds_sum', { project: busy }) >= 1);
  // Nothing carries the third project's own ID: the labels are bounded.
  assert.ok(!text.includes(third), 'the third project has a label of its own');

  // Prometheus has the last reports, then every dashboard query has a number to show.
  await waitFor(
    async () =>
      (await prometheus.query(`agent_project_jobs_ended_total{project="${busy}",outcome="completed"} == 4`))
        .length === 1,
    { what: 'Prometheus to scrape the last job end', intervalMs: 200 },
  );
  for (const expr of dashboardQueries()) {
    const samples = await prometheus.query(expr);
    assert.ok(
      samples.some((sample) => Number.isFinite(Number(sample.value[1]))),
      `the dashboard query ${expr} has no value: ${JSON.stringify(samples)}`,
    );
  }

  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
});
