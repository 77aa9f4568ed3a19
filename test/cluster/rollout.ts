/**
 * The rollout of docs/versioning.md, for real, with the project quota on and steady traffic through
 * every switch: three releases of the worker as Worker Deployment Versions on one task queue, moved
 * with the Temporal CLI commands the document gives.
 *
 * - Build A is the **1.1 release**, build B the **1.2.0 release**, both taken with `git archive`
 *   into a temporary directory with this checkout's node_modules (test/release-source.ts).
 * - Build C is this checkout: the next release, without the frozen quota of 1.0 and 1.1.
 *
 * A is current, then B ramps at 50%, then B is made current. As a control, A is still draining
 * once only its (pinned) quota workflows run there; step 3b of the rollout moves them to B with
 * `temporal workflow update-options --versioning-override-behavior auto_upgrade`, and A must be
 * reported drained while traffic goes on. C's upgrade check (`--check-upgrade`, decision 0022)
 * refuses while A has open runs and while a quota workflow of the frozen type is open (C no longer
 * has it), and passes once both are gone. Then C is made current with no step at all: the quota
 * workflow born on B (a fourth project joins once B is current) follows rollouts by itself, since a
 * versioned worker starts quota workflows as AUTO_UPGRADE; B must be reported drained while traffic
 * goes on. Every agent job is created exactly once at the API (the simulator ignores
 * Idempotency-Key, as the live API does), every workflow finishes on the build that started it, and
 * from B to C the API refuses nothing with a 429: its budget is the quota's own. (From A to B the
 * quota changes type, decision 0015-quota-one-way-in: until A's jobs end, a project's uses are
 * counted in A's budget and in B's, and the API's 429 bounds them.) Each worker derives its build ID
 * from its own bundle.
 *
 * The assertions read what an operator and a user see (versions, drainage, results, the API's
 * counts, the check's line), not how the workflows are written today, so they hold for whatever
 * this checkout's workflow code becomes.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { decodeVersioningBehavior } from '@temporalio/common';
import proto from '@temporalio/proto';
import { startAgentJob, type AgentJobHandle } from '../../src/client/index.js';
import { projectQuotaWorkflowId } from '../../src/quota/messages.js';
import { buildIdOf } from '../../src/config/version.js';
import {
  onCleanup,
  spawnTs,
  startWorkerProcess,
  startTestSimulator,
  uniqueId,
  waitFor,
  workerProcessEnv,
  type TemporalTestEnv,
  type TestProcess,
} from '../harness.js';
import { activeJobs } from '../scale-out.js';
import { createdJobs } from '../simulator-stats.js';
import type { RELEASES } from '../release-source.js';
import { releaseSource } from '../release-source.js';

const execFileAsync = promisify(execFile);

/** The project quota of every worker, and the simulator's own budget: small, so it matters. */
const QUOTA = { uses: 3, windowSeconds: 10 };

/**
 * How long an old version may take to be reported drained once the rollout step that frees it has
 * run, with traffic going on: its agent jobs' own time (6 s of work, 2 s polls, a quota wait of up
 * to about one window), the compose dynamic config's 10 s grace and 5 s refresh, and room for a
 * busy machine.
 */
export const DRAIN_BOUND_S = 90;

/** What {@link runRollout} needs. */
export interface RolloutOptions {
  env: TemporalTestEnv;
  /** The Temporal CLI binary. */
  cli: string;
  /** Projects the traffic goes round. */
  projects: number;
  /** One start every this many ms, round the projects, from the first switch to the last drain. */
  intervalMs: number;
  /** Starts while A is current, then while B ramps. */
  startsOnA: number;
  startsRamped: number;
}

type Phase = 'a' | 'ramped' | 'b' | 'c';

