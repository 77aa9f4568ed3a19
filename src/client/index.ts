/**
 * The library other Node services use to start and follow agent-job workflows. Exported from the
 * package root; the starter CLI, the Nexus service and the demo use it too. Its parts: starting
 * (./start.ts), follow-up delivery (./follow-up.ts), the IDs it gives (../ids.ts) and following a
 * started workflow (./follow.ts).
 */
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
