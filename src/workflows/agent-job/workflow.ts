/**
 * The agent-job workflow: create the agent job (or attach to one), poll it on durable timers until
 * its turn ends, send follow-up messages in order, and return the final record with its prLink.
 *
 * Decisions live in pure modules (./turn.ts, ./poll-schedule.ts, ./follow-ups.ts,
 * ./failure-streak.ts); this file wires them to timers, activities and messages.
 */
import {
  allHandlersFinished,
  condition,
  continueAsNew,
  isCancellation,
  log,
  metricMeter,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import {
  InvalidInputError,
  pollNowSignal,
  resolveInput,
  statusQuery,
  type AgentJobInput,
  type AgentJobProgress,
  type AgentJobRecord,
  type AgentJobResult,
  type ResolvedInput,
} from '../../contract.js';
import { ProjectQuotaRequester } from '../quota-requester.js';
import { AgentJobCalls, type CallsContext } from './calls.js';
import { FailureStreak, type FailureStreakState } from './failure-streak.js';
import { createKey, startFollowUpKey } from './keys.js';
import { Messages } from './messages.js';
import { invalidInput, timedOut, turnResult, unknownStatus } from './outcomes.js';
import { PollSchedule } from './poll-schedule.js';
import { PollWait } from './poll-wait.js';
import { showAttached, showProject, showRecord } from './progress.js';
import { Turn, type EndStatus, type TurnState } from './turn.js';

/** Polls per run before continue-as-new: about 6 history events each (11 as regular activities). */
export const POLLS_PER_RUN = 150;

/** What a run carries into the next through continue-as-new. Callers never set it. */
export interface Continuation {
  jobId: string;
  created: boolean;
  deadlineMs: number;
  progress: Pick<AgentJobProgress, 'polls' | 'lastRecord' | 'lastError'>;
  turn: TurnState;
  intervalMs: number;
  streak: FailureStreakState;
  pollRequested: boolean;
  quotaUses: number;
}

/** Drives one agent job to its end. `carried` is set only by continue-as-new. */
export async function agentJobWorkflow(
  input: AgentJobInput,
  carried?: Continuation,
): Promise<AgentJobResult> {
  // Validate input: nothing is created from a bad one.
  const resolved = validate(input);
  const { projectId } = resolved;

  // State, by concern.
  const progress: AgentJobProgress = {
    phase: carried || resolved.jobId ? 'polling' : 'creating',
    jobId: carried?.jobId ?? resolved.jobId ?? null,
    lastRecord: carried?.progress.lastRecord ?? null,
    polls: carried?.progress.polls ?? 0,
    turns: carried?.turn.turns ?? 1,
    nextPollAt: null,
    lastError: carried?.progress.lastError ?? null,
    queue: null,
  };
  const deadlineMs = carried?.deadlineMs ?? Date.now() + resolved.timeoutMs;
  const created = carried?.created ?? !resolved.jobId;
  const turn = new Turn(carried?.turn);
  const schedule = new PollSchedule(resolved.poll, carried?.intervalMs);
  const wait = new PollWait(carried?.pollRequested);
  const quota = new ProjectQuotaRequester(projectId, progress);
  const api: CallsContext = {
    projectId,
    deadlineMs,
    localPolls: resolved.poll.localActivity,
    progress,
    streak: new FailureStreak(carried?.streak),
    quota,
    quotaUses: carried?.quotaUses ?? 0,
    timedOut: (what) => deadline(what),
  };
  const calls = new AgentJobCalls(api);
  const messages = new Messages({ projectId, progress, created, turn, schedule, wait, calls });

  // Handlers.
  setHandler(statusQuery, () => progress);
  setHandler(pollNowSignal, () => wait.request());
  messages.listen();

  function deadline(what: string) {
    progress.phase = 'timed-out';
    progress.nextPollAt = null;
    return timedOut(progress, what);
  }

  /** Polls until a turn ends with no message pending, continuing as new every POLLS_PER_RUN polls. */
  async function pollUntilDone(): Promise<AgentJobResult> {
    const pollsPerRun = resolved.continueAsNewAfterPolls ?? POLLS_PER_RUN;
    // Failed polls count too: that bounds a run's history however long the API stays down.
    let pollsThisRun = 0;
    let retryInMs: number | null = null;
    for (;;) {
      if ((progress.polls > 0 || pollsThisRun > 0) && Date.now() >= deadlineMs) {
        // A message on its way ends at the same deadline: let its error be the one named.
        await condition(() => !messages.sending);
        throw deadline('the agent job was still working');
      }
      if (messages.ready) wait.request();
      await waitForPoll(retryInMs);
      retryInMs = null;
      // Messages start only here, after a wait: the same point whichever task brought them.
      if (messages.sendNext()) continue;
      const turnOfRead = turn.number;
      const read = await calls.read(progress.jobId as string, progress.polls + 1);
      pollsThisRun++;
      if (!read.ok) {
        retryInMs = read.retryInMs;
      } else if (turnOfRead !== turn.number) {
        // A message was answered while this read was under way: it may show the turn before.
        progress.polls++;
        wait.request();
      } else {
        progress.polls++;
        const ended = judge(read.value);
        if (ended !== null && !messages.pending) {
          await condition(allHandlersFinished);
          return finish(ended);
        }
        schedule.grow();
      }
      const runIsLong = pollsThisRun >= pollsPerRun || workflowInfo().continueAsNewSuggested;
      if (runIsLong && !messages.open) return await continueAsNewNow();
    }
  }

  /** Records a read and decides whether it ends the turn. */
  function judge(record: AgentJobRecord): EndStatus | null {
    showRecord(progress, record, messages.sending);
    const reading = turn.read(record, messages.sending);
    if (reading.kind === 'unknown-status') {
      log.warn('agent job in an undocumented status; polling on', {
        status: record.status,
        jobId: record.id,
      });
      if (reading.giveUp) throw unknownStatus(record, reading.inARow);
    }
    return reading.kind === 'ended' ? reading.status : null;
  }

  async function waitForPoll(retryAfterFailureMs: number | null): Promise<void> {
    const ms = schedule.waitMs(Date.now(), deadlineMs, Math.random, retryAfterFailureMs);
    if (!wait.requested) {
      progress.nextPollAt = new Date(Date.now() + ms).toISOString();
      const status = progress.lastRecord?.status ?? 'unknown';
      setCurrentDetails(
        `Agent job ${progress.jobId}: ${status} after ${progress.polls} polls; next poll at ${progress.nextPollAt}`,
      );
    }
    await wait.for(ms, `wait ${Math.round(ms / 1000)}s before poll ${progress.polls + 1}`);
    progress.nextPollAt = null;
  }

  async function continueAsNewNow(): Promise<never> {
    await condition(allHandlersFinished);
    // A follow-up message may have held the run until the deadline: end here, not in a new run.
    if (Date.now() >= deadlineMs) throw deadline('the agent job was still working');
    log.info('continuing as new to keep the history bounded', { polls: progress.polls });
    return continueAsNew<typeof agentJobWorkflow>(input, {
      jobId: progress.jobId as string,
      created,
      deadlineMs,
      progress: { polls: progress.polls, lastRecord: progress.lastRecord, lastError: progress.lastError },
      turn: turn.state,
      intervalMs: schedule.intervalMs,
      streak: api.streak.state,
      pollRequested: wait.requested,
      quotaUses: api.quotaUses,
    });
  }

  function finish(status: EndStatus): AgentJobResult {
    const record = progress.lastRecord as AgentJobRecord;
    metricMeter
      .createCounter('agent_job_terminal', 'jobs', 'Agent jobs that reached a terminal status')
      .add(1, { status });
    progress.phase = status;
    const pr = record.prLink ? `: ${record.prLink}` : ' without a pull request';
    const outcome = status === 'failed' ? ` after ${progress.polls} polls` : pr;
    setCurrentDetails(`Agent job ${record.id} ${status}${outcome}`);
    return turnResult({ projectId, progress, created }, record);
  }

  // Create or attach, poll until done, with the follow-ups on the way; return.
  try {
    showProject(projectId);
    if (progress.jobId === null) {
      setCurrentDetails(`Creating the agent job in project ${projectId}`);
      // resolveInput requires a prompt whenever there is no jobId, and only then is a job created.
      const record = await calls.create(resolved.prompt as string, createKey());
      progress.jobId = record.id;
      showRecord(progress, record, false);
    } else if (!carried) {
      showAttached(progress.jobId);
      // Attaching to an existing agent job: read it at once rather than after a first wait.
      wait.request();
    }
    const polled = pollUntilDone();
    if (carried || !resolved.jobId || resolved.prompt === undefined) return await polled;
    // `{ jobId, prompt }`: the prompt is a follow-up; a failed send fails the workflow.
    const sent = messages.queueAtStart(resolved.prompt, startFollowUpKey());
    return await Promise.race([polled, sent.then(() => polled)]);
  } catch (err) {
    if (isCancellation(err)) {
      progress.phase = 'cancelled';
      progress.nextPollAt = null;
      setCurrentDetails(
        progress.jobId === null
          ? 'Cancelled before the agent job was created: no create call succeeded.'
          : `Cancelled. The agent job ${progress.jobId} goes on at the API.`,
      );
    }
    throw err;
  } finally {
    // The quota's spent and release signals must leave before the run closes, or the server drops them.
    await quota.settle();
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
