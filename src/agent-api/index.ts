/**
 * Client of the Background Agent Job API: plain HTTP and record validation, no Temporal imports.
 */
export {
  AgentApiClient,
  MAX_RESPONSE_BYTES,
  type AgentApiClientOptions,
  type CallOptions,
} from './client.js';
export { AgentApiError, type AgentApiErrorInit } from './errors.js';
export { verdictOf, type ApiOperation, type Verdict } from '../failure-policy/table.js';
export { FailureKind, kindOfNetworkError, kindOfStatus, type NetworkKind } from '../failure-policy/kinds.js';
export { ApiFailureType } from '../failure-policy/types.js';
export {
  agentJobRecordSchema,
  InvalidAgentJobRecordError,
  parseAgentJobRecord,
  readableJobId,
  RECORD_BUDGET_BYTES,
} from './record.js';
export {
  closeDispatcher,
  createDispatcher,
  DEFAULT_TIMEOUTS,
  getDispatcher,
  type DispatcherTimeouts,
} from './dispatcher.js';
export { parseRetryAfter } from './retry-after.js';
export {
  AGENT_JOB_STATUSES,
  isTerminalStatus,
  MAX_JOB_ID_BYTES,
  TERMINAL_STATUSES,
  type AgentJobRecord,
  type AgentJobStatus,
} from './types.js';
export {
  ApiKeyFileError,
  DEFAULT_KEY_CHECK_INTERVAL_MS,
  FileApiKey,
  staticApiKey,
  type ApiKeyFileEvent,
  type ApiKeySource,
  type FileApiKeyOptions,
} from './api-key.js';
export {
  DEFAULT_FILE_CHECK_INTERVAL_MS,
  WatchedFile,
  type Parsed,
  type Unusable,
  type WatchedFileEvent,
  type WatchedFileOptions,
} from './watched-file.js';
