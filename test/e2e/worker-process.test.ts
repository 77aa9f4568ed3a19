/**
 * The worker as a real process (`src/worker.ts`): configuration errors, health and metrics
 * endpoints, and a graceful drain on SIGTERM while an activity is in flight.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WORKFLOW_TYPE, type AgentJobInput } from '../../src/contract.js';
import type { agentJobWorkflow } from '../../src/workflows/index.js';
import { spawnTs, startSimulatedWorld, uniqueId, waitFor } from '../harness.js';
import { createdJobs } from '../simulator-stats.js';

const world = await startSimulatedWorld('worker-test', { durationMs: 200 });
const { env, sim, apiKey: API_KEY } = world;

function workerEnv(overrides: NodeJS.ProcessEnv = {}) {
  return world.workerEnv({ WORKER_SHUTDOWN_GRACE: '20s', ...overrides });
}

describe('worker process', { concurrency: 3 }, () => {
  const badSettings: Array<[string, NodeJS.ProcessEnv, RegExp]> = [
    ['no API base URL', { AGENT_API_BASE_URL: '' }, /AGENT_API_BASE_URL: is required/],
    ['no API key', { AGENT_API_KEY: '' }, /AGENT_API_KEY: is required/],
    [
      'an unreadable key file',
      { AGENT_API_KEY: '', AGENT_API_KEY_FILE: '/nonexistent/key' },
      /AGENT_API_KEY_FILE: \/nonexistent\/key: cannot read it/,
    ],
    [
      'a bad concurrency',
      { WORKER_MAX_CONCURRENT_ACTIVITIES: 'lots' },
      /WORKER_MAX_CONCURRENT_ACTIVITIES: must be a whole number/,
    ],
    [
      'a bad ambiguous-create policy',
      { AGENT_API_AMBIGUOUS_CREATE: 'maybe' },
      /AGENT_API_AMBIGUOUS_CREATE: must be "retry" or "fail"/,
    ],
    [
      'a base URL that is not http',
      { AGENT_API_BASE_URL: 'ftp://example.com' },
      /AGENT_API_BASE_URL: must be an http\(s\) URL/,
    ],
    [
      'an http base URL to a host beyond loopback (the key would travel in cleartext)',
      { AGENT_API_BASE_URL: 'http://agent-api.example.com' },
      /AGENT_API_BASE_URL: .*cleartext.*AGENT_API_ALLOW_INSECURE_HTTP=true/,
    ],
  ];
  for (const [name, overrides, expected] of badSettings) {
    test(`refuses ${name} with one clear line and exit code 2, before connecting`, async () => {
      // An address nothing listens on: the process must stop before it tries to connect.
      const { vars } = await workerEnv({ TEMPORAL_ADDRESS: '127.0.0.1:1', ...overrides });
      const worker = spawnTs('src/worker.ts', [], vars);
      assert.equal(await worker.exited, 2);
      const lines = worker.stderr().trim().split('\n');
      assert.equal(lines.length, 1, `one line, got:\n${worker.stderr()}`);
      const line = JSON.parse(lines[0] ?? '{}') as { level: string; msg: string };
      assert.equal(line.level, 'ERROR');
      assert.match(line.msg, expected);
      assert.ok(!worker.stderr().includes(API_KEY) && !worker.stdout().includes(API_KEY));
    });
  }

  test('serves health and metrics, runs a job, and drains an in-flight activity on SIGTERM, exiting 0', async () => {
    const { vars, taskQueue, healthPort, metricsPort } = await workerEnv();
    const worker = spawnTs('src/worker.ts', [], vars);
    await worker.waitForOutput(/"worker running"/, 'the worker to run');
    const ready = await fetch(`http://127.0.0.1:${healthPort}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(((await ready.json()) as { state: string }).state, 'RUNNING');
    assert.equal((await fetch(`http://127.0.0.1:${healthPort}/healthz`)).status, 200);

    // One job end to end, so the project's counters have something to count.
    const projectId = uniqueId('docs');
    const done = await env.client.workflow.execute<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
      taskQueue,
      workflowId: uniqueId('agent-job-test'),
      args: [{ projectId, prompt: 'Count me', poll: { initialInterval: 50 } } satisfies AgentJobInput],
    });
    assert.equal(done.status, 'completed');
    const metrics = await waitFor(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
        return /agent_jobs_created_total\{[^}]*\} 1/.test(text) && /agent_job_polls_total/.test(text)
          ? text
          : null;
      },
      { what: 'the project counters on /metrics' },
    );
    assert.match(metrics, /temporal_worker_task_slots_available|temporal_request/);
    assert.match(metrics, /agent_job_terminal_total\{[^}]*status="completed"[^}]*\} 1/);

    // A slow create: SIGTERM arrives while the activity is in flight, and the worker lets it finish.
    const slowProject = uniqueId('docs');
    sim.setScenario(slowProject, { latencyMs: 2_000, durationMs: 60_000 });
    const handle = await env.client.workflow.start<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
      taskQueue,
      workflowId: uniqueId('agent-job-test'),
      args: [{ projectId: slowProject, prompt: 'Slow create' }],
    });
    await waitFor(
      async () =>
        (await handle.describe()).raw.pendingActivities?.some((activity) => activity.lastStartedTime),
      { what: 'the create activity to be in flight' },
    );
    worker.child.kill('SIGTERM');
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => null))?.status !== 200,
      {
        what: 'readiness to turn off during the drain',
      },
    );
    assert.equal(await worker.exited, 0);
    assert.match(worker.stdout(), /"worker stopped"/);
    const events = (await handle.fetchHistory()).events ?? [];
    assert.ok(
      events.some((e) => e.activityTaskCompletedEventAttributes),
      'the in-flight create completed during the drain',
    );
    assert.equal(createdJobs(sim, slowProject), 1);
    assert.ok(!worker.stdout().includes(API_KEY) && !worker.stderr().includes(API_KEY), 'no key in the logs');
    await handle.terminate('test over');
  });

  test('an outage in the log: its start and its end, not a line per failed attempt', async () => {
    const { vars, taskQueue } = await workerEnv();
    const worker = spawnTs('src/worker.ts', [], vars);
    await worker.waitForOutput(/"worker running"/, 'the worker to run');
    const projectId = uniqueId('docs');
    // A Retry-After past the longest poll wait comes back to the workflow, which waits it on its own
    // timer and logs the outage (shorter ones the server retries: the UI shows the pending attempts).
    sim.setScenario(projectId, {
      faults: {
        rules: [{ endpoint: 'get', first: 4, kind: 'status', status: 503, retryAfter: { seconds: 2 } }],
      },
    });
    const done = await env.client.workflow.execute<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
      taskQueue,
      workflowId: uniqueId('agent-job-test'),
      args: [
        {
          projectId,
          prompt: 'Through an outage',
          poll: { initialInterval: 50, maxInterval: 1_000 },
        } satisfies AgentJobInput,
      ],
    });
    assert.equal(done.status, 'completed');
    worker.child.kill('SIGTERM');
    assert.equal(await worker.exited, 0);
    const lines = `${worker.stdout()}\n${worker.stderr()}`
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: string; msg: string });
    const loud = lines.filter((line) => line.level === 'WARN' || line.level === 'ERROR');
    assert.deepEqual(
      loud.map((line) => line.msg),
      ['Agent Job API call failed; retrying until it answers or the deadline'],
      'four 503s are one warning',
    );
    assert.equal(lines.filter((line) => line.msg === 'the Agent Job API answers again').length, 1);
  });
});
