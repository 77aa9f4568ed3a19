/**
 * Activities of the benchmark's own workflows: the project's activities as they are (so agent jobs
 * are created and read the same way everywhere), plus the one of baseline (b), the "poll by
 * activity retry" pattern, which fails while the agent job is active so that Temporal's retry
 * policy, not a workflow timer, sets the cadence, and the poll of baseline (c), the floor.
 */
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import { createActivities, type GetAgentJobInput } from '../../src/activities/index.js';
import type { AgentApiClient } from '../../src/agent-api/index.js';
import { isTerminalStatus, type AgentJobRecord } from '../../src/contract.js';
import { STILL_ACTIVE } from '../../src/poll-schedule.js';

/** Builds the activities around an API client. */
export function createBaselineActivities(api: Pick<AgentApiClient, 'createJob' | 'getJob' | 'sendMessage'>) {
  return {
    ...createActivities({ api }),

    /** One poll per attempt: returns the terminal record, or fails so that the retry policy polls again. */
    async awaitTerminalStatus(input: GetAgentJobInput): Promise<AgentJobRecord> {
      const record = await api.getJob(input.projectId, input.jobId);
      if (isTerminalStatus(record.status)) return record;
      throw ApplicationFailure.create({
        // The same failure type as the worker's poll activity, which polls the same way.
        type: STILL_ACTIVE,
        message: `agent job ${input.jobId} is ${record.status}`,
        // Benign: an expected outcome of this pattern, so the SDK logs it at debug level and does
        // not count it as an activity failure in its metrics.
        category: ApplicationFailureCategory.BENIGN,
      });
    },

    /**
     * One poll of the floor: the project's API client and nothing around it (no metric, no error
     * mapping). The same client as the worker's poll and the other baselines', not a bare undici
     * call: sending the request over the process-wide pool and checking the record are work this
     * design cannot skip, so with it the gap from (c) to this worker is what the worker adds in
     * Temporal and around its activity, which is what the comparison is for.
     */
    async readAgentJob(input: GetAgentJobInput): Promise<AgentJobRecord> {
      return api.getJob(input.projectId, input.jobId);
    },
  };
}

/** The activities' type, for `proxyActivities` in the benchmark's workflows. */
export type BaselineActivities = ReturnType<typeof createBaselineActivities>;
