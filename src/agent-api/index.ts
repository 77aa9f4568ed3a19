/**
 * Client of the Background Agent Job API: plain HTTP and record validation, no Temporal imports.
 * What a failure means is the failure policy's (src/failure-policy/), imported from there.
 */
export {
  AgentApiClient,
  MAX_RESPONSE_BYTES,
  type AgentApiClientOptions,
  type CallOptions,
} from './client.js';
export { AgentApiError, type ApiOperation } from './errors.js';
export {
  InvalidAgentJobRecordError,
  parseAgentJobRecord,
  readableJobId,
  RECORD_BUDGET_BYTES,
} from './record.js';
export { closeDispatcher, createDispatcher, getDispatcher } from './dispatcher.js';
export { parseRetryAfter } from './retry-after.js';
export type { AgentJobRecord, AgentJobStatus } from './types.js';
export { ApiKeyFileError, FileApiKey, type ApiKeySource } from './api-key.js';
