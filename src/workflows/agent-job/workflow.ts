/**
 * The agent-job workflow: create the agent job (or attach to one), poll it until its turn ends (one
 * poll activity per wait, retried by the server once per poll), send follow-up messages in order,
 * and return the final record with its prLink.
 *
 * The flow comes first; the steps it takes follow. Decisions live in pure modules (./turn.ts,
 * ../../poll-schedule.ts, ./follow-up-queue.ts, ./failure-streak.ts); this file wires them to
 * timers, activities and followUps.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  isCancellation,
  log,
  metricMeter,
  proxySinks,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import {
  FailureType,
  InvalidInputError,
  pollNowSignal,
  statusQuery,
  type AgentJobInput,
  type AgentJobRecord,
  type AgentJobResult,
} from '../../contract.js';
import { resolveInput, type ResolvedInput } from '../../input.js';
import type { ProjectMetricsSinks } from '../../observability/project-metrics.js';
import { ProjectQuotaRequester } from '../project-quota/requester.js';
import { intervalAfterAttempt, scheduleAfter } from '../../poll-schedule.js';
import { markdownText } from '../../escape.js';
import { AgentJobApi, createKey, startFollowUpKey } from './api.js';
import { FollowUps } from './follow-ups.js';
import { invalidInput, outcomeOf, timedOut, turnResult, unknownStatus } from './outcomes.js';
import { showEnd, showJobId, showNextPoll, showProject, showRecord, statusOf } from './progress.js';
import { carryOver, startRun, type Continuation } from './run-state.js';
import type { EndStatus } from './turn.js';

export type { Continuation } from './run-state.js';

/**
 * Poll activities per run before continue-as-new: each ends with about 6 history events (its own
 * three and a workflow task), however many polls its attempts made. A job that stays `active` adds
 * none while its poll activity waits on the server: what fills a run is pollNow, follow-ups, the
 * failures the workflow handles and reads that are not `active`.
 */
export const POLLS_PER_RUN = 150;

