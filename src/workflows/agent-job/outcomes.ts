/**
 * How a turn or the workflow ends: its result, or one of the workflow's own failures, each with a
 * type from the contract's `FailureType`, a message a person can act on, and the record in its details.
 *
 * A failure's message is plain text, not markdown: a terminal, a caller's code, a Nexus caller and
 * logs read it (the Temporal UI renders details and summaries as markdown, not messages). So what
 * came from the API or the caller goes in JSON-quoted (`quoted`): the quotes show where the value
 * ends, control characters are `\u` escapes, and it can be copied back exactly, where markdown's
 * backslashes would garble every ID (`job\_1`); a markdown renderer escapes it there (src/escape.ts).
 */
import { ApplicationFailure, ContinueAsNew, isCancellation, TemporalFailure } from '@temporalio/workflow';
import {
  FailureType,
  type InvalidInputError,
  type AgentJobProgress,
  type AgentJobRecord,
  type AgentJobResult,
} from '../../contract.js';
import { quoted } from '../../escape.js';

/** What a result says besides the record: the run's counts, and whether it created the agent job. */
type RunFacts = Pick<AgentJobProgress, 'polls' | 'turns' | 'resent'> & {
  projectId: string;
  created: boolean;
};

/** The result of a turn that ended (the workflow's, or a follow-up's): `AgentJobFailed` for `failed`. */
export function turnResult(run: RunFacts, record: AgentJobRecord): AgentJobResult {
  if (record.status === 'failed') throw agentJobFailed(run.projectId, record, run.resent);
  const { polls, turns, created, resent } = run;
  return {
    job: record,
    prLink: record.prLink,
    status: record.status as 'completed' | 'archived',
    polls,
    turns,
    created,
    resent,
  };
}

/** The sentence a failure's message ends with when calls were sent again, else nothing. */
function resentNote(resent: number): string {
  if (resent === 0) return '';
  return ` ${resent} creates or messages were sent again after an attempt whose outcome was unknown: a duplicate agent job or turn is possible.`;
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

/**
 * `UnsealedInput`: the input arrived in plain text on a worker that seals payloads. The message
 * names no input field: it is the one failure that says the input is exposed.
 */
export function unsealedInput(): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.UnsealedInput,
    message:
      'The workflow input arrived in plain text on a worker that seals payloads (TEMPORAL_PAYLOAD_KEYS_FILE is set), ' +
      "so it is stored in plain text in this workflow's history already. Start the job again from a client with the " +
      'payload codec (the starter with TEMPORAL_PAYLOAD_KEYS_FILE, a library client with payloadDataConverter). ' +
      'No agent job was created.',
    nonRetryable: true,
  });
}

/** `AgentJobFailed`: the turn ended `failed`. Details: the final record, then `{ resent }`. */
export function agentJobFailed(
  projectId: string,
  record: AgentJobRecord,
  resent: number,
): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.AgentJobFailed,
    message:
      `Agent job ${quoted(record.id)} in project ${quoted(projectId)} failed: the agent met an unrecoverable error. ` +
      `The final record is in the failure details.${resentNote(resent)}`,
    nonRetryable: true,
    details: [record, { resent }],
  });
}

/** `UnknownStatus`: too many reads in a row in a status the API does not document. */
export function unknownStatus(record: AgentJobRecord, reads: number): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.UnknownStatus,
    message: `Agent job ${quoted(record.id)} stayed in undocumented status ${quoted(record.status)} for ${reads} polls; it is not counted as done.`,
    nonRetryable: true,
    details: [record],
  });
}

/**
 * `AgentJobTimedOut`. Details: the last record, then `{ lastError, resent }`, so a caller can tell
 * a slow agent job from an API that never answered.
 */
export function timedOut(
  progress: Pick<AgentJobProgress, 'lastRecord' | 'lastError' | 'jobId' | 'polls' | 'resent'>,
  what: string,
): ApplicationFailure {
  const { lastRecord: record, lastError, resent } = progress;
  const errorText = lastError
    ? `, last API error ${lastError.type}${lastError.status === null ? '' : ` (HTTP ${lastError.status})`} while ${lastError.during}`
    : '';
  return ApplicationFailure.create({
    type: FailureType.AgentJobTimedOut,
    message:
      `Gave up at the workflow's deadline: ${what} (agent job ${progress.jobId === null ? 'not created' : quoted(progress.jobId)}, ` +
      `last status ${record ? quoted(record.status) : 'unknown'}, ${progress.polls} polls${errorText}). ` +
      `Raise "timeout" in the input to wait longer.${resentNote(resent)}`,
    nonRetryable: true,
    details: [record, { lastError, resent }],
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
