/**
 * Priority and fairness on a real server with the settings docs/starting-jobs.md names: a backlog
 * builds on a task queue no worker polls yet, then a worker with one slot per kind of task serves
 * it, and the order in which the simulator saw the creates shows who went first.
 *
 * The server runs one task-queue partition here: priority and fairness hold within a partition, and
 * with the default four the order across them is only close to it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startDevServer } from '../../dev/dev-server.js';
import { startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import { InvalidInputError, type StartPriority } from '../../src/contract.js';
import { taskPriority } from '../../src/priority.js';
import { onCleanup, startSimulatedWorld, temporalEnv, uniqueId } from '../harness.js';

/** What a self-hosted server needs for both (docs/starting-jobs.md), plus one partition. */
const PRIORITY_SERVER_CONFIG = {
  'matching.useNewMatcher': true,
  'matching.enableFairness': true,
  'matching.numTaskqueueReadPartitions': 1,
  'matching.numTaskqueueWritePartitions': 1,
};

const server = await startDevServer({ dynamicConfig: PRIORITY_SERVER_CONFIG });
onCleanup(() => server.stop());
// The world on this server: temporalEnv keeps the first target it is given.
await temporalEnv({ address: server.address, namespace: server.namespace });
const world = await startSimulatedWorld('priority', { durationMs: 100 });
const { env, sim } = world;

/** Starts `count` jobs of `projectId` on `taskQueue`, one after another, so that they queue in order. */
async function startJobs(projectId: string, count: number, taskQueue: string, priority: StartPriority) {
  const handles: AgentJobHandle[] = [];
  for (let i = 0; i < count; i++) {
    const input = { projectId, prompt: `Page ${i}`, poll: { initialInterval: '100ms' } };
    handles.push(await startAgentJob(env.client, input, { taskQueue, priority }));
  }
  return handles;
}

/** Serves the backlog with one slot per kind of task, waits for every job, and returns the create order. */
async function serve(taskQueue: string, handles: AgentJobHandle[], projects: string[]): Promise<string[]> {
  await world.startWorker(
    {},
    {
      taskQueue,
      slots: { maxConcurrentWorkflowTaskExecutions: 2, maxConcurrentActivityTaskExecutions: 1 },
    },
  );
  await Promise.all(handles.map((handle) => handle.result()));
  return sim
    .stats()
    .jobs.filter((job) => projects.includes(job.projectId))
    .map((job) => job.projectId);
}

test('an interactive start goes ahead of a batch backlog on the same workers', async (t) => {
  const taskQueue = uniqueId('priority');
  const batch = uniqueId('batch-project');
  const interactive = uniqueId('interactive-project');
  const handles = [
    ...(await startJobs(batch, 12, taskQueue, 'batch')),
    ...(await startJobs(interactive, 1, taskQueue, 'interactive')),
  ];
  const order = await serve(taskQueue, handles, [batch, interactive]);
  const place = order.indexOf(interactive) + 1;
  t.diagnostic(`priority: the interactive job was created at place ${place} of ${order.length}`);
  // In arrival order it would be 13th of 13.
  assert.ok(place <= 3, `the interactive job was created ${place}th of ${order.length}: ${order.join(', ')}`);
});

test("one project's burst does not keep another project's jobs behind it (fairness key = project)", async (t) => {
  const taskQueue = uniqueId('fairness');
  const bursty = uniqueId('bursty');
  const quiet = uniqueId('quiet');
  const handles = [
    ...(await startJobs(bursty, 12, taskQueue, 'batch')),
    ...(await startJobs(quiet, 3, taskQueue, 'batch')),
  ];
  const order = await serve(taskQueue, handles, [bursty, quiet]);
  const lastQuiet = order.lastIndexOf(quiet) + 1;
  t.diagnostic(
    `fairness: ${order.map((project) => (project === quiet ? 'Q' : 'b')).join('')} (Q the quiet project)`,
  );
  // In arrival order the quiet project's jobs would be 13th to 15th of 15; shared fairly, its three
  // go out among the first few of each project's turns.
  assert.ok(
    lastQuiet <= 10,
    `the quiet project's last job was created ${lastQuiet}th of ${order.length}: ${order.join(', ')}`,
  );
});

test('a priority class that is not one is refused before anything starts; long project IDs fit the fairness key', async () => {
  const projectId = uniqueId('refused');
  await assert.rejects(
    startAgentJob(env.client, { projectId, prompt: 'Document it' }, { priority: 'urgent' as StartPriority }),
    (err: unknown) =>
      err instanceof InvalidInputError && /^priority: must be one of interactive, batch/.test(err.message),
  );
  assert.equal(sim.stats().jobsPerProject[projectId], undefined);
  const long = 'é'.repeat(100);
  const key = taskPriority(long, 2).fairnessKey;
  assert.ok(Buffer.byteLength(key) <= 64, key);
  assert.notEqual(key, taskPriority(`${long}x`, 2).fairnessKey);
});