/** Drives one agent job to its end. `carried` is set only by continue-as-new. */
export async function agentJobWorkflow(
  input: AgentJobInput,
  carried?: Continuation,
): Promise<AgentJobResult> {
  // Validate: nothing is created from a bad input.
  const resolved = validate(input);
  const { projectId } = resolved;
  const run = startRun(resolved, carried);
  const { progress, turn, schedule, wait } = run;
  const { projectMetrics } = proxySinks<ProjectMetricsSinks>();
  const quota = new ProjectQuotaRequester(projectId);
  const api = new AgentJobApi({
    projectId,
    poll: resolved.poll,
    tolerances: { blipMs: resolved.blipToleranceMs, credentialMs: resolved.credentialToleranceMs },
    run,
    quota,
    timedOut: deadline,
  });
  const followUps = new FollowUps({ projectId, progress, created: run.created, turn, schedule, wait, api });

  setHandler(statusQuery, () =>
    statusOf({ ...progress, queued: quota.queued, queue: quota.queue }, followUps.sending),
  );
  setHandler(pollNowSignal, () => wait.request());
  followUps.listen(carried?.followUps);

  // Create or attach, then poll until done with the follow-ups on the way.
  try {
    showProject(projectId);
    const jobId =
      carried?.jobId ??
      (resolved.jobId === undefined ? await create(resolved.prompt) : attach(resolved.jobId));
    const polled = pollUntilDone(jobId);
    if (carried || !resolved.jobId || resolved.prompt === undefined) return await polled;
    // `{ jobId, prompt }`: the prompt is a follow-up; a failed send fails the workflow.
    const sent = followUps.queueAtStart(resolved.prompt, startFollowUpKey());
    return await Promise.race([polled, sent.then(() => polled)]);
  } catch (err) {
    // A message on its way ends at the same deadline (its activity's schedule-to-close is the time
    // left): its update fails with its own error before the run closes, whichever of the poll and
    // the message reached the deadline first. Otherwise the caller would hear only that the workflow
    // completed while the update ran.
    if (err instanceof ApplicationFailure && err.type === FailureType.AgentJobTimedOut) {
      await condition(() => !followUps.sending);
    }
    const outcome = outcomeOf(err);
    if (outcome !== null) reportEnd(outcome, false);
    if (isCancellation(err)) showEnd(progress, 'cancelled');
    // The quota's deadline and final API errors end the workflow too: the phase says so.
    else if (err instanceof ApplicationFailure) {
      progress.end = err.type === FailureType.AgentJobTimedOut ? 'timed-out' : 'failed';
      progress.nextPollAt = null;
    }
    throw err;
  } finally {
    // The quota's release signals must leave before the run closes, or the server drops them.
    await quota.settle();
  }

  function deadline(what: string) {
    progress.end = 'timed-out';
    progress.nextPollAt = null;
    return timedOut(progress, what);
  }

  async function create(prompt: string): Promise<string> {
    setCurrentDetails(`Creating the agent job in project ${markdownText(projectId)}`);
    // A run reset to a point before its create completed cannot know whether the run it replaces
    // had sent it, nor can a run started again after one ended with its create on the wire: the
    // ambiguous-call policy decides, as after a lost answer.
    const { runId, originalExecutionRunId } = workflowInfo();
    const uncertain =
      runId === originalExecutionRunId
        ? resolved.previousCreate
        : 'the run this one was reset from (it may have created the agent job before the reset point)';
    const record = await api.create(prompt, createKey(), uncertain);
    progress.jobId = record.id;
    showRecord(progress, record);
    return record.id;
  }

  function attach(jobId: string): string {
    showJobId(jobId);
    // Attaching to an existing agent job: read it at once rather than after a first wait.
    wait.request();
    return jobId;
  }

  /**
   * Polls until a turn ends with no message pending, continuing as new every POLLS_PER_RUN poll
   * activities. Each pass waits (the schedule's timer, unless a poll is requested), then runs one
   * poll activity, which polls by server-side retry until the job is no longer `active`.
   */
  async function pollUntilDone(jobId: string): Promise<AgentJobResult> {
    const pollsPerRun = resolved.continueAsNewAfterPolls ?? POLLS_PER_RUN;
    // Failed poll activities count too: that bounds a run's history however long the API stays down.
    let pollsThisRun = 0;
    let retryInMs: number | null = null;
    for (;;) {
      if ((progress.polls > 0 || pollsThisRun > 0) && Date.now() >= run.deadlineMs) {
        // A message on its way ends at the same deadline: the catch below waits for its error.
        throw deadline('the agent job was still working');
      }
      if (followUps.ready) wait.request();
      const waitMs = schedule.waitMs(Date.now(), run.deadlineMs, Math.random, retryInMs);
      const timed = !wait.requested;
      if (timed) showNextPoll(progress, waitMs);
      await wait.for(waitMs, `wait ${Math.round(waitMs / 1000)}s before polling`);
      // After a wait of the schedule, the poll activity's first wait is the schedule's next one.
      if (timed && retryInMs === null) schedule.grow();
      progress.nextPollAt = null;
      retryInMs = null;
      // Messages start only here, after a wait: the same point whichever task brought them.
      if (followUps.sendNext(jobId)) continue;
      const turnOfRead = turn.number;
      const startedAt = Date.now();
      const intervalMs = schedule.intervalMs;
      const read = await wait.poll(() => api.poll(jobId, intervalMs));
      pollsThisRun++;
      const pollSchedule = { ...resolved.poll, intervalMs };
      if (read === null || !read.value.ok) {
        // Cancelled for a requested poll, its attempts unseen: the schedule goes on from where
        // they would have brought it (and a failure waits as the workflow decided).
        const reached = scheduleAfter(pollSchedule, Date.now() - startedAt);
        if (read === null) progress.polls += reached.polls;
        else if (!read.value.ok) retryInMs = read.value.retryInMs;
        // A message answered meanwhile restarted the schedule for its turn: that one stands.
        if (turnOfRead === turn.number) schedule.intervalMs = reached.intervalMs;
      } else {
        const { record, polls } = read.value.value;
        progress.polls += polls;
        if (turnOfRead !== turn.number) {
          // A message was answered while this poll was under way: it may show the turn before.
          wait.request();
        } else {
          schedule.intervalMs = intervalAfterAttempt(pollSchedule, polls);
          showRecord(progress, record);
          const ended = endOf(record);
          if (ended !== null && !followUps.pending) {
            await condition(allHandlersFinished);
            return finish(ended, record);
          }
        }
      }
      const runIsLong = pollsThisRun >= pollsPerRun || workflowInfo().continueAsNewSuggested;
      if (runIsLong && !followUps.holdsRun) return await continueAsNewNow(jobId);
    }
  }

  /** The status that ends the turn, or null to poll on. */
  function endOf(record: AgentJobRecord): EndStatus | null {
    const reading = turn.read(record, followUps.sending, Date.now());
    if (reading.kind === 'unknown-status') {
      log.warn('agent job in an undocumented status; polling on', {
        status: record.status,
        jobId: record.id,
      });
      if (reading.giveUp) throw unknownStatus(record, reading.inARow);
    }
    if (reading.kind !== 'ended') return null;
    followUps.turnEnded(record);
    return reading.status;
  }

  async function continueAsNewNow(jobId: string): Promise<never> {
    // `followUp` handlers still waiting are left behind (ABANDON): the next run carries them.
    await condition(() => allHandlersFinished() || !followUps.holdsRun);
    // A follow-up message may have held the run until the deadline: end here, not in a new run.
    if (Date.now() >= run.deadlineMs) throw deadline('the agent job was still working');
    log.info('continuing as new to keep the history bounded', { polls: progress.polls });
    return continueAsNew<typeof agentJobWorkflow>(input, carryOver(run, jobId, followUps.carried));
  }

  /** Tells the per-project metrics how the job ended, counted from the first run's start. */
  function reportEnd(outcome: string, hasPrLink: boolean): void {
    const startedAtMs = run.deadlineMs - resolved.timeoutMs;
    projectMetrics.jobEnded(projectId, outcome, Math.max(0, Date.now() - startedAtMs) / 1000, hasPrLink);
  }

  function finish(status: EndStatus, record: AgentJobRecord): AgentJobResult {
    metricMeter
      .createCounter('agent_job_terminal', 'jobs', 'Agent jobs that reached a terminal status')
      .add(1, { status });
    showEnd(progress, status);
    // Throws AgentJobFailed for `failed`, which the catch below reports.
    const result = turnResult({ projectId, progress, created: run.created }, record);
    reportEnd(status, result.prLink !== null);
    return result;
  }
}

function validate(input: AgentJobInput): ResolvedInput {
  try {
    return resolveInput(input);
  } catch (err) {
    if (err instanceof InvalidInputError) throw invalidInput(err);
    throw err;
  }
}
