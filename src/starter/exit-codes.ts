/**
 * The exit codes of the starter CLI and the GitHub Action, and which one a workflow's failure
 * gives: one table, so a CI step and a shell script read a failure alike.
 */
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { failureTypeOf } from '../client/batch.js';
import { FailureType } from '../contract.js';
import { PayloadUnopenedError } from '../payload-codec/index.js';

/** The starter's exit codes. */
export const ExitCode = {
  /** Started (without --wait), or the agent job ended `completed` or `archived`. */
  Ok: 0,
  /** Anything unexpected. */
  Error: 1,
  /** Bad arguments, input or configuration: nothing was started, or the workflow refused its input. */
  Usage: 2,
  /** The agent job ended `failed`. */
  AgentJobFailed: 3,
  /** The agent job was still working at the workflow's deadline. */
  TimedOut: 4,
  /** The Temporal server could not be reached. */
  Connection: 5,
  /** The workflow failed for another reason (API refused the key, project not found, ...). */
  WorkflowFailed: 6,
  /** The workflow was cancelled or terminated. */
  Cancelled: 7,
  /** `batch --wait`: at least one job of the batch did not succeed (the summary says which). */
  BatchIncomplete: 8,
  /** The workers cannot open the workflow's payloads: it retries until the ring is fixed (docs/operator-actions.md). */
  PayloadUnopened: 9,
} as const;

/** The exit code of each failure type that has its own; any other exits {@link ExitCode.WorkflowFailed}. */
const EXIT_CODES: Readonly<Record<string, number>> = {
  Cancelled: ExitCode.Cancelled,
  Terminated: ExitCode.Cancelled,
  [FailureType.AgentJobFailed]: ExitCode.AgentJobFailed,
  [FailureType.AgentJobTimedOut]: ExitCode.TimedOut,
  [FailureType.InvalidInput]: ExitCode.Usage,
  [FailureType.UnknownNotifyTarget]: ExitCode.Usage,
  [FailureType.UnsealedInput]: ExitCode.Usage,
};

/**
 * A workflow's, an update's or an unopened payload's failure: its exit code, failure type
 * ({@link failureTypeOf}), message and details; null for any other error.
 */
export function classifyFailure(
  e: unknown,
): { code: number; type: string; message: string; details?: unknown[] | null } | null {
  if (e instanceof PayloadUnopenedError)
    return { code: ExitCode.PayloadUnopened, type: e.name, message: e.message };
  if (!(e instanceof WorkflowFailedError) && !(e instanceof WorkflowUpdateFailedError)) return null;
  const type = failureTypeOf(e);
  const details = e.cause instanceof ApplicationFailure ? e.cause.details : undefined;
  return {
    code: EXIT_CODES[type] ?? ExitCode.WorkflowFailed,
    type,
    message: e.cause?.message ?? e.message,
    details,
  };
}
