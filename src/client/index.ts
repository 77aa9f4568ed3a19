/** The library that starts and follows agent-job workflows, exported from the package root. */
export {
  agentJobStartOptions,
  agentJobSummary,
  promptDiffers,
  startAgentJob,
  type AgentJobHandle,
  type StartAgentJobOptions,
} from './start.js';
export {
  sendFollowUp,
  type FollowUpHandle,
  type FollowUpInput,
  type SendFollowUpOptions,
} from './follow-up.js';
export { agentJobIdWorkflowId, agentJobWorkflowId, encodeIdPart, followUpUpdateId } from '../ids.js';
export { followAgentJob, progressLine, workflowUiUrl } from './follow.js';
export { PayloadUnopenedError } from '../payload-codec/index.js';
