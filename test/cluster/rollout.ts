/**
 * The rollout of docs/versioning.md, for real: two builds of the worker as two Worker Deployment
 * Versions on one task queue, moved with the Temporal CLI commands the document gives. Agent jobs
 * started while build A is current run to their end on A while B is ramped and then made current;
 * B takes every new start; A drains, the server reports it drained, and it is shut down. Nothing
 * fails and no agent job is created twice. Run by test/cluster/scale-out.ts on Temporal Server with
 * PostgreSQL.
 *
 * Build A is this checkout's worker, started from its sources. Build B is a copy of the sources
 * with one more workflow type exported (never started): a second bundle whose workflow code differs
 * trivially. Each worker derives its build ID from its own bundle at start, as a deployed image does.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { decodeVersioningBehavior } from '@temporalio/common';
import { startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import type { RunningSimulator } from '../../src/simulator/index.js';
import { buildIdOf } from '../../src/worker-version.js';
import {
  onCleanup,
  ROOT,
  spawnTs,
  uniqueId,
  waitFor,
  workerProcessEnv,
  type TemporalTestEnv,
  type TestProcess,
} from '../harness.js';
import { activeJobs } from '../scale-out.js';
import { createdJobs } from '../simulator-stats.js';

const execFileAsync = promisify(execFile);

/** What {@link runRollout} needs. */
export interface RolloutOptions {
  env: TemporalTestEnv;
  sim: RunningSimulator;
  /** A key the simulator accepts. */
  apiKey: string;
  /** The Temporal CLI binary. */
  cli: string;
  /** Jobs started while A is current. */
  jobsOnA: number;
  /** Jobs started while B ramps at 50%. */
  jobsRamped: number;
  /** Jobs started once B is current. */
  jobsOnB: number;
}

/** The figures a run reports, for the summary. */
export interface RolloutFigures {
  buildA: string;
  buildB: string;
  completed: number;
  agentJobsCreated: number;
  /** Ramped jobs pinned to each build. */
  rampedOn: { a: number; b: number };
  /** A's jobs still running when B became current. */
  activeOnAAtSwitch: number;
  /** Agent jobs each worker created (its own counter). */
  createdBy: { a: number; b: number };
  /** From B current to A reported drained. */
  drainSeconds: number;
  seconds: number;
}

interface VersionWorker {
  process: TestProcess;
  metricsPort: number;
  buildId: string;
}

/** A copy of the sources with one more exported workflow: build B. Returns its worker entry. */
function makeBuildB(): string {
  const dir = mkdtempSync(join(tmpdir(), 'agent-job-build-b-'));
  // Registered before the worker's own cleanup, so it runs after the process is gone.
  onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(join(ROOT, 'src'), join(dir, 'src'), { recursive: true });
  for (const file of ['package.json', 'tsconfig.json']) cpSync(join(ROOT, file), join(dir, file));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  appendFileSync(
    join(dir, 'src/workflows/index.ts'),
    [
      '',
      '/** Only in build B of test/cluster/rollout.ts: one more workflow type, never started. */',
      'export async function rolloutBuildB(): Promise<string> {',
      "  return 'B';",
      '}',
      '',
    ].join('\n'),
  );
  return join(dir, 'src/worker.ts');
}

/** Starts `script` as a versioned worker and reads the build ID from its start line. */
async function startVersionWorker(
  options: RolloutOptions,
  script: string,
  versioning: { taskQueue: string; deploymentName: string },
): Promise<VersionWorker> {
  const { vars, healthPort, metricsPort } = await workerProcessEnv(
    options.env,
    { url: options.sim.url, apiKey: options.apiKey },
    {
      TEMPORAL_TASK_QUEUE: versioning.taskQueue,
      TEMPORAL_WORKER_VERSIONING: 'on',
      TEMPORAL_DEPLOYMENT_NAME: versioning.deploymentName,
    },
  );
  const worker = spawnTs(script, [], vars);
  await waitFor(async () => (await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => null))?.ok, {
    what: `the worker ${script} to be ready`,
    timeoutMs: 120_000,
    intervalMs: 200,
  });
  const running = worker
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string; buildId?: string; workerVersioning?: string })
    .find((line) => line.msg === 'worker running');
  assert.equal(running?.workerVersioning, 'on');
  assert.ok(running.buildId, 'the worker logs its build ID');
  return { process: worker, metricsPort, buildId: running.buildId };
}