/** The figures a run reports, for the summary. */
export interface RolloutFigures {
  builds: { a: string; b: string; c: string };
  quota: string;
  projects: number;
  intervalMs: number;
  /** Workflows started in each phase. */
  started: Record<Phase, number>;
  completed: number;
  agentJobsCreated: number;
  /** 429 answers of the API: none from B to C; from A to B two budgets ran (decision 0015). */
  refused429: number;
  /** Creates that waited 5 s or more after their workflow's start, and the longest wait. */
  quotaWaits: { over5s: number; longestSeconds: number };
  /** From B current until only 1.1's quota workflows ran on A, still draining. */
  heldSeconds: number;
  rampedOn: { a: number; b: number };
  /** A's agent jobs still running when B became current. */
  activeOnAAtSwitch: number;
  /** Quota workflows the 1.1 step moved. */
  quotaWorkflowsOnA: number;
  /** Agent jobs each worker created (its own counter). */
  createdBy: { a: number; b: number; c: number };
  /** From the step that frees a version to the server reporting it drained. */
  drainSeconds: { a: number; b: number };
  /** C's upgrade check: its refusals (one line each) while A ran and the frozen quota was open, then its pass. */
  checks: { refusedWhileA: string; refusedWhileFrozenQuota: string | null; passedAfterSeconds: number };
  seconds: number;
}

interface VersionWorker {
  process: TestProcess;
  metricsPort: number;
  buildId: string;
  /** Its entry and environment, for its upgrade check. */
  script: string;
  vars: NodeJS.ProcessEnv;
}

/** The worker entry of a release's sources (test/release-source.ts). */
function releaseWorker(release: keyof typeof RELEASES): string {
  return join(releaseSource(release), 'src/worker.ts');
}

/**
 * Runs `worker`'s upgrade check beside it (`--check-upgrade`, docs/versioning.md step 3): its exit
 * code, and the line it logged, the pass or the refusal.
 */
async function upgradeCheck(worker: VersionWorker): Promise<{ code: number | string; line: string }> {
  const check = spawnTs(worker.script, ['--check-upgrade'], worker.vars);
  const code = await check.exited;
  const logged = `${check.stdout()}\n${check.stderr()}`
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { msg: string }).msg)
    .find((msg) => msg.startsWith('upgrade refused') || msg === 'upgrade check passed');
  assert.ok(logged, `the check says what it found (exit ${code}):\n${check.stdout()}\n${check.stderr()}`);
  return { code, line: logged };
}

