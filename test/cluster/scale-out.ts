/**
 * The scale-out proof of test/scale-out.ts on the production topology: Temporal Server (dev/temporal-versions.ts)
 * on PostgreSQL, prepared by the compose files themselves (dev/temporal-cluster.ts). Besides the
 * SIGKILLed worker, the Temporal Server process is SIGKILLed while agent jobs are in flight and
 * started again on the same database. Then, on the same cluster, the versioned rollout of
 * docs/versioning.md (test/cluster/rollout.ts). Run by test/cluster/run.ts (`npm run test:cluster`),
 * which prints the summary this file writes to $CLUSTER_SUMMARY_FILE.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { before, test } from 'node:test';
import { resolveTemporalCli } from '../../dev/temporal-cli.js';
import { startCluster, TEMPORAL_SERVER_VERSION, type TemporalCluster } from '../../dev/temporal-cluster.js';
import type { RunningSimulator } from '../../src/simulator/index.js';
import { onCleanup, startTestSimulator, temporalEnv, type TemporalTestEnv } from '../harness.js';
import { activeJobs, runScaleOut } from '../scale-out.js';
import { DRAIN_BOUND_S, runRollout } from './rollout.js';

const JOBS = 300;
const LATE_JOBS = 30;
const API_KEY = `cluster-test-key-${randomUUID()}`;
let cluster: TemporalCluster;
let env: TemporalTestEnv;
let sim: RunningSimulator;

before(async () => {
  const started = Date.now();
  cluster = await startCluster();
  // Registered before the connections, so it runs after they close (cleanups run newest first).
  onCleanup(() => cluster.stop());
  summary(`cluster: PostgreSQL + Temporal Server v${TEMPORAL_SERVER_VERSION} up in ${seconds(started)}s`);
  env = await temporalEnv({ address: cluster.address, namespace: cluster.namespace });
  sim = await startTestSimulator({
    apiKeys: [API_KEY],
    // About failover, not the key: a create on the wire when a worker (or the server) dies is sent
    // again by the workflow under AGENT_API_AMBIGUOUS_CREATE=retry, which the live API would make a
    // second agent job (test/workflows/real-api-world.test.ts shows both policies against keys
    // ignored). Here the key is honoured, so "one agent job per workflow" counts lost and doubled
    // workflows, not that resend; the proof counts the resend itself from the creates accepted per
    // key, each one beyond a workflow's first to be in its `resent` (test/scale-out.ts).
    honourIdempotencyKey: true,
    createsPerProjectPerHour: 0,
    // Long enough that jobs are still running through both kills and the server's restart.
    defaultScenario: { durationMs: 20_000, outcome: 'pr' },
  });
});

function seconds(since: number): string {
  return ((Date.now() - since) / 1000).toFixed(1);
}

function summary(line: string): void {
  process.stdout.write(`# ${line}\n`);
  const file = process.env.CLUSTER_SUMMARY_FILE;
  if (file) appendFileSync(file, `${line}\n`);
}

test(`${JOBS} agent jobs survive a SIGKILLed worker and a SIGKILLed Temporal Server on PostgreSQL`, async () => {
  const figures = await runScaleOut({
    env,
    sim,
    apiKey: API_KEY,
    jobs: JOBS,
    lateJobs: LATE_JOBS,
    afterWorkerKill: async (projectId) => {
      const pid = cluster.serverPid();
      await cluster.killServer();
      const activeAtServerKill = activeJobs(sim, projectId);
      const down = Date.now();
      await cluster.restartServer();
      return {
        killedServerPid: pid ?? 'unknown',
        activeAtServerKill,
        serverDownSeconds: seconds(down),
      };
    },
  });
  // The server kill must land mid-run, or it proves nothing.
  assert.ok(
    Number(figures.extra.activeAtServerKill) > 0,
    'agent jobs were in flight when the server was killed',
  );
  summary(
    `scale-out on PostgreSQL: ${figures.completed}/${figures.jobs} workflows completed in ${figures.seconds.toFixed(1)}s; ` +
      `agent jobs created ${figures.agentJobsCreated} (exactly one per workflow); POSTs to create ${figures.createPosts}, ` +
      `creates sent again (resent) ${figures.resent}`,
  );
  summary(
    `workers: 3 started, worker-1 SIGKILLed with ${figures.activeAtWorkerKill} agent jobs active, worker-4 started; ` +
      `activities per worker ${JSON.stringify(figures.activitiesPerWorker)}`,
  );
  summary(
    `Temporal Server pid ${figures.extra.killedServerPid} SIGKILLed with ${figures.extra.activeAtServerKill} agent jobs active; ` +
      `restarted and serving again after ${figures.extra.serverDownSeconds}s`,
  );
  summary(`API requests ${JSON.stringify(figures.requestsPerEndpoint)}`);
});

test('a versioned rollout with the project quota on: 1.1 to 1.2.0 to this checkout, under steady traffic', async () => {
  // The rollout runs the Temporal CLI, as docs/deploy.md gives its steps.
  const cli = await resolveTemporalCli();
  const f = await runRollout({
    env,
    cli: cli.path,
    projects: 3,
    intervalMs: 700,
    startsOnA: 9,
    startsRamped: 6,
  });
  summary(
    `versioned rollout, quota on (${f.quota} per project, the API's budget too), traffic ${f.projects} projects (a fourth from B on), ` +
      `one start every ${f.intervalMs / 1000}s round them through every switch: ${f.completed} workflows completed in ` +
      `${f.seconds.toFixed(1)}s, agent jobs created ${f.agentJobsCreated} (== workflows), 429s ${f.refused429}, ` +
      `${f.quotaWaits.over5s} creates waited 5 s or more for the quota (longest ${f.quotaWaits.longestSeconds.toFixed(1)}s)`,
  );
  summary(
    `A ${f.builds.a} (the 1.1 release) current: ${f.started.a} started; B ${f.builds.b} (the 1.2.0 release) ramped 50%: ` +
      `${f.started.ramped} started (on A/B ${f.rampedOn.a}/${f.rampedOn.b}); B current with ${f.activeOnAAtSwitch} agent jobs ` +
      `of A running; ${f.heldSeconds.toFixed(0)}s later only its ${f.quotaWorkflowsOnA} quota workflows ran on A, still draining; ` +
      `moved by update-options; ${f.started.b} started in all; ` +
      `A reported drained ${f.drainSeconds.a.toFixed(1)}s after (bound ${DRAIN_BOUND_S}s)`,
  );
  summary(`C's upgrade check while A ran: ${f.checks.refusedWhileA}`);
  summary(
    `C's upgrade check once A had drained: ${f.checks.refusedWhileFrozenQuota ?? 'nothing of the frozen quota was still open'}`,
  );
  summary(
    `C's upgrade check passed ${f.checks.passedAfterSeconds.toFixed(1)}s later, once no frozen quota run was open`,
  );
  summary(
    `C ${f.builds.c} (this checkout, the frozen quota gone) current, B's quota workflow following by itself (AUTO_UPGRADE, no step): ${f.started.c} started; B reported drained ` +
      `${f.drainSeconds.b.toFixed(1)}s after (bound ${DRAIN_BOUND_S}s); every agent-job workflow pinned, each of its ` +
      `workflow tasks completed by its build; creates by worker A/B/C ${f.createdBy.a}/${f.createdBy.b}/${f.createdBy.c}; workers exit 0`,
  );
});
