/**
 * The agent-job workflow: create the agent job (or attach to one), poll it on durable timers until
 * its turn ends, send follow-up messages in order, and return the final record with its prLink.
 *
 * The decisions live in pure modules (./turn.ts, ./poll-schedule.ts, ./follow-ups.ts,
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
import { HandlerUnfinishedPolicy } from '@temporalio/common';
import {
  followUpUpdate,
  InvalidInputError,
  MAX_QUEUED_FOLLOW_UPS,
  pollNowSignal,
  resolveInput,
  sendMessageUpdate,
  statusQuery,
  type AgentJobInput,
  type AgentJobProgress,
  type AgentJobRecord,
  type AgentJobResult,
  type ResolvedInput,
} from '../../contract.js';
import { ProjectQuotaRequester } from '../quota-requester.js';
import { AgentJobCalls } from './calls.js';
import { agentJobFailed, invalidInput, timedOut, unknownStatus } from './failures.js';
import { FailureStreak, type FailureStreakState } from './failure-streak.js';
import { FollowUpQueue, type SendWhen } from './follow-ups.js';
import { createKey, startFollowUpKey, updateMessageKey } from './keys.js';
import { PollSchedule } from './poll-schedule.js';
import { PollWait } from './poll-wait.js';
import { showProject, showRecord, showAttached, validatePrompt } from './progress.js';
import { Turn, type EndStatus, type TurnState } from './turn.js';

/**
 * Polls per run before continue-as-new: a local-activity poll adds about 6 history events, a
 * regular one about 11, so a run stays well under 2,000 events.
 */
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

/** A queued follow-up: its prompt and key, and how to tell its sender what became of it. */
interface FollowUp {
  prompt: string;
  key: string;
  answered(record: AgentJobRecord, turn: number): void;
  failed(err: unknown): void;
}

