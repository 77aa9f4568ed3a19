/** Readers of the simulator's counters, so assertions say what they count. */
import assert from 'node:assert/strict';
import type { RunningSimulator } from '../src/simulator/index.js';

/** Agent jobs the simulator created for a project. */
export function createdJobs(sim: RunningSimulator, projectId: string): number {
  return sim.stats().jobsPerProject[projectId] ?? 0;
}

/** Requests the simulator saw for a project on one endpoint, whatever it answered. */
export function requestsTo(
  sim: RunningSimulator,
  projectId: string,
  endpoint: 'create' | 'get' | 'message',
): number {
  return sim.stats().requestsPerProjectEndpoint[projectId]?.[endpoint] ?? 0;
}

/**
 * The simulator's answers with `status`, every project together (it counts statuses per simulator
 * only): read the difference across a test that runs alone on its simulator.
 */
export function answeredWith(sim: RunningSimulator, status: number): number {
  return sim.stats().requestsPerStatus[String(status)] ?? 0;
}

/**
 * The workflows whose creates the simulator accepted under their key (the workflow ID) more often
 * than once plus the resends they counted: each create beyond a workflow's first must be one it
 * sent knowingly, after an attempt whose outcome was unknown, and counted in its `resent`. (With
 * the key honoured, jobs per key are 1 whatever is sent; accepted creates per key are not. A resend
 * whose first attempt never left a dead worker reaches the simulator once: at most, not exactly.)
 * One line per such workflow; none when every create sent again was counted.
 */
export function createsNotCounted(
  sim: RunningSimulator,
  workflows: { workflowId: string; resent: number }[],
): string[] {
  const accepted = sim.stats().createsPerIdempotencyKey;
  return workflows.flatMap(({ workflowId, resent }) => {
    const creates = accepted[workflowId] ?? 0;
    return creates >= 1 && creates <= 1 + resent
      ? []
      : [`${workflowId}: ${creates} creates accepted, ${resent} counted as resent`];
  });
}

/**
 * Asserts that every create sent again is counted in its workflow's `resent` ({@link
 * createsNotCounted}): `results[i]` is the result of the workflow `workflowIds[i]`.
 */
export function assertResendsCounted(
  sim: RunningSimulator,
  workflowIds: string[],
  results: { resent: number }[],
): void {
  const uncounted = createsNotCounted(
    sim,
    workflowIds.map((workflowId, i) => ({ workflowId, resent: results[i]?.resent ?? 0 })),
  );
  assert.equal(
    uncounted.length,
    0,
    `every create sent again is counted in resent; ${uncounted.length} not, e.g. ${uncounted.slice(0, 3).join('; ')}`,
  );
}
