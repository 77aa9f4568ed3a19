/**
 * What the project quota adds per job when the budget is free: the same jobs, one after another, on
 * two workers of this project that differ only in `AGENT_API_PROJECT_QUOTA` (`off`, and a budget far
 * above the jobs so that none waits), each side in a project of its own.
 *
 * Counted per job: events and billable actions of the job's own history, and with the quota on the
 * quota workflow's shared out over the jobs, its accepted updates (the takes) apart; the latency
 * from the workflow's start to its create reaching the simulator. The quota workflow is counted
 * whole, up to its end after an idle minute; its window is short (`QUOTA_WINDOW_S`) so that the end
 * comes within the benchmark, and its wakes (one per use leaving the window) are what an hour's
 * window costs too, an hour later. What it grew by over the second half of the jobs is the quota's
 * cost per further job once a project's chain runs (issue 29's aim is read there), apart from what
 * comes once per chain.
 */
import { startAgentJob } from '../../src/client/index.js';
import { projectQuotaWorkflowId } from '../../src/quota/messages.js';
import { QUOTA_IDLE_MS } from '../../src/workflows/project-quota/budget.js';
import type { BenchEnvironment } from '../environment.js';
import type { SideParams } from '../catalogue.js';
import { firstRunId, timestampMs, workflowCost, type WorkflowCost } from '../history.js';
import { spread } from '../stats.js';
import { waitForCost } from './cost.js';

/** The quota setting of the "on" side: 10,000 uses per 10 s, so the budget is always free. */
const QUOTA_WINDOW_S = 10;
const QUOTA_ON = `10000/${QUOTA_WINDOW_S}s`;
/** Each job: active for a second, polled every half second. */
const JOB_MS = 1_000;
const POLL = { initialInterval: 500, maxInterval: 500, backoffCoefficient: 1 } as const;

/**
 * Runs the "on" side, then the "off" side while the quota workflow of the first winds down on the
 * first side's worker (it runs on its task queue, so that worker stays up until it has ended: the
 * scenario's workers stop when it returns).
 */
export async function runQuotaCost(env: BenchEnvironment, params: SideParams) {
  const on = await runSide(env, QUOTA_ON, params);
  const off = await runSide(env, 'off', params);
  const quotaId = projectQuotaWorkflowId(on.projectId);
  const firstRun = await firstRunId(env.client.workflow.getHandle(quotaId));
  const deadline = Date.now() + (QUOTA_WINDOW_S * 1000 + QUOTA_IDLE_MS) * 2;
  const chain = await waitForCost(env.client, quotaId, firstRun, deadline);
  return [summarize(on, chainOf(chain, on.margin)), summarize(off, null)];
}

/**
 * The quota workflow's whole chain: `updates` are its accepted updates, the takes; `timers` its
 * wake-ups (a use leaving the window, a take moving the next one); `margin` what it grew by over
 * the second half of the jobs, when it had one.
 */
function chainOf({ runs, events, actions }: WorkflowCost, margin: QuotaMargin | null) {
  const { total, updates, timersStarted: timers } = actions;
  return { runs, events, actions: total, updates, timers, ...(margin && { margin }) };
}

/**
 * Runs the jobs of one side on a worker of its own, which runs on until the scenario ends; with the
 * quota on, `margin` is what its chain grew by over the second half of the jobs.
 */
async function runSide(env: BenchEnvironment, quota: string, params: SideParams) {
  const projectId = env.newProject(`quota-cost-${quota === 'off' ? 'off' : 'on'}`, JOB_MS);
  await env.startWorker('worker', projectId, { overrides: { AGENT_API_PROJECT_QUOTA: quota } });
  const deadline = Date.now() + params.jobs * 30_000;
  const started: Array<{ workflowId: string; runId: string; jobId: string }> = [];
  const half = Math.floor(params.jobs / 2);
  let atHalf: WorkflowCost | null = null;
  // One after another, each once the one before is done: the latency to start is the quota's
  // own, not that of a queue of starts or of other jobs' polls.
  for (let i = 0; i < params.jobs; i++) {
    if (i === half && quota !== 'off' && half > 0) atHalf = await quotaChainSoFar(env, projectId);
    const handle = await startAgentJob(
      env.client,
      { projectId, prompt: `Benchmark: quota ${quota}, job ${i}`, poll: POLL },
      { taskQueue: projectId, key: `job-${i}` },
    );
    const runId = await firstRunId(handle);
    const { job } = await handle.result();
    started.push({ workflowId: handle.workflowId, runId, jobId: job.id });
  }
  const margin = atHalf && growth(atHalf, await quotaChainSoFar(env, projectId), params.jobs - half);
  const costs = await Promise.all(
    started.map((s) => waitForCost(env.client, s.workflowId, s.runId, deadline)),
  );
  const createdAt = new Map(env.jobsOf(projectId).map((job) => [job.id, job.createdAt]));
  const startLatencyMs = await Promise.all(
    started.map(async ({ workflowId, runId, jobId }) => {
      const history = await env.client.workflow.getHandle(workflowId, runId).fetchHistory();
      const startMs = timestampMs(history.events?.[0]?.eventTime);
      const created = createdAt.get(jobId);
      return created === undefined ? Number.NaN : created - startMs;
    }),
  );
  params.log(`  quota ${quota}: ${params.jobs} jobs done`);
  return { quota, projectId, costs, startLatencyMs, margin };
}

/**
 * The quota workflow's chain over the later jobs of a run, once it runs: its start, its patch
 * marker and its first timer fall before them, so its actions here are what each further job costs.
 */
type QuotaMargin = ReturnType<typeof growth>;

/** What the chain's actions grew by from `before` to `after`, over `jobs` jobs. */
function growth({ actions: b }: WorkflowCost, { actions: a }: WorkflowCost, jobs: number) {
  return {
    jobs,
    actions: a.total - b.total,
    updates: a.updates - b.updates,
    timers: a.timersStarted - b.timersStarted,
  };
}

/** The project's quota workflow chain so far, every run of it, while it runs. */
async function quotaChainSoFar(env: BenchEnvironment, projectId: string): Promise<WorkflowCost> {
  const quotaId = projectQuotaWorkflowId(projectId);
  return workflowCost(env.client, quotaId, await firstRunId(env.client.workflow.getHandle(quotaId)));
}

/** One side of the comparison: per job, the job's own history and, all told, the quota workflow's share. */
export type QuotaCostSide = ReturnType<typeof summarize>;

function summarize(
  side: Awaited<ReturnType<typeof runSide>>,
  quotaWorkflow: ReturnType<typeof chainOf> | null,
) {
  const jobEvents = spread(side.costs.map((c) => c.events));
  const jobActions = spread(side.costs.map((c) => c.actions.total));
  const share = (total: number | undefined) => (total ?? 0) / side.costs.length;
  return {
    /** The worker's `AGENT_API_PROJECT_QUOTA`. */
    quota: side.quota,
    jobs: side.costs.length,
    jobEvents,
    jobActions,
    quotaWorkflow,
    eventsPerJob: jobEvents && jobEvents.median + share(quotaWorkflow?.events),
    actionsPerJob: jobActions && jobActions.median + share(quotaWorkflow?.actions),
    /** From the workflow's start event to the simulator recording the create, ms. */
    startLatencyMs: spread(side.startLatencyMs),
  };
}
