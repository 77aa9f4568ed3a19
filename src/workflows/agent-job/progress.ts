/**
 * What operators see of a workflow: the `status` query's progress and the search attributes the
 * Temporal UI filters on. Workflow code.
 */
import { setCurrentDetails, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { SearchAttributes, type AgentJobProgress, type AgentJobRecord } from '../../contract.js';
import { markdownText, markdownUrl } from '../../escape.js';

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
  /** The API refused the key (401, 403) and the workflow waits for a working one. */
  waitingForKey: boolean;
}

/** The phase, from the facts: an end, a wait in the quota's queue, no job yet, a message on its way. */
export function phaseOf(progress: RunProgress, sendingMessage: boolean): AgentJobProgress['phase'] {
  if (progress.end !== null) return progress.end;
  if (progress.queued) return 'queued';
  if (progress.waitingForKey) return 'waiting-for-api-key';
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

/**
 * An agent job ID for the current details. The Temporal UI renders them as markdown, so what the
 * API sent (the job's ID, status and link) goes in through src/escape.ts: it shows as the text it
 * is, never as a link or markup of its own.
 */
function jobText(jobId: string | null): string {
  return jobId === null ? '(not created)' : markdownText(jobId);
}

/** The details' warning when calls were sent again after an unknown outcome, kept to the end. */
function resentDetails(resent: number): string {
  return resent === 0
    ? ''
    : `; ${resent} calls sent again after an unknown outcome (a duplicate job or turn is possible)`;
}

/** Shows when the next poll comes. */
export function showNextPoll(progress: RunProgress, waitMs: number): void {
  progress.nextPollAt = new Date(Date.now() + waitMs).toISOString();
  const status = markdownText(progress.lastRecord?.status ?? 'unknown');
  const resent = resentDetails(progress.resent);
  if (progress.waitingForKey) {
    setCurrentDetails(
      `Waiting for a working API key: the Agent Job API refused it (HTTP ${progress.lastError?.status ?? '401/403'}); next try at ${progress.nextPollAt} with the key read afresh${resent}`,
    );
    return;
  }
  setCurrentDetails(
    `Agent job ${jobText(progress.jobId)}: ${status} after ${progress.polls} polls; next poll at ${progress.nextPollAt}${resent}`,
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
  const resent = resentDetails(progress.resent);
  if (phase === 'cancelled') {
    setCurrentDetails(
      progress.jobId === null
        ? `Cancelled before the agent job was created: no create call succeeded${resent}.`
        : `Cancelled. The agent job ${jobText(progress.jobId)} goes on at the API${resent}.`,
    );
  } else if (phase === 'failed') {
    setCurrentDetails(
      `Agent job ${jobText(record?.id ?? null)} failed after ${progress.polls} polls${resent}`,
    );
  } else {
    // The link is checked (src/agent-api/record.ts): an autolink a person can click, showing itself.
    const pr = record?.prLink ? `: ${markdownUrl(record.prLink)}` : ' without a pull request';
    setCurrentDetails(`Agent job ${jobText(record?.id ?? null)} ${phase}${pr}${resent}`);
  }
}
