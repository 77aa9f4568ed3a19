/**
 * Scale-out and survival on the dev server: the proof of test/scale-out.ts (three worker
 * processes, one SIGKILLed and replaced, every job completed with exactly one agent job).
 * `npm run test:cluster` runs the same proof on Temporal Server with PostgreSQL.
 */
import { test } from 'node:test';
import { startSimulatedWorld } from '../harness.js';
import { runScaleOut } from '../scale-out.js';

const JOBS = 200;
/** 40 tasks over three workers: work the replacement is sure to compete for. */
const LATE_JOBS = 20;
const { env, sim, apiKey } = await startSimulatedWorld('scale-test', {
  simulator: {
    // About failover, not the key: a create on the wire when a worker (or the server) dies is sent
    // again by the workflow under AGENT_API_AMBIGUOUS_CREATE=retry, which the live API would make a
    // second agent job (test/workflows/real-api-world.test.ts shows both policies against keys
    // ignored). Here the key is honoured, so "one agent job per workflow" counts lost and doubled
    // workflows, not that resend; the proof counts the resend itself from the creates accepted per
    // key, each one beyond a workflow's first to be in its `resent` (test/scale-out.ts).
    honourIdempotencyKey: true,
    createsPerProjectPerHour: 0,
    defaultScenario: { durationMs: 6_000, outcome: 'pr' },
  },
});

test(`${JOBS} agent jobs survive a SIGKILLed worker among three, with no duplicate and none lost`, async () => {
  const figures = await runScaleOut({ env, sim, apiKey, jobs: JOBS, lateJobs: LATE_JOBS });
  process.stdout.write(
    `# scale-out: ${JOBS} + ${LATE_JOBS} jobs in ${figures.seconds.toFixed(1)}s; ${figures.activeAtWorkerKill} agent jobs active when worker-1 was killed; ` +
      `created ${figures.agentJobsCreated}; POSTs to create ${figures.createPosts}, creates sent again (resent) ${figures.resent}; ` +
      `API requests ${JSON.stringify(figures.requestsPerEndpoint)}; ` +
      `activities per worker ${JSON.stringify(figures.activitiesPerWorker)}\n`,
  );
});
