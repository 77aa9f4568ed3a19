/**
 * The package's public API for other Node services: the contract, the client library, the payload
 * codec (give its `Client` `dataConverter: payloadDataConverter(keysFile)` with the workers' key
 * ring, so what it sends is sealed and what it reads opens), and the job-end notice's check.
 */
export * from './contract.js';
export { DEFAULT_BLIP_TOLERANCE_MS, DEFAULT_CREDENTIAL_TOLERANCE_MS } from './failure-policy/streak.js';
export {
  checkNotifyTargetName,
  checkPrompt,
  DEFAULT_TIMEOUT_MS,
  MAX_TIMEOUT_MS,
  resolveInput,
  type ResolvedInput,
} from './input.js';
export { DEFAULT_POLL, type ResolvedPollSettings } from './poll-schedule.js';
export * from './client/index.js';
export * from './client/batch.js';
export {
  AesGcmPayloadCodec,
  FileKeyRing,
  keyRing,
  payloadDataConverter,
  PayloadKeyFileError,
  SealedPayloadError,
  staticKeyRing,
  UnknownPayloadKeyError,
  type KeyRing,
  type KeyRingSource,
  type PayloadKey,
} from './payload-codec/index.js';
export { NOTIFY_HEADERS, verifyNotice } from './notify/signature.js';
export type { JobEndNotice, NoticeOutcome } from './notify/notice.js';