/** Agent jobs this worker created, from its own Prometheus counter. */
async function createdBy(worker: VersionWorker): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${worker.metricsPort}/metrics`)).text();
  let total = 0;
  for (const match of text.matchAll(/^agent_jobs_created_total\{[^}]*\} (\d+)/gm)) total += Number(match[1]);
  return total;
}

/** The JSON of `temporal worker deployment describe-version` that this proof reads. */
interface VersionDescription {
  drainageInfo?: { drainageStatus?: string };
  taskQueuesInfos?: { name: string; type: string }[] | null;
}

export async function runRollout(options: RolloutOptions): Promise<RolloutFigures> {
  const { env, sim } = options;
  const startedAt = Date.now();
  const taskQueue = uniqueId('tq-rollout');
  const deploymentName = uniqueId('agent-job-rollout');

  /** `temporal worker deployment <args>` against the suite's server, as docs/versioning.md runs it. */
  const deployment = async (...args: string[]): Promise<string> => {
    const { stdout } = await execFileAsync(
      options.cli,
      ['worker', 'deployment', ...args, '--address', env.address, '--namespace', env.namespace],
      { timeout: 30_000 },
    );
    return stdout;
  };
  const version = (buildId: string) => ['--deployment-name', deploymentName, '--build-id', buildId];
  const describe = async (buildId: string): Promise<VersionDescription> =>
    JSON.parse(
      await deployment('describe-version', ...version(buildId), '--output', 'json'),
    ) as VersionDescription;

  const [a, b] = await Promise.all([
    startVersionWorker(options, 'src/worker.ts', { taskQueue, deploymentName }),
    startVersionWorker(options, makeBuildB(), { taskQueue, deploymentName }),
  ]);
  // A runs this checkout's sources: its ID is the one `npm run build` gives the same bundle.
  assert.equal(a.buildId, buildIdOf(env.workflowBundle.code), 'build A derives its ID from its bundle');
  assert.notEqual(a.buildId, b.buildId, 'a change to workflow code is a new build ID');

  // A version exists once its workers polled; set-current-version refuses one that does not poll
  // every task queue type of the deployment yet.
  for (const worker of [a, b]) {
    await waitFor(
      async () => {
        const types = (await describe(worker.buildId)).taskQueuesInfos ?? [];
        return ['workflow', 'activity'].every((type) =>
          types.some((tq) => tq.name === taskQueue && tq.type === type),
        );
      },
      { what: `version ${worker.buildId} to register ${taskQueue}`, timeoutMs: 60_000, intervalMs: 500 },
    );
  }
  await deployment('set-current-version', ...version(a.buildId), '--yes');

  const handles: Record<'a' | 'ramped' | 'b', AgentJobHandle[]> = { a: [], ramped: [], b: [] };
  const projects = { a: uniqueId('docs-on-a'), ramped: uniqueId('docs-ramped'), b: uniqueId('docs-on-b') };
  const startJobs = async (phase: 'a' | 'ramped' | 'b', count: number) => {
    for (let i = 0; i < count; i++) {
      handles[phase].push(
        await startAgentJob(
          env.client,
          {
            projectId: projects[phase],
            prompt: `Rollout job ${phase}-${i}`,
            poll: { initialInterval: '2s', backoffCoefficient: 1 },
          },
          { taskQueue, key: `job-${i}` },
        ),
      );
    }
    await waitFor(() => createdJobs(sim, projects[phase]) === count, {
      what: `the ${phase} agent jobs to be created`,
      timeoutMs: 60_000,
    });
  };

  await startJobs('a', options.jobsOnA);
  await deployment('set-ramping-version', ...version(b.buildId), '--percentage', '50', '--yes');
  await startJobs('ramped', options.jobsRamped);
  await deployment('set-current-version', ...version(b.buildId), '--yes');
  const switchedAt = Date.now();
  const activeOnAAtSwitch = activeJobs(sim, projects.a);
  // The proof needs A's runs to outlive the switch: they must finish on A with B current.
  assert.ok(activeOnAAtSwitch > 0, 'agent jobs of build A were still running when B became current');
  await waitFor(async () => (await describe(a.buildId)).drainageInfo?.drainageStatus === 'draining', {
    what: `version ${a.buildId} to be draining`,
    timeoutMs: 30_000,
    intervalMs: 500,
  });
  assert.ok(activeJobs(sim, projects.a) > 0, 'A was draining while its pinned runs were still open');
  await startJobs('b', options.jobsOnB);

  const all = [...handles.a, ...handles.ramped, ...handles.b];
  const results = await Promise.all(all.map((handle) => handle.result()));
  const seconds = (Date.now() - startedAt) / 1000;
  for (const result of results) {
    assert.equal(result.status, 'completed');
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+$/);
  }
  for (const phase of ['a', 'ramped', 'b'] as const) {
    assert.equal(
      createdJobs(sim, projects[phase]),
      handles[phase].length,
      'exactly one agent job per workflow',
    );
  }
  assert.equal(
    new Set(results.map((result) => result.job.id)).size,
    all.length,
    'no two workflows share an agent job',
  );

  // Where each run ran, from the server's own record: pinned, and every workflow task of the run
  // completed by the build it is pinned to.
  const pinnedTo = async (handle: AgentJobHandle): Promise<string> => {
    const { raw } = await handle.describe();
    const info = raw.workflowExecutionInfo?.versioningInfo;
    assert.equal(decodeVersioningBehavior(info?.behavior), 'PINNED', `${handle.workflowId} is pinned`);
    const pinned = info?.deploymentVersion;
    assert.equal(pinned?.deploymentName, deploymentName);
    const history = await handle.fetchHistory();
    for (const event of history.events ?? []) {
      const completed = event.workflowTaskCompletedEventAttributes;
      if (!completed) continue;
      assert.equal(
        completed.deploymentVersion?.buildId,
        pinned?.buildId,
        `every workflow task of ${handle.workflowId} ran on its pinned build`,
      );
    }
    return pinned?.buildId ?? '';
  };
  const builds = { a: [] as string[], ramped: [] as string[], b: [] as string[] };
  for (const phase of ['a', 'ramped', 'b'] as const) {
    for (const handle of handles[phase]) builds[phase].push(await pinnedTo(handle));
  }
  assert.ok(
    builds.a.every((id) => id === a.buildId),
    'jobs started while A was current finished on A',
  );
  assert.ok(
    builds.b.every((id) => id === b.buildId),
    'jobs started once B was current ran on B',
  );
  const rampedOn = {
    a: builds.ramped.filter((id) => id === a.buildId).length,
    b: builds.ramped.filter((id) => id === b.buildId).length,
  };
  assert.equal(rampedOn.a + rampedOn.b, options.jobsRamped, 'a ramped job runs on A or on B');
  // 50% by workflow ID: with 20 jobs, all on one side has a chance of 2 in a million.
  assert.ok(
    rampedOn.a > 0 && rampedOn.b > 0,
    `the ramp sent jobs to both builds (${JSON.stringify(rampedOn)})`,
  );
  const created = { a: await createdBy(a), b: await createdBy(b) };
  // Activities of a pinned run go to its build's workers too: each worker created its own runs' jobs.
  assert.deepEqual(created, {
    a: options.jobsOnA + rampedOn.a,
    b: options.jobsOnB + rampedOn.b,
  });

  // Drained: the server counted no open run pinned to A. Then A's workers can go.
  await waitFor(async () => (await describe(a.buildId)).drainageInfo?.drainageStatus === 'drained', {
    what: `version ${a.buildId} to be drained`,
    timeoutMs: 120_000,
    intervalMs: 1_000,
  });
  const drainSeconds = (Date.now() - switchedAt) / 1000;
  a.process.child.kill('SIGTERM');
  assert.equal(await a.process.exited, 0);
  b.process.child.kill('SIGTERM');
  assert.equal(await b.process.exited, 0);

  return {
    buildA: a.buildId,
    buildB: b.buildId,
    completed: results.length,
    agentJobsCreated: Object.values(projects).reduce((sum, project) => sum + createdJobs(sim, project), 0),
    rampedOn,
    activeOnAAtSwitch,
    createdBy: created,
    drainSeconds,
    seconds,
  };
}
