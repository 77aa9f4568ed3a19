/**
 * The `agent-jobs` Nexus service: the contract another team's workflow calls through a Nexus
 * endpoint, from its own namespace, without sharing a task queue with this worker. Import it in
 * the caller's workflow code (`agent-job-orchestrator/nexus`) and pass it to
 * `createNexusServiceClient`; docs/starting-jobs.md shows the caller and the endpoint.
 *
 * Types only besides the definition: no Node modules, so it bundles into workflow code.
 */
import * as nexus from 'nexus-rpc';
import type { FollowUpInput } from '../client/follow-up.js';
import type { AgentJobInput, AgentJobResult, StartPriority } from '../contract.js';

export type { AgentJobResult } from '../contract.js';

/** The service's name, as the endpoint routes it. */
export const AGENT_JOBS_SERVICE = 'agent-jobs';

/** Input of `runAgentJob`: the workflow's input, and the caller's idempotency key. */
export type RunAgentJobInput = Omit<AgentJobInput, 'previousCreate'> & {
  /** The caller's idempotency key, shared with the library; without one, the operation's request ID. */
  key?: string;
  /** `interactive` (default) or `batch`, as for `startAgentJob`. */
  priority?: StartPriority;
};

/** Input of `sendFollowUp`: a follow-up turn of an agent job, as for the library's `sendFollowUp`. */
export type SendFollowUpInput = FollowUpInput & {
  /** The follow-up's idempotency key; without one, the operation's request ID. */
  key?: string;
  /** The priority of a workflow the follow-up starts, as for `runAgentJob`. */
  priority?: StartPriority;
};

/** What `sendFollowUp` answers once the job's workflow has accepted the follow-up, not the turn's result. */
export interface FollowUpAccepted {
  /** The workflow that drives the agent job: `agent-job/<project>/job/<jobId>`. */
  workflowId: string;
  /** The follow-up's update ID (its key). */
  updateId: string;
}

/** The service definition; its operations' keys, cancellation, follow-ups and failures: docs/starting-jobs.md, "From another namespace (Nexus)". */
export const agentJobsService = nexus.service(AGENT_JOBS_SERVICE, {
  runAgentJob: nexus.operation<RunAgentJobInput, AgentJobResult>(),
  sendFollowUp: nexus.operation<SendFollowUpInput, FollowUpAccepted>(),
});