/** Starts `script` as a versioned worker with the quota on, and reads the build ID from its start line. */
async function startVersionWorker(
  env: TemporalTestEnv,
  api: { url: string; apiKey: string },
  script: string,
  versioning: { taskQueue: string; deploymentName: string },
): Promise<VersionWorker> {
  const workerEnv = await workerProcessEnv(env, api, {
    TEMPORAL_TASK_QUEUE: versioning.taskQueue,
    TEMPORAL_WORKER_VERSIONING: 'on',
    TEMPORAL_DEPLOYMENT_NAME: versioning.deploymentName,
    AGENT_API_PROJECT_QUOTA: `${QUOTA.uses}/${QUOTA.windowSeconds}s`,
  });
  const worker = await startWorkerProcess(workerEnv, {
    what: `the worker ${script}`,
    timeoutMs: 180_000,
    script,
  });
  const running = worker
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg?: string; buildId?: string; workerVersioning?: string })
    .find((line) => line.msg === 'worker running');
  assert.equal(running?.workerVersioning, 'on');
  assert.ok(running.buildId, 'the worker logs its build ID');
  return {
    process: worker,
    metricsPort: workerEnv.metricsPort,
    buildId: running.buildId,
    script,
    vars: workerEnv.vars,
  };
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
  const { env } = options;
  const startedAt = Date.now();
  const taskQueue = uniqueId('tq-rollout');
  const deploymentName = uniqueId('agent-job-rollout');
  const apiKey = uniqueId('rollout-key');
  // Its own simulator: keys ignored (every create is a new agent job), and the quota's budget, so a
  // use the quota should have held back is a 429 here.
  const sim = await startTestSimulator({
    apiKeys: [apiKey],
    budget: QUOTA,
    defaultScenario: { durationMs: 6_000, outcome: 'pr' },
  });
  const api = { url: sim.url, apiKey };

  const cliArgs = ['--address', env.address, '--namespace', env.namespace];
  /** `temporal <args>` against the suite's server, as docs/versioning.md runs it. */
  const temporal = async (...args: string[]): Promise<string> => {
    const { stdout } = await execFileAsync(options.cli, [...args, ...cliArgs], { timeout: 60_000 });
    return stdout;
  };
  const version = (buildId: string) => ['--deployment-name', deploymentName, '--build-id', buildId];
  const describe = async (buildId: string): Promise<VersionDescription> =>
    JSON.parse(
      await temporal('worker', 'deployment', 'describe-version', ...version(buildId), '--output', 'json'),
    ) as VersionDescription;

  /**
   * Makes `buildId` current and waits until the server has carried the new routing to the task
   * queue (the deployment's routing update COMPLETED), so that the next start goes where the CLI
   * just said: right after the command a start can still be routed by the old state.
   */
  const makeCurrent = async (buildId: string) => {
    await temporal('worker', 'deployment', 'set-current-version', ...version(buildId), '--yes');
    const { RoutingConfigUpdateState } = proto.temporal.api.enums.v1;
    await waitFor(
      async () => {
        const { workerDeploymentInfo } = await env.client.workflowService.describeWorkerDeployment({
          namespace: env.namespace,
          deploymentName,
        });
        const info = workerDeploymentInfo?.routingConfig?.currentDeploymentVersion;
        return (
          info?.buildId === buildId &&
          workerDeploymentInfo?.routingConfigUpdateState !==
            RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS
        );
      },
      { what: `the routing to ${buildId} to reach the task queue`, timeoutMs: 30_000, intervalMs: 200 },
    );
  };

  const [a, b, c] = await Promise.all([
    startVersionWorker(env, api, releaseWorker('1.1'), { taskQueue, deploymentName }),
    startVersionWorker(env, api, releaseWorker('1.2'), { taskQueue, deploymentName }),
    startVersionWorker(env, api, 'src/worker.ts', { taskQueue, deploymentName }),
  ]);
  // C runs this checkout's sources: its ID is the one `npm run build` gives the same bundle.
  assert.equal(c.buildId, buildIdOf(env.workflowBundle.code), 'build C derives its ID from its bundle');
  assert.equal(new Set([a.buildId, b.buildId, c.buildId]).size, 3, 'each workflow change is a new build ID');

  // A version exists once its workers polled; set-current-version refuses one that does not poll
  // every task queue type of the deployment yet.
  for (const worker of [a, b, c]) {
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
  await makeCurrent(a.buildId);

  // One more project joins once B is current: its quota workflow starts on B, where the others'
  // started on 1.1 and follow by the 1.1 step, so the move from B to C is B's own code at work.
  const projects = Array.from({ length: options.projects + 1 }, (_, i) => uniqueId(`docs-rollout-${i}`));
  const projectsOf = (phase: Phase) =>
    phase === 'a' || phase === 'ramped' ? projects.slice(0, -1) : projects;
  const started: {
    phase: Phase;
    handle: AgentJobHandle;
    startedAt: number;
    result: Promise<Awaited<ReturnType<AgentJobHandle['result']>>>;
    done: boolean;
  }[] = [];
  /** Starts one agent job in the next project, as a caller of the library would. */
  const startOne = async (phase: Phase) => {
    const n = started.length;
    const handle = await startAgentJob(
      env.client,
      {
        projectId: projectsOf(phase)[n % projectsOf(phase).length] ?? '',
        prompt: `Rollout job ${phase}-${n}`,
        poll: { initialInterval: '2s', backoffCoefficient: 1 },
      },
      { taskQueue, key: `job-${n}` },
    );
    const entry = { phase, handle, startedAt: Date.now(), result: handle.result(), done: false };
    // Read at the end; noted here so the rollout can wait for a phase's runs to close.
    entry.result.then(
      () => (entry.done = true),
      () => (entry.done = true),
    );
    started.push(entry);
  };
  /**
   * Steady traffic: one start every `intervalMs` until `done` says so, or fails past `timeoutMs`.
   * The pace is the load, not a wait for something: each start is awaited before the next is timed.
   */
  const traffic = async (
    phase: Phase,
    done: () => boolean | Promise<boolean>,
    what: string,
    timeoutMs: number,
  ) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`${what} not within ${timeoutMs / 1000}s of steady traffic`);
      const next = Date.now() + options.intervalMs;
      await startOne(phase);
      await sleep(Math.max(0, next - Date.now()));
    }
  };
  /** Watches a version's drainage in the background; `drained()` reads the last answer. */
  const watchDrainage = (buildId: string) => {
    let status = '';
    let stopped = false;
    const loop = (async () => {
      while (!stopped && status !== 'drained') {
        status = (await describe(buildId)).drainageInfo?.drainageStatus ?? '';
        if (status !== 'drained') await sleep(1_000);
      }
    })();
    return {
      status: () => status,
      drained: () => status === 'drained',
      stop: async () => {
        stopped = true;
        await loop;
      },
    };
  };
  const countOf = (phase: Phase) => started.filter((s) => s.phase === phase).length;

  await traffic('a', () => countOf('a') >= options.startsOnA, 'the starts on A', 60_000);
  await temporal(
    'worker',
    'deployment',
    'set-ramping-version',
    ...version(b.buildId),
    '--percentage',
    '50',
    '--yes',
  );
  await traffic('ramped', () => countOf('ramped') >= options.startsRamped, 'the ramped starts', 60_000);
  await makeCurrent(b.buildId);
  const switchedAt = Date.now();
  const activeOnAAtSwitch = projects.reduce((sum, project) => sum + activeJobs(sim, project), 0);
  // The next release may not become current while 1.1 still runs: its jobs speak the frozen
  // quota's protocol, which C does not have.
  const whileA = await upgradeCheck(c);
  assert.equal(whileA.code, 3, `C's check refuses while A has open runs: ${whileA.line}`);
  assert.match(whileA.line, new RegExp(`pinned to ${deploymentName}:${a.buildId}, which has not drained`));

  // Without the 1.1 step, A cannot drain: once every agent job started before the switch has
  // closed and the server's grace (10 s) and refresh (5 s) have passed, what still runs on A is
  // 1.1's quota workflows, pinned, kept open by the traffic.
  const count = async (query: string) =>
    Number((await temporal('workflow', 'count', '--query', query)).match(/\d+/)?.[0] ?? NaN);
  const onA = `ExecutionStatus='Running' AND TemporalWorkerDeploymentVersion='${deploymentName}:${a.buildId}'`;
  const quotaOnA = `WorkflowType='projectQuotaWorkflow' AND ${onA}`;
  /** Step 3b of docs/versioning.md: the old version's quota workflows follow the current one. */
  const moveQuotaWorkflows = async (query: string) => {
    await temporal(
      'workflow',
      'update-options',
      '--query',
      query,
      '--versioning-override-behavior',
      'auto_upgrade',
      '--reason',
      'rollout: quota workflows follow the current version',
      '--yes',
    );
  };
  const beforeSwitch = started.filter((s) => s.phase === 'a' || s.phase === 'ramped');
  await traffic(
    'b',
    () => beforeSwitch.every((s) => s.done) && Date.now() - switchedAt >= 20_000,
    'the agent jobs started before the switch to close',
    DRAIN_BOUND_S * 1000,
  );
  const quotaWorkflowsOnA = await count(quotaOnA);
  assert.ok(quotaWorkflowsOnA > 0, `1.1 started quota workflows, pinned to A (${quotaOnA})`);
  assert.equal(await count(onA), quotaWorkflowsOnA, "only 1.1's quota workflows still run on A");
  assert.equal(
    (await describe(a.buildId)).drainageInfo?.drainageStatus,
    'draining',
    "1.1's pinned quota workflows keep A draining under traffic",
  );

  // The 1.1 step (docs/versioning.md): moves them to the current version at their next workflow
  // task, where B's code (1.2.0, the last with the frozen quota) replays their history.
  await moveQuotaWorkflows(quotaOnA);
  const freedA = Date.now();
  const heldSeconds = (freedA - switchedAt) / 1000;
  const drainA = watchDrainage(a.buildId);
  onCleanup(drainA.stop);
  await traffic('b', drainA.drained, `version A ${a.buildId} reported drained`, DRAIN_BOUND_S * 1000);
  const drainSecondsA = (Date.now() - freedA) / 1000;

  // A has drained; the frozen quota's runs, now on B, close once their window holds no use. Until
  // then C's check refuses them (C cannot replay them); then it passes.
  const frozenQuota = `WorkflowType='projectQuotaWorkflow' AND ExecutionStatus='Running'`;
  const whileFrozen = (await count(frozenQuota)) > 0 ? await upgradeCheck(c) : null;
  if (whileFrozen !== null && whileFrozen.code !== 0) {
    assert.equal(whileFrozen.code, 3, whileFrozen.line);
    assert.match(whileFrozen.line, /projectQuotaWorkflow: does not replay on this build/);
  }
  const checkFrom = Date.now();
  await traffic(
    'b',
    async () => (await count(frozenQuota)) === 0,
    "the frozen quota's runs to close",
    DRAIN_BOUND_S * 1000,
  );
  const passed = await upgradeCheck(c);
  assert.equal(passed.code, 0, `C's check passes once nothing it cannot take over is open: ${passed.line}`);
  const passedAfterSeconds = (Date.now() - checkFrom) / 1000;

  // The next release, with no step beyond its check: the quota workflows born on B (the fourth project's)
  // follow rollouts by themselves (AUTO_UPGRADE, src/workflows/project-quota/workflow.ts), and B
  // must drain while traffic goes on.
  const quotaOnB = `WorkflowType='projectQuota' AND ExecutionStatus='Running' AND TemporalWorkerDeploymentVersion='${deploymentName}:${b.buildId}'`;
  const quotaWorkflowsOnB = await count(quotaOnB);
  assert.ok(quotaWorkflowsOnB > 0, `the fourth project's quota workflow runs on B (${quotaOnB})`);
  await makeCurrent(c.buildId);
  const freedB = Date.now();
  // From here on one quota type runs (B's and C's are the same): no use may be refused.
  const refusedBeforeC = sim.stats().requestsPerStatus['429'] ?? 0;
  const drainB = watchDrainage(b.buildId);
  onCleanup(drainB.stop);
  await traffic('c', drainB.drained, `version B ${b.buildId} reported drained`, DRAIN_BOUND_S * 1000);
  const drainSecondsB = (Date.now() - freedB) / 1000;

  // Where the quota lives now: every project's quota workflow still open runs on C.
  for (const project of projects) {
    const { raw, status } = await env.client.workflow.getHandle(projectQuotaWorkflowId(project)).describe();
    if (status.name !== 'RUNNING') continue;
    const info = raw.workflowExecutionInfo?.versioningInfo;
    assert.equal(info?.deploymentVersion?.buildId, c.buildId, `${project}'s quota workflow runs on C`);
  }
  // The fourth project's, born on B, moved by its own declaration, not by an operator's override.
  const bornOnB = (
    await env.client.workflow.getHandle(projectQuotaWorkflowId(projects.at(-1) ?? '')).describe()
  ).raw.workflowExecutionInfo?.versioningInfo;
  assert.equal(bornOnB?.deploymentVersion?.buildId, c.buildId, 'the quota workflow born on B moved to C');
  assert.equal(decodeVersioningBehavior(bornOnB?.behavior), 'AUTO_UPGRADE', 'it declares AUTO_UPGRADE');
  assert.equal(bornOnB?.versioningOverride ?? null, null, 'no operator override moved it');

  const results = await Promise.all(started.map((s) => s.result));
  const seconds = (Date.now() - startedAt) / 1000;
  for (const result of results) {
    assert.equal(result.status, 'completed');
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+$/);
  }
  const agentJobsCreated = projects.reduce((sum, project) => sum + createdJobs(sim, project), 0);
  assert.equal(agentJobsCreated, started.length, 'exactly one agent job created per workflow');
  assert.equal(
    new Set(results.map((r) => r.job.id)).size,
    started.length,
    'no two workflows share an agent job',
  );
  const refused429 = sim.stats().requestsPerStatus['429'] ?? 0;
  // The quota mattered: traffic above the budget made creates wait for a use.
  const createdAt = new Map(sim.stats().jobs.map((job) => [job.id, job.createdAt]));
  const waits = started.map(
    (s, i) => ((createdAt.get(results[i]?.job.id ?? '') ?? s.startedAt) - s.startedAt) / 1000,
  );
  const quotaWaits = { over5s: waits.filter((w) => w >= 5).length, longestSeconds: Math.max(...waits) };
  assert.ok(
    quotaWaits.over5s > 0,
    `some creates waited for the quota (longest ${quotaWaits.longestSeconds}s)`,
  );
  assert.equal(
    refused429 - refusedBeforeC,
    0,
    `from B to C the API refused no use: the quota held back what its budget would not take (${refusedBeforeC} 429s from A to B, two budgets while A's jobs ran)`,
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
  const ranOn: { phase: Phase; buildId: string }[] = [];
  for (const { phase, handle } of started) ranOn.push({ phase, buildId: await pinnedTo(handle) });
  const expected: Record<Exclude<Phase, 'ramped'>, string> = { a: a.buildId, b: b.buildId, c: c.buildId };
  for (const phase of ['a', 'b', 'c'] as const) {
    assert.ok(
      ranOn.filter((r) => r.phase === phase).every((r) => r.buildId === expected[phase]),
      `jobs started while ${phase.toUpperCase()} was current finished on ${phase.toUpperCase()}`,
    );
  }
  const ramped = ranOn.filter((r) => r.phase === 'ramped');
  const rampedOn = {
    a: ramped.filter((r) => r.buildId === a.buildId).length,
    b: ramped.filter((r) => r.buildId === b.buildId).length,
  };
  assert.equal(rampedOn.a + rampedOn.b, ramped.length, 'a ramped job runs on A or on B');
  const created = { a: await createdBy(a), b: await createdBy(b), c: await createdBy(c) };
  // Activities of a pinned run go to its build's workers too: each worker created its own runs' jobs.
  assert.deepEqual(created, {
    a: ranOn.filter((r) => r.buildId === a.buildId).length,
    b: ranOn.filter((r) => r.buildId === b.buildId).length,
    c: ranOn.filter((r) => r.buildId === c.buildId).length,
  });

  for (const worker of [a, b, c]) {
    worker.process.child.kill('SIGTERM');
    assert.equal(await worker.process.exited, 0);
  }

  return {
    builds: { a: a.buildId, b: b.buildId, c: c.buildId },
    quota: `${QUOTA.uses}/${QUOTA.windowSeconds}s`,
    projects: projects.length,
    intervalMs: options.intervalMs,
    started: { a: countOf('a'), ramped: countOf('ramped'), b: countOf('b'), c: countOf('c') },
    completed: results.length,
    agentJobsCreated,
    refused429,
    quotaWaits,
    heldSeconds,
    rampedOn,
    activeOnAAtSwitch,
    quotaWorkflowsOnA,
    createdBy: created,
    drainSeconds: { a: drainSecondsA, b: drainSecondsB },
    checks: {
      refusedWhileA: whileA.line,
      refusedWhileFrozenQuota: whileFrozen?.code === 3 ? whileFrozen.line : null,
      passedAfterSeconds,
    },
    seconds,
  };
}
