/**
 * The exit codes of the programs that start agent jobs (the starter CLI, the GitHub Action), and
 * which one a workflow's failure gives: one table, so a CI step and a shell script read a failure
 * alike.
 */
import type { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, TerminatedFailure } from '@temporalio/common';
import { FailureType } from '../contract.js';
import { PayloadUnopenedError } from '../payload-codec/index.js';

/** The starter's exit codes. */
export const ExitCode = {
  /** Started (without --wait), or the agent job ended `completed` or `archived`. */
  Ok: 0,
  /** Anything unexpected. */
  Error: 1,
  /**
   * Bad arguments, invalid input or configuration: nothing was started, or the workflow refused
   * its input before creating anything (`InvalidInput`, `UnknownNotifyTarget`, `UnsealedInput`).
   */
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
  /**
   * The workers cannot open the workflow's payloads (a key their ring lacks or holds otherwise): it
   * is left open, retrying its task until the ring is fixed (docs/operator-actions.md).
   */
  PayloadUnopened: 9,
} as const;

/** Failure types that refuse the caller's input before anything is created. */
const CALLER_SETUP = new Set<string>([
  FailureType.InvalidInput,
  FailureType.UnknownNotifyTarget,
  FailureType.UnsealedInput,
]);

/** Maps a workflow or update failure to an exit code and its failure type. */
export function classifyFailure(e: WorkflowFailedError | WorkflowUpdateFailedError | PayloadUnopenedError): {
  code: number;
  type: string;
} {
  if (e instanceof PayloadUnopenedError) return { code: ExitCode.PayloadUnopened, type: e.name };
  const cause = e.cause;
  if (cause instanceof CancelledFailure || cause instanceof TerminatedFailure)
    return { code: ExitCode.Cancelled, type: cause.name };
  const type =
    cause instanceof ApplicationFailure ? (cause.type ?? 'ApplicationFailure') : (cause?.name ?? 'Unknown');
  if (type === FailureType.AgentJobFailed) return { code: ExitCode.AgentJobFailed, type };
  if (type === FailureType.AgentJobTimedOut) return { code: ExitCode.TimedOut, type };
  // The caller's setup, and nothing was created: a fixed input, a target the workers know, or a
  // client with the payload codec.
  if (CALLER_SETUP.has(type)) return { code: ExitCode.Usage, type };
  return { code: ExitCode.WorkflowFailed, type };
}
