/**
 * The upgrade check of an unversioned worker (decision 0022): a 1.1 job queued for the frozen
 * quota does not replay on this build, so the worker refuses to poll, says so in one line and
 * exits 3; `WORKER_UPGRADE_CHECK=off` starts it anyway.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { statusQuery, WORKFLOW_TYPE } from '../../src/contract.js';
import {
  onCleanup,
  spawnTs,
  startSimulatedWorld,
  startWorkerProcess,
  uniqueId,
  waitFor,
  type SimulatedWorld,
} from '../harness.js';
import { releaseSource, type RELEASES } from '../release-source.js';

/** The worker of a release, from its own sources (this checkout's node_modules). */
function releaseWorker(release: keyof typeof RELEASES): string {
  return join(releaseSource(release), 'src/worker.ts');
}

async function clientFor(world: SimulatedWorld): Promise<Client> {
  const connection = await Connection.connect({ address: world.env.address });
  onCleanup(() => connection.close());
  return new Client({ connection, namespace: world.env.namespace });
}

/** The new pod's environment: the old one's settings and task queue, ports of its own. */
function nextPod(world: SimulatedWorld, settings: Record<string, string>, taskQueue: string) {
  return world.workerEnv({ ...settings, TEMPORAL_TASK_QUEUE: taskQueue });
}

test('the check refuses while a 1.1 job queued for the frozen quota is open, in one line, and exits 3', async () => {
  const world = await startSimulatedWorld('upgrade-refused', { durationMs: 60_000 });
  // One use an hour: the second job queues in 1.1's quota, a path this build's code no longer has.
  const env = await world.workerEnv({ AGENT_API_PROJECT_QUOTA: '1/1h' });
  const client = await clientFor(world);
  await startWorkerProcess(env, { what: 'the 1.1 worker', script: releaseWorker('1.1') });
  const project = world.project();
  for (const i of [0, 1]) {
    await client.workflow.start(WORKFLOW_TYPE, {
      taskQueue: env.taskQueue,
      workflowId: uniqueId(`refused-${i}`),
      args: [{ projectId: project, prompt: `Document module ${i}` }],
    });
  }
  await waitFor(() => world.sim.stats().jobsCreated === 1, { what: 'the first job created' });
  const waiting = await waitFor(
    async () => {
      for await (const run of client.workflow.list({
        query: `TaskQueue = '${env.taskQueue}' AND ExecutionStatus = 'Running' AND WorkflowType = '${WORKFLOW_TYPE}'`,
      })) {
        const { phase } = await client.workflow.getHandle(run.workflowId).query(statusQuery);
        if (phase === 'queued') return run.workflowId;
      }
      return undefined;
    },
    { what: 'a job queued for the quota', timeoutMs: 60_000 },
  );
  const pod = await nextPod(world, {}, env.taskQueue);
  const next = spawnTs('src/worker.ts', [], { ...pod.vars, AGENT_API_PROJECT_QUOTA: '1/1h' });
  assert.equal(await next.exited, 3, `this build refuses:\n${next.stderr()}`);
  const lines = next.stderr().trim().split('\n');
  assert.equal(lines.length, 1, `one line: ${next.stderr()}`);
  const { msg: message } = JSON.parse(lines[0]!) as { msg: string };
  assert.match(message, /^upgrade refused: 1 open workflow\(s\) this build cannot take over: /);
  assert.ok(message.includes(`${waiting} (${WORKFLOW_TYPE}: does not replay on this build`), message);
  assert.match(message, /WORKER_UPGRADE_CHECK=off/);
  process.stderr.write(`[upgrade] the check's refusal: ${message}\n`);
  // The override: a person who decided otherwise starts it anyway.
  const forced = await startWorkerProcess(
    { ...pod, vars: { ...pod.vars, AGENT_API_PROJECT_QUOTA: '1/1h', WORKER_UPGRADE_CHECK: 'off' } },
    { what: 'this build with the check off' },
  );
  forced.child.kill('SIGTERM');
  assert.equal(await forced.exited, 0);
});
