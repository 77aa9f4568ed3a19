/**
 * What operators see of a workflow: the `status` query's progress and the search attributes the
 * Temporal UI filters on. Workflow code.
 */
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { SearchAttributes, type AgentJobProgress, type AgentJobRecord } from '../../contract.js';

/** How a workflow ended, as its phase shows it. */
export type EndPhase = 'completed' | 'archived' | 'failed' | 'timed-out' | 'cancelled';

/**
 * What a run knows of its job: the `status` query's fields, and the facts its phase follows from
 * (see {@link phaseOf}) instead of a phase that every step would have to keep right.
 */
export interface RunProgress extends Omit<AgentJobProgress, 'phase'> {
  /** How the workflow ended; null while it runs. */
  end: EndPhase | null;
  /** A create or message waits in the project quota's queue. */
  queued: boolean;
}

/** The phase, from the facts: an end, a wait in the quota's queue, no job yet, a message on its way. */
export function phaseOf(progress: RunProgress, sendingMessage: boolean): AgentJobProgress['phase'] {
  if (progress.end !== null) return progress.end;
  if (progress.queued) return 'queued';
  if (progress.jobId === null) return 'creating';
  return sendingMessage ? 'sending-message' : 'polling';
}

/** What the `status` query answers. */
export function statusOf(progress: RunProgress, sendingMessage: boolean): AgentJobProgress {
  const { jobId, lastRecord, polls, turns, nextPollAt, lastError, resent, queue } = progress;
  return {
    phase: phaseOf(progress, sendingMessage),
    ...{ jobId, lastRecord, polls, turns, nextPollAt, lastError, resent, queue },
  };
}

/** Tags the workflow with its project, once (a continued run has it already). */
export function showProject(projectId: string): void {
  if (workflowInfo().typedSearchAttributes.get(SearchAttributes.projectId)) return;
  upsertSearchAttributes([{ key: SearchAttributes.projectId, value: projectId }]);
}

/**
 * Records a record the API answered, and tags the workflow with its job's ID when it is not yet (a
 * continued or attached run has it). Only the ID: each upsert after the start is a billable action
 * on Temporal Cloud, and the job's status is in the `status` query, the current details and the
 * result (decision 0011).
 */
export function showRecord(progress: RunProgress, record: AgentJobRecord): void {
  progress.lastRecord = record;
  showJobId(record.id);
}

/**
 * Sets the `AgentJobId` search attribute, unless the workflow has it already (its starter set it,
 * or the run before it did).
 */
export function showJobId(jobId: string): void {
  if (workflowInfo().typedSearchAttributes.get(SearchAttributes.jobId) === jobId) return;
  upsertSearchAttributes([{ key: SearchAttributes.jobId, value: jobId }]);
}

/** Shows when the next poll comes. */
export function showNextPoll(progress: RunProgress, waitMs: number): void {
  progress.nextPollAt = new Date(Date.now() + waitMs).toISOString();
  const status = progress.lastRecord?.status ?? 'unknown';
  const resent =
    progress.resent === 0
      ? ''
      : `; ${progress.resent} calls sent again after an unknown outcome (a duplicate job or turn is possible)`;
  setCurrentDetails(
    `Agent job ${progress.jobId}: ${status} after ${progress.polls} polls; next poll at ${progress.nextPollAt}${resent}`,
  );
}

/** Shows how the workflow ended. */
export function showEnd(
  progress: RunProgress,
  phase: 'completed' | 'archived' | 'failed' | 'cancelled',
): void {
  progress.end = phase;
  progress.nextPollAt = null;
  const record = progress.lastRecord;
  if (phase === 'cancelled') {
    setCurrentDetails(
      progress.jobId === null
        ? 'Cancelled before the agent job was created: no create call succeeded.'
        : `Cancelled. The agent job ${progress.jobId} goes on at the API.`,
    );
  } else if (phase === 'failed') {
    setCurrentDetails(`Agent job ${record?.id} failed after ${progress.polls} polls`);
  } else {
    const pr = record?.prLink ? `: ${record.prLink}` : ' without a pull request';
    setCurrentDetails(`Agent job ${record?.id} ${phase}${pr}`);
  }
}