/** Drives one agent job to its end. `carried` is set only by continue-as-new. */
export async function agentJobWorkflow(
  input: AgentJobInput,
  carried?: Continuation,
): Promise<AgentJobResult> {
  const resolved = validate(input);
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
  const wait = new PollWait();
  wait.requested = carried?.pollRequested ?? false;
  const followUps = new FollowUpQueue<FollowUp>();
  const quota = new ProjectQuotaRequester(resolved.projectId, progress);
  const deadline = (what: string) => {
    progress.phase = 'timed-out';
    progress.nextPollAt = null;
    return timedOut(progress, what);
  };
  const callsContext = {
    projectId: resolved.projectId,
    deadlineMs,
    localPolls: resolved.poll.localActivity,
    progress,
    streak: new FailureStreak(carried?.streak),
    quota,
    quotaUses: carried?.quotaUses ?? 0,
    timedOut: deadline,
  };
  const calls = new AgentJobCalls(callsContext);

  /** Queues a follow-up; resolves with its answer and the turn it started. */
  function queueFollowUp(prompt: string, when: SendWhen, key: string) {
    return new Promise<{ record: AgentJobRecord; turn: number }>((resolve, reject) => {
      followUps.add(
        { prompt, key, answered: (record, n) => resolve({ record, turn: n }), failed: reject },
        when,
      );
      if (followUps.ready(turn.idle)) wait.request();
    });
  }

  /** Sends a follow-up; polls go on meanwhile (it may wait for the project's quota). */
  async function send(followUp: FollowUp): Promise<void> {
    const before = progress.phase;
    progress.phase = 'sending-message';
    try {
      const record = await calls.sendMessage(
        progress.jobId as string,
        followUp.prompt,
        followUp.key,
        turn.number + 1,
      );
      turn.messageAnswered(record);
      progress.turns = turn.number;
      showRecord(progress, record, true);
      schedule.restart();
      wait.request();
      followUp.answered(record, turn.number);
    } catch (err) {
      followUp.failed(err);
    } finally {
      followUps.sent();
      progress.phase = before === 'sending-message' ? 'polling' : before;
    }
  }

  setHandler(statusQuery, () => progress);
  setHandler(pollNowSignal, () => wait.request());
  setHandler(
    sendMessageUpdate,
    async (prompt) => {
      try {
        return (await queueFollowUp(prompt, 'now', updateMessageKey(turn.number))).record;
      } finally {
        followUps.close();
      }
    },
    {
      validator: (prompt) => {
        validatePrompt('sendMessage', prompt);
        if (progress.jobId === null)
          throw new Error('the agent job is not created yet; try again in a moment');
        if (followUps.busy) throw new Error('a follow-up message is already being sent; wait for it');
        if (!['polling', 'creating'].includes(progress.phase)) {
          throw new Error(`the workflow is ${progress.phase}; it takes no more messages`);
        }
      },
      description: 'Send a follow-up prompt to the agent job and resume polling until the new turn ends',
    },
  );
  setHandler(
    followUpUpdate,
    async (prompt) => {
      try {
        const sent = await queueFollowUp(prompt, 'after-turn', updateMessageKey(turn.number));
        await condition(() => turn.state.ended >= sent.turn);
        return turnResult(progress.lastRecord as AgentJobRecord);
      } finally {
        followUps.close();
      }
    },
    {
      validator: (prompt) => {
        validatePrompt('followUp', prompt);
        if (!['queued', 'creating', 'polling', 'sending-message'].includes(progress.phase)) {
          throw new Error(`the workflow is ${progress.phase}; it takes no more follow-ups`);
        }
        if (followUps.queued >= MAX_QUEUED_FOLLOW_UPS) {
          throw new Error(`${MAX_QUEUED_FOLLOW_UPS} follow-ups are already queued; wait for them`);
        }
      },
      // A workflow that ends at its deadline leaves waiting follow-ups behind: their callers read
      // the workflow's own failure instead.
      unfinishedPolicy: HandlerUnfinishedPolicy.ABANDON,
      description:
        'Queue a follow-up prompt: sent once the turn in progress ends, returns when its own turn ends',
    },
  );

  /** Polls until the turn ends with nothing queued, continuing as new every POLLS_PER_RUN polls. */
  async function pollUntilDone(): Promise<AgentJobResult> {
    const pollsPerRun = resolved.continueAsNewAfterPolls ?? POLLS_PER_RUN;
    // Failed polls count too: that bounds a run's history however long the API stays down.
    let pollsThisRun = 0;
    let retryInMs: number | null = null;
    for (;;) {
      if ((progress.polls > 0 || pollsThisRun > 0) && Date.now() >= deadlineMs) {
        // A message on its way ends at the same deadline: let its error be the one named.
        await condition(() => !followUps.sending);
        throw deadline('the agent job was still working');
      }
      if (followUps.ready(turn.idle)) wait.request();
      await waitForPoll(retryInMs);
      retryInMs = null;
      // Follow-ups start only here, after a wait: the same point whichever task brought them.
      const followUp = followUps.next(turn.idle);
      if (followUp) {
        void send(followUp);
        continue;
      }
      const jobId = progress.jobId as string;
      const turnOfRead = turn.number;
      const read = await calls.read(jobId, progress.polls + 1);
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
        if (ended !== null && followUps.queued === 0 && !followUps.sending) {
          if (followUps.open > 0) await condition(allHandlersFinished);
          return finish(ended);
        }
        schedule.grow();
      }
      const runIsLong = pollsThisRun >= pollsPerRun || workflowInfo().continueAsNewSuggested;
      // An open follow-up cannot move to the next run (an update cannot), so it is watched here.
      if (runIsLong && followUps.open === 0) return await continueAsNewNow();
    }
  }

  /** Records a read and decides whether it ends the turn. */
  function judge(record: AgentJobRecord): EndStatus | null {
    showRecord(progress, record, followUps.sending);
    const reading = turn.read(record, followUps.sending);
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
    const at = new Date(Date.now() + ms).toISOString();
    if (!wait.requested) {
      progress.nextPollAt = at;
      setCurrentDetails(
        `Agent job ${progress.jobId}: ${progress.lastRecord?.status ?? 'unknown'} after ${progress.polls} polls; next poll at ${at}`,
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
      streak: callsContext.streak.state,
      pollRequested: wait.requested,
      quotaUses: callsContext.quotaUses,
    });
  }

  function finish(status: EndStatus): AgentJobResult {
    const record = progress.lastRecord as AgentJobRecord;
    metricMeter
      .createCounter('agent_job_terminal', 'jobs', 'Agent jobs that reached a terminal status')
      .add(1, { status });
    progress.phase = status;
    setCurrentDetails(
      status === 'failed'
        ? `Agent job ${record.id} failed after ${progress.polls} polls`
        : `Agent job ${record.id} ${status}${record.prLink ? `: ${record.prLink}` : ' without a pull request'}`,
    );
    return turnResult(record);
  }

  /** The result of a turn that ended: the workflow's, or a follow-up's. */
  function turnResult(record: AgentJobRecord): AgentJobResult {
    if (record.status === 'failed') throw agentJobFailed(resolved.projectId, record);
    const status = record.status as Exclude<EndStatus, 'failed'>;
    return {
      job: record,
      prLink: record.prLink,
      status,
      polls: progress.polls,
      turns: progress.turns,
      created,
    };
  }

  try {
    showProject(resolved.projectId);
    if (progress.jobId === null) {
      setCurrentDetails(`Creating the agent job in project ${resolved.projectId}`);
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
    const sent = queueFollowUp(resolved.prompt, 'after-turn', startFollowUpKey()).finally(() =>
      followUps.close(),
    );
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
