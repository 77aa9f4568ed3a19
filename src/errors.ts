/**
 * Every error class the project throws, on one base with one map of names. The name is set
 * explicitly, never read from the class, which a bundler may rename; callers and logs match on it.
 * Failures that leave an activity or a workflow are `ApplicationFailure`s typed by the contract's
 * `FailureType` instead. A leaf module: workflow code and the API client import it.
 */

/** The name of each error class, as `err.name` shows it. */
export const ErrorName = {
  /** A failed Agent Job API call (src/agent-api/errors.ts). */
  AgentApi: 'AgentApiError',
  /** A 2xx body that is not an agent job record (src/agent-api/record.ts). */
  InvalidAgentJobRecord: 'InvalidAgentJobRecordError',
  /** A body that stopped before its end, with the bytes that arrived (src/agent-api/client.ts). */
  PartialBody: 'PartialBodyError',
  /** An API key file with no usable key (src/agent-api/api-key.ts). */
  ApiKeyFile: 'ApiKeyFileError',
  /** A bad setting in the environment (src/config/settings.ts). */
  Config: 'ConfigError',
  /** A bad workflow input field (src/contract.ts). */
  InvalidInput: 'InvalidInputError',
  /** Bad lines in a batch file (src/client/batch.ts). */
  BatchFile: 'BatchFileError',
  /** A payload key file with no usable key ring (src/payload-codec/key-ring.ts). */
  PayloadKeyFile: 'PayloadKeyFileError',
  /** A sealed payload whose key ID is not in the key ring (src/payload-codec/codec.ts). */
  UnknownPayloadKey: 'UnknownPayloadKeyError',
  /** A sealed payload that does not open: altered, truncated or not sealed by this codec (src/payload-codec/codec.ts). */
  SealedPayload: 'SealedPayloadError',
  /** A followed workflow whose payloads the workers cannot open (src/payload-codec/unopened.ts). */
  PayloadUnopened: 'PayloadUnopenedError',
  /** Notification targets that cannot be read (src/notify/targets.ts). */
  NotifyTargets: 'NotifyTargetsError',
  /** A command line that cannot be run: the starter's, the simulator's. */
  Usage: 'UsageError',
  /** Open workflows a new build cannot take over (src/worker/upgrade-check.ts). */
  UpgradeRefused: 'UpgradeRefusedError',
} as const;

/** One of the {@link ErrorName} values. */
export type ErrorName = (typeof ErrorName)[keyof typeof ErrorName];

/**
 * The message of `err` and of its causes, each once and five at most, since the SDK's own messages
 * are generic. What the API or the server sent may be in them: escape it for where it is shown.
 */
export function messageChain(err: unknown): string {
  const parts: string[] = [];
  for (let cause: unknown = err; cause instanceof Error && parts.length < 5; cause = cause.cause) {
    if (!parts.includes(cause.message)) parts.push(cause.message);
  }
  return parts.length > 0 ? parts.join(': ') : String(err);
}

/** The base of every error class of the project. */
export class AgentJobError extends Error {
  constructor(name: ErrorName, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = name;
  }
}

/** A command line that cannot be run; the message says what to change. Programs exit 2 on it. */
export class UsageError extends AgentJobError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorName.Usage, message, options);
  }
}

/** Open workflows this build cannot take over; the message is the one line an operator reads. */
export class UpgradeRefusedError extends AgentJobError {
  constructor(message: string) {
    super(ErrorName.UpgradeRefused, message);
  }
}
