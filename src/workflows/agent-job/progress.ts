/**
 * What operators see of a workflow: its phase (derived from the run's facts here, nowhere else), the
 * `status` query's answer, the current details, the search attributes (ID and project only: decision
 * 0011), the log lines alerts follow and the metrics. Reads the run, never assigns it. Workflow code.
 */
import {
  log,
  metricMeter,
  proxySinks,
  setCurrentDetails,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { SearchAttributes, type AgentJobProgress } from '../../contract.js';
import { markdownText, markdownUrl } from '../../escape.js';
import type { ProjectMetricsSinks } from '../sinks.js';

/** The per-project metrics the worker keeps (src/observability/project-metrics.ts). */
export const { projectMetrics } = proxySinks<ProjectMetricsSinks>();

/** How a workflow ended, as its phase shows it. */
export type EndPhase = 'completed' | 'archived' | 'failed' | 'timed-out' | 'cancelled';

/** What a run knows of its job: the `status` query's fields, and the facts {@link phaseOf} derives the phase from. */
export interface RunProgress extends Readonly<Omit<AgentJobProgress, 'phase'>> {
  /** How the workflow ended; null while it runs. */
  readonly end: EndPhase | null;
  /** A create or message waits in the project quota's queue. */
  readonly queued: boolean;
  /** The API refused the key (401, 403) and the workflow waits for a working one. */
  readonly waitingForKey: boolean;
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

/** Sets the `AgentJobId` search attribute, unless the workflow has it already (from its starter or an earlier run). */
export function showJobId(jobId: string): void {
  if (workflowInfo().typedSearchAttributes.get(SearchAttributes.jobId) === jobId) return;
  upsertSearchAttributes([{ key: SearchAttributes.jobId, value: jobId }]);
}

/** The API started or stopped refusing the key (`waiting`) during `doing`: one log line each, for alerts. */
export function showKeyWait(projectId: string, waiting: boolean, doing: string, status: number | null): void {
  if (waiting) {
    setCurrentDetails(keyWaitDetails(status, null));
    log.warn('the Agent Job API refuses the API key; waiting for a working one', {
      projectId,
      doing,
      status,
    });
  } else {
    log.info('the Agent Job API accepts the API key again', { projectId, doing });
    projectMetrics.keyWait(projectId, false);
  }
}

/** Counts an agent job that reached terminal status `status`. */
export function countTerminal(status: string): void {
  metricMeter
    .createCounter('agent_job_terminal', 'jobs', 'Agent jobs that reached a terminal status')
    .add(1, { status });
}

/** An agent job ID for the current details, which the UI renders as markdown: what the API sent goes through src/escape.ts. */
function jobText(jobId: string | null): string {
  return jobId === null ? '(not created)' : markdownText(jobId);
}

/** The details' warning when calls were sent again after an unknown outcome, kept to the end. */
function resentDetails(resent: number): string {
  return resent === 0
    ? ''
    : `; ${resent} calls sent again after an unknown outcome (a duplicate job or turn is possible)`;
}

/** The details while the API refuses the key; `nextTryAt` null while a call retries. */
function keyWaitDetails(status: number | null, nextTryAt: string | null, resent = 0): string {
  const next = nextTryAt === null ? 'trying again' : `next try at ${nextTryAt}`;
  return `Waiting for a working API key: the Agent Job API refused it (HTTP ${status ?? '401/403'}); ${next} with the key read afresh${resentDetails(resent)}`;
}

/** The details while the workflow waits for its next poll. */
export function nextPollDetails(progress: RunProgress): string {
  if (progress.waitingForKey) {
    return keyWaitDetails(progress.lastError?.status ?? null, progress.nextPollAt, progress.resent);
  }
  const status = markdownText(progress.lastRecord?.status ?? 'unknown');
  return `Agent job ${jobText(progress.jobId)}: ${status} after ${progress.polls} polls; next poll at ${progress.nextPollAt}${resentDetails(progress.resent)}`;
}

/** The details once the workflow has ended in `phase`. */
export function endDetails(
  progress: RunProgress,
  phase: 'completed' | 'archived' | 'failed' | 'cancelled',
): string {
  const record = progress.lastRecord;
  const resent = resentDetails(progress.resent);
  if (phase === 'cancelled') {
    return progress.jobId === null
      ? `Cancelled before the agent job was created: no create call succeeded${resent}.`
      : `Cancelled. The agent job ${jobText(progress.jobId)} goes on at the API${resent}.`;
  }
  if (phase === 'failed') {
    return `Agent job ${jobText(record?.id ?? null)} failed after ${progress.polls} polls${resent}`;
  }
  // The link is checked (src/agent-api/record.ts): an autolink a person can click, showing itself.
  const pr = record?.prLink ? `: ${markdownUrl(record.prLink)}` : ' without a pull request';
  return `Agent job ${jobText(record?.id ?? null)} ${phase}${pr}${resent}`;
}
