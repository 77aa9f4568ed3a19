/**
 * Upgrades with jobs in flight in the deployments that run unversioned (docker-compose.yml,
 * deploy/k8s, `npm run worker`; decision 0022). The previous release's worker (1.2.0) runs jobs;
 * this build's worker takes over the way each mode does it: Kubernetes starts the new pod first and
 * stops an old one once the new is ready, compose and a person at `npm run worker` stop the old one
 * first. The new worker replays every open workflow before it polls. Every job completes, created
 * once, began on 1.2.0 and ended here, and no workflow task fails in any history. Each mode runs
 * with the settings its own files give (the project quota on, the codec where the files turn it
 * on). And the check's refusal: a 1.1 job queued for the frozen quota, and that quota's run, do not
 * replay on this build; the worker says so in one line and exits 3.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { parse, parseAllDocuments } from 'yaml';
import { statusQuery, WORKFLOW_TYPE } from '../../src/contract.js';
import { payloadDataConverter } from '../../src/payload-codec/index.js';
import type { agentJobWorkflow } from '../../src/workflows/index.js';
import {
  onCleanup,
  ROOT,
  spawnTs,
  startSimulatedWorld,
  startWorkerProcess,
  uniqueId,
  waitFor,
  type SimulatedWorld,
  type TestProcess,
} from '../harness.js';
import { releaseSource, type RELEASES } from '../release-source.js';

const EventType = proto.temporal.api.enums.v1.EventType;
type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

/** The settings a deployment mode's own files give the worker that bear on an upgrade. */
function modeSettings(mode: 'compose' | 'k8s' | 'npm run worker'): Record<string, string> {
  if (mode === 'npm run worker') return {};
  if (mode === 'compose') {
    const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
      services: { worker: { environment: Record<string, string> } };
    };
    return pick(compose.services.worker.environment);
  }
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'deploy/k8s/configmap.yaml'), 'utf8'));
  const data = (docs[0]!.toJS() as { data: Record<string, string> }).data;
  const deployment = parse(readFileSync(join(ROOT, 'deploy/k8s/worker-deployment.yaml'), 'utf8')) as {
    spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
  };
  const env = Object.fromEntries(
    deployment.spec.template.spec.containers[0]!.env.flatMap(({ name, value }) =>
      value === undefined ? [] : [[name, value]],
    ),
  );
  return pick({ ...data, ...env });
}

/**
 * What bears on an upgrade; addresses, ports and keys are the test's own. A key ring's path becomes
 * a ring of the test's.
 */
function pick(vars: Record<string, string>): Record<string, string> {
  const kept = Object.entries(vars).filter(([name]) =>
    /^(TEMPORAL_WORKER_VERSIONING|WORKER_UPGRADE_CHECK|WORKER_SHUTDOWN_GRACE|AGENT_API_PROJECT_QUOTA.*|TEMPORAL_PAYLOAD_KEYS_FILE)$/.test(
      name,
    ),
  );
  const out: Record<string, string> = Object.fromEntries(kept);
  // The files leave the quota at its default, on (100 uses per project per hour); the harness
  // turns it off unless told.
  out.AGENT_API_PROJECT_QUOTA ??= '100/1h';
  if (out.TEMPORAL_PAYLOAD_KEYS_FILE !== undefined) out.TEMPORAL_PAYLOAD_KEYS_FILE = keyRing();
  return out;
}

