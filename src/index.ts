/**
 * The package's public API for other Node services: the contract (names, types, messages,
 * failure types) and the functions that start and follow agent-job workflows.
 */
export * from './contract.js';
export { DEFAULT_BLIP_TOLERANCE_MS, DEFAULT_CREDENTIAL_TOLERANCE_MS } from './agent-api/failure-policy.js';
export {
  checkPrompt,
  DEFAULT_TIMEOUT_MS,
  MAX_TIMEOUT_MS,
  resolveInput,
  type ResolvedInput,
} from './input.js';
export { DEFAULT_POLL, type ResolvedPollSettings } from './poll-schedule.js';
export {
  agentJobIdWorkflowId,
  agentJobSummary,
  agentJobWorkflowId,
  encodeIdPart,
  followAgentJob,
  sendFollowUp,
  startAgentJob,
  workflowUiUrl,
  type AgentJobHandle,
  type FollowUpHandle,
  type FollowUpInput,
  type SendFollowUpOptions,
  type StartAgentJobOptions,
} from './client/index.js';
export {
  BatchFileError,
  derivedBatchKey,
  followBatch,
  parseBatchFile,
  startBatch,
  type BatchLine,
  type BatchOutcome,
  type BatchPhase,
  type StartedBatchLine,
} from './client/batch.js';
