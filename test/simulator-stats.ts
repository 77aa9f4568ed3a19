/** Readers of the simulator's counters, so assertions say what they count. */
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
