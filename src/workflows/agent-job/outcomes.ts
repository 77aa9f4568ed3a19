/**
 * How a turn or the workflow ends: its result, or one of the workflow's own failures, each with a
 * type from the contract's `FailureType`, a message a person can act on, and the record in its details.
 */
import { ApplicationFailure, ContinueAsNew, isCancellation, TemporalFailure } from '@temporalio/workflow';
import {
  FailureType,
  type InvalidInputError,
  type AgentJobProgress,
  type AgentJobRecord,
  type AgentJobResult,
} from '../../contract.js';

/** What a result says besides the record. */
export interface ResultContext {
  projectId: string;
  progress: Pick<AgentJobProgress, 'polls' | 'turns'>;
  /** This workflow created the agent job (false when it attached through `jobId`). */
  created: boolean;
}

/** The result of a turn that ended (the workflow's, or a follow-up's): `AgentJobFailed` for `failed`. */
export function turnResult(ctx: ResultContext, record: AgentJobRecord): AgentJobResult {
  if (record.status === 'failed') throw agentJobFailed(ctx.projectId, record);
  return {
    job: record,
    prLink: record.prLink,
    status: record.status as 'completed' | 'archived',
    polls: ctx.progress.polls,
    turns: ctx.progress.turns,
    created: ctx.created,
  };
}

/** `InvalidInput` from the input check: nothing was created. */
export function invalidInput(err: InvalidInputError): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.InvalidInput,
    message: `Invalid workflow input: ${err.message}. No agent job was created.`,
    nonRetryable: true,
    details: [{ field: err.field }],
  });
}

/** `AgentJobFailed`: the turn ended `failed`. */
export function agentJobFailed(projectId: string, record: AgentJobRecord): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.AgentJobFailed,
    message: `Agent job ${record.id} in project ${projectId} failed: the agent met an unrecoverable error. The final record is in the failure details.`,
    nonRetryable: true,
    details: [record],
  });
}

/** `UnknownStatus`: too many reads in a row in a status the API does not document. */
export function unknownStatus(record: AgentJobRecord, reads: number): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.UnknownStatus,
    message: `Agent job ${record.id} stayed in undocumented status "${record.status}" for ${reads} polls; it is not counted as done.`,
    nonRetryable: true,
    details: [record],
  });
}

/**
 * `AgentJobTimedOut`. Details: the last record, then `{ lastError }` (type, HTTP status, message)
 * so a caller can tell a slow agent job from an API that never answered.
 */
export function timedOut(
  progress: Pick<AgentJobProgress, 'lastRecord' | 'lastError' | 'jobId' | 'polls'>,
  what: string,
): ApplicationFailure {
  const { lastRecord: record, lastError } = progress;
  const errorText = lastError
    ? `, last API error ${lastError.type}${lastError.status === null ? '' : ` (HTTP ${lastError.status})`} while ${lastError.during}`
    : '';
  return ApplicationFailure.create({
    type: FailureType.AgentJobTimedOut,
    message:
      `Gave up at the workflow's deadline: ${what} (agent job ${progress.jobId ?? 'not created'}, ` +
      `last status ${record?.status ?? 'unknown'}, ${progress.polls} polls${errorText}). Raise "timeout" in the input to wait longer.`,
    nonRetryable: true,
    details: [record, { lastError }],
  });
}

/**
 * The outcome label of an error that leaves the workflow: `cancelled`, the failure type, or `error`
 * for another Temporal failure. Null when the run does not end with it: continue-as-new, or an
 * error that only fails the workflow task, which the worker runs again.
 */
export function outcomeOf(err: unknown): string | null {
  if (err instanceof ContinueAsNew) return null;
  if (isCancellation(err)) return 'cancelled';
  if (err instanceof ApplicationFailure && err.type) return err.type;
  return err instanceof TemporalFailure ? 'error' : null;
}
