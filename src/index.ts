/**
 * The package's public API for other Node services: the contract (names, types, messages,
 * failure types) and the functions that start and follow agent-job workflows.
 */
export * from './contract.js';
export {
  agentJobSummary,
  agentJobWorkflowId,
  followAgentJob,
  startAgentJob,
  workflowUiUrl,
  type AgentJobHandle,
  type StartAgentJobOptions,
} from './client/index.js';
