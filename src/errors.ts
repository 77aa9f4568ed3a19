/**
 * Every error class the project throws, on one base with one map of names. The name is set
 * explicitly, never read from the class, which a bundler may rename; callers and logs match on it.
 * Failures that leave an activity or a workflow are `ApplicationFailure`s typed by the contract's
 * `FailureType` instead. A leaf module: workflow code and the API client import it.
 */

/** The name of each error class, as `err.name` shows it; the class's JSDoc says when it is thrown. */
export const ErrorName = {
  AgentApi: 'AgentApiError',
  InvalidAgentJobRecord: 'InvalidAgentJobRecordError',
  ApiKeyFile: 'ApiKeyFileError',
  Config: 'ConfigError',
  InvalidInput: 'InvalidInputError',
  BatchFile: 'BatchFileError',
  PayloadKeyFile: 'PayloadKeyFileError',
  UnknownPayloadKey: 'UnknownPayloadKeyError',
  SealedPayload: 'SealedPayloadError',
  PayloadUnopened: 'PayloadUnopenedError',
  NotifyTargets: 'NotifyTargetsError',
  Usage: 'UsageError',
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
