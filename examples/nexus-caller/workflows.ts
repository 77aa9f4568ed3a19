/**
 * A caller's workflow in another team's namespace: it runs an agent job through the `agent-jobs`
 * Nexus service as one durable step, and optionally a follow-up turn. The caller's worker bundles
 * this file like any workflow code; its namespace reaches this project's worker only through the
 * Nexus endpoint (docs/starting-jobs.md, "From another namespace (Nexus)"). Outside this
 * repository, import the service from `agent-job-orchestrator/nexus`.
 */
import { createNexusServiceClient } from '@temporalio/workflow';
import { agentJobsService, type AgentJobResult, type RunAgentJobInput } from '../../src/nexus/service.js';

/** Input of {@link docsUpdateWorkflow}. */
export interface DocsUpdateInput {
  /** The Nexus endpoint's name, as `temporal operator nexus endpoint create --name` made it. */
  endpoint: string;
  /** The agent job: `projectId` and `prompt`, and a `key` to make it once per business event. */
  job: RunAgentJobInput;
  /** A follow-up turn to send once the first turn has ended, with its own key. */
  followUp?: { prompt: string; key?: string };
}

/** What {@link docsUpdateWorkflow} returns: each turn's final record and `prLink`. */
export interface DocsUpdateResult {
  first: AgentJobResult;
  followUp: AgentJobResult | null;
}

/**
 * Runs the agent job to its end and returns its result with `prLink`; with `followUp`, sends it
 * and waits for the new turn's end the same way. Cancelling this workflow cancels the agent job's
 * workflow in the other namespace and waits until it has ended (the default cancellation type,
 * WAIT_CANCELLATION_COMPLETED). Invalid input fails the first operation with a BAD_REQUEST
 * handler error whose cause is an `InvalidInput` failure naming the field; no job is made.
 */
export async function docsUpdateWorkflow(input: DocsUpdateInput): Promise<DocsUpdateResult> {
  const agentJobs = createNexusServiceClient({ endpoint: input.endpoint, service: agentJobsService });
  const first = await agentJobs.executeOperation('runAgentJob', input.job, {
    summary: `agent job in ${input.job.projectId}`,
  });
  if (input.followUp === undefined) return { first, followUp: null };
  const { projectId } = input.job;
  const jobId = first.job.id;
  // Answers once the job's workflow has queued the follow-up (a synchronous operation)...
  await agentJobs.executeOperation('sendFollowUp', { projectId, jobId, ...input.followUp });
  // ...and the job's workflow, watched without a prompt, ends with the new turn's record.
  const followUp = await agentJobs.executeOperation('runAgentJob', {
    projectId,
    jobId,
    poll: input.job.poll,
  });
  return { first, followUp };
}