function keyRing(): string {
  const dir = mkdtempSync(join(tmpdir(), 'upgrade-keys-'));
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'payload-keys');
  writeFileSync(file, `k1 ${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  return file;
}

/** The worker of a release, from its own sources (this checkout's node_modules). */
function releaseWorker(release: keyof typeof RELEASES): string {
  return join(releaseSource(release), 'src/worker.ts');
}

/** Every event type of every workflow on `taskQueue`, open or closed, by workflow ID. */
async function historiesOn(client: Client, taskQueue: string) {
  const out = new Map<string, { type: string; events: HistoryEvent[] }>();
  for await (const run of client.workflow.list({ query: `TaskQueue = '${taskQueue}'` })) {
    const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
    out.set(`${run.workflowId}/${run.runId}`, { type: run.type, events: history.events ?? [] });
  }
  return out;
}

/** The identities of the workers that completed the workflow tasks of `events`, in order. */
function completedBy(events: HistoryEvent[]): string[] {
  return events.flatMap((e) => e.workflowTaskCompletedEventAttributes?.identity ?? []);
}

async function clientFor(world: SimulatedWorld, settings: Record<string, string>): Promise<Client> {
  const connection = await Connection.connect({ address: world.env.address });
  onCleanup(() => connection.close());
  const keys = settings.TEMPORAL_PAYLOAD_KEYS_FILE;
  return new Client({
    connection,
    namespace: world.env.namespace,
    dataConverter: keys === undefined ? undefined : payloadDataConverter(keys),
  });
}

/** The new pod's environment: the old one's settings and task queue, ports of its own. */
function nextPod(world: SimulatedWorld, settings: Record<string, string>, taskQueue: string) {
  return world.workerEnv({ ...settings, TEMPORAL_TASK_QUEUE: taskQueue });
}

async function stop(worker: TestProcess): Promise<void> {
  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0, `the old worker drains and exits 0:\n${worker.stderr()}`);
}

for (const mode of ['compose', 'k8s', 'npm run worker'] as const) {
  test(`${mode}: an upgrade from 1.2.0 with jobs in flight loses none, creates each once, fails no workflow task`, async () => {
    // Long enough that the jobs are still running when the old worker stops, on a busy machine too.
    const world = await startSimulatedWorld('upgrade', { durationMs: 30_000 });
    const settings = modeSettings(mode);
    const env = await world.workerEnv(settings);
    const client = await clientFor(world, settings);
    const old = await startWorkerProcess(env, { what: 'the 1.2.0 worker', script: releaseWorker('1.2') });
    const project = world.project();
    const handles = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        client.workflow.start<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
          taskQueue: env.taskQueue,
          workflowId: uniqueId(`upgrade-${i}`),
          args: [{ projectId: project, prompt: `Document module ${i}` }],
        }),
      ),
    );
    await waitFor(() => world.sim.stats().jobsCreated >= handles.length, { what: 'every job created' });
    // Kubernetes rolls: the new pod first, ready once its check has passed, then an old one
    // drains. Compose recreates, and a person restarts `npm run worker`: the old one stops first.
    if (mode !== 'k8s') await stop(old);
    const next = await startWorkerProcess(await nextPod(world, settings, env.taskQueue), {
      what: 'this build',
    });
    assert.match(next.stdout(), /upgrade check passed.*"replayed":[1-9]/);
    if (mode === 'k8s') await stop(old);
    const results = await Promise.all(handles.map((h) => h.result()));
    assert.deepEqual(
      results.map((r) => r.status),
      handles.map(() => 'completed'),
    );
    assert.ok(results.every((r) => r.prLink !== null));
    assert.equal(world.sim.stats().jobsCreated, handles.length, 'one create per workflow');
    const identity = `${next.child.pid}@`;
    let handedOver = 0;
    for (const [run, { type, events }] of await historiesOn(client, env.taskQueue)) {
      const failed = events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED);
      assert.equal(failed.length, 0, `${type} ${run}: no workflow task failed`);
      const by = completedBy(events);
      if (type === WORKFLOW_TYPE && by.at(-1)?.startsWith(identity) && !by[0]?.startsWith(identity)) {
        handedOver += 1;
      }
    }
    // Every job was in flight when the old worker stopped: each began there and ended here.
    assert.equal(handedOver, handles.length, 'every job began on 1.2.0 and ended on this build');
  });
}

test("the check refuses while a 1.1 job queued for the frozen quota and that quota's run are open, in one line, and exits 3", async () => {
  const world = await startSimulatedWorld('upgrade-refused', { durationMs: 60_000 });
  // One use an hour: the second job queues in 1.1's quota, a path this build's code no longer has.
  const env = await world.workerEnv({ AGENT_API_PROJECT_QUOTA: '1/1h' });
  const client = await clientFor(world, {});
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
  // The queued job, and the frozen quota's run it waits in, which this build no longer has.
  assert.match(message, /^upgrade refused: 2 open workflow\(s\) this build cannot take over: /);
  assert.ok(message.includes(`${waiting} (${WORKFLOW_TYPE}: does not replay on this build`), message);
  assert.ok(message.includes(`(projectQuotaWorkflow: does not replay on this build`), message);
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
