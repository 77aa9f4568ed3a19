/**
 * One agent-job workflow run: its state, message handlers and steps in one object, the only code
 * that assigns that state (docs/decisions/0016-one-run-object-and-layers.md).
 *
 * Workflow code: time is the workflow clock, jitter its seeded `Math.random`.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  isCancellation,
  log,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { HandlerUnfinishedPolicy } from '@temporalio/common';
import {
  FailureType,
  followUpUpdate,
  pollNowSignal,
  sendMessageUpdate,
  statusQuery,
  type AgentJobInput,
  type AgentJobProgress,
  type AgentJobRecord,
  type AgentJobResult,
  type LastApiError,
} from '../../contract.js';
import type { ResolvedInput } from '../../input.js';
import { FailureStreak, type FailureStreakState, type Tolerances } from '../../failure-policy/streak.js';
import { intervalAfterAttempt, PollSchedule, scheduleAfter } from '../../poll-schedule.js';
import { ProjectQuotaRequester, type QuotaUse } from '../project-quota/requester.js';
import type { QuotaUseKind } from '../../quota/messages.js';
import { createJob, pollJob, sendMessage, startFollowUpKey, updateIdNow, updateMessageKey } from './calls.js';
import { FollowUps, type CarriedFollowUp, type FollowUp, type Sent } from './follow-ups.js';
import { outcomeOf, timedOut, turnResult, unknownStatus } from './outcomes.js';
import { PollWait } from './poll-wait.js';
import * as show from './progress.js';
import { Turn, type EndStatus, type TurnState } from './turn.js';

/**
 * Poll activities per run before continue-as-new: each ends with about 6 history events, however
 * many polls its attempts made (a job that stays `active` adds none: decision 0010).
 */
export const POLLS_PER_RUN = 150;

/** What a run carries into the next through continue-as-new. Callers never set it. */
export interface Continuation {
  jobId: string;
  created: boolean;
  deadlineMs: number;
  progress: Pick<AgentJobProgress, 'polls' | 'lastRecord' | 'lastError'> & { resent?: number };
  turn: TurnState;
  intervalMs: number;
  streak: FailureStreakState;
  pollRequested: boolean;
  quotaUses: number;
  /** Follow-ups not answered yet, in the order they were queued; absent when there are none. */
  followUps?: CarriedFollowUp[];
}

/** The state of one run, its handlers and its steps. */
export class AgentJobRun implements show.RunProgress {
  readonly projectId: string;
  /** Absolute deadline, epoch ms, fixed by the first run. */
  readonly deadlineMs: number;
  /** This workflow created the agent job (false when it attached through `jobId`). */
  readonly created: boolean;
  readonly streak: FailureStreak;
  readonly quota: ProjectQuotaRequester;
  readonly turn: Turn;
  readonly #schedule: PollSchedule;
  readonly #wait: PollWait;
  /** What each `AgentJobTimedOut` this run built was waiting for, to build it again in `failed`. */
  readonly #timedOutWhat = new WeakMap<ApplicationFailure, string>();
  readonly #followUps = new FollowUps(() => this.#wakeIfReady());

  jobId: string | null;
  lastRecord: AgentJobRecord | null;
  polls: number;
  nextPollAt: string | null = null;
  lastError: LastApiError | null;
  resent: number;
  end: show.EndPhase | null = null;
  waitingForKey = false;
  /** Quota uses asked for across runs, so no request name repeats. */
  #quotaUses: number;

  /**
   * The run of `raw` (checked: `input`), continued from `carried`; registers the handlers at once,
   * so a message buffered for this run is taken as soon as it is built.
   */
  constructor(
    private readonly raw: AgentJobInput,
    readonly input: ResolvedInput,
    private readonly carried: Continuation | undefined,
  ) {
    this.projectId = input.projectId;
    this.jobId = carried?.jobId ?? input.jobId ?? null;
    this.lastRecord = carried?.progress.lastRecord ?? null;
    this.polls = carried?.progress.polls ?? 0;
    this.lastError = carried?.progress.lastError ?? null;
    this.resent = carried?.progress.resent ?? 0;
    this.deadlineMs = carried?.deadlineMs ?? Date.now() + input.timeoutMs;
    this.created = carried?.created ?? !input.jobId;
    this.turn = new Turn(carried?.turn);
    this.#schedule = new PollSchedule(input.poll, carried?.intervalMs);
    this.#wait = new PollWait(carried?.pollRequested);
    this.streak = new FailureStreak(carried?.streak);
    this.#quotaUses = carried?.quotaUses ?? 0;
    this.quota = new ProjectQuotaRequester(this.projectId);
    setHandler(statusQuery, () => show.statusOf(this, this.#followUps.sending));
    setHandler(pollNowSignal, () => this.#wait.request());
    for (const followUp of carried?.followUps ?? []) this.#followUps.track({ ...followUp });
    const sendNow = (prompt: string) =>
      this.#followUps.send(prompt, updateMessageKey(this.turn.number), 'now');
    setHandler(sendMessageUpdate, async (prompt) => (await sendNow(prompt)).record, {
      validator: (prompt) =>
        this.#followUps.checkSendMessage(prompt, this.jobId, show.phaseOf(this, this.#followUps.sending)),
      description: 'Send a follow-up prompt to the agent job and resume polling until the new turn ends',
    });
    setHandler(
      followUpUpdate,
      async (prompt) => {
        const { turn, ended } = await this.#followUps.answer(
          updateIdNow(),
          prompt,
          updateMessageKey(this.turn.number),
        );
        // Its own turn's, also for a caller that re-attaches after a later turn has started.
        return { ...turnResult(this, ended), turns: turn };
      },
      {
        validator: (prompt) => this.#followUps.checkFollowUp(prompt, updateIdNow(), this.end),
        // Ending at the deadline, their callers read the workflow's failure; continuing as new, the
        // next run carries them and their callers re-attach there with the same update ID.
        unfinishedPolicy: HandlerUnfinishedPolicy.ABANDON,
        description:
          'Queue a follow-up prompt: sent once the turn in progress ends, returns when its own turn ends',
      },
    );
  }

  get turns(): number {
    return this.turn.number;
  }

  get queued(): boolean {
    return this.quota.queued;
  }

  get queue(): AgentJobProgress['queue'] {
    return this.quota.queue;
  }

  /** The API's tolerances for a call now: 404s and odd bodies are a blip once the API answered for the job. */
  tolerances(): Tolerances {
    const { blipToleranceMs, credentialToleranceMs } = this.input;
    return { blipMs: this.lastRecord === null ? null : blipToleranceMs, credentialMs: credentialToleranceMs };
  }

  /** Creates the agent job, or attaches to the one the input or the run before named; its ID. */
  async createOrAttach(): Promise<string> {
    show.showProject(this.projectId);
    if (this.carried) return this.carried.jobId;
    if (this.input.jobId !== undefined) {
      show.showJobId(this.input.jobId);
      // Attaching to an existing agent job: read it at once rather than after a first wait.
      this.#wait.request();
      return this.input.jobId;
    }
    const record = await createJob(this, this.input.prompt, this.input.previousCreate);
    this.jobId = record.id;
    this.#recorded(record);
    return record.id;
  }

  /** The prompt of `{ jobId, prompt }`, queued as a follow-up on the first run; resolves once sent. */
  promptAtStart(): Promise<Sent> | null {
    if (this.carried || !this.input.jobId || this.input.prompt === undefined) return null;
    return this.#followUps.send(this.input.prompt, startFollowUpKey(), 'after-turn');
  }

  /** Polls until a turn ends with no message pending, continuing as new every POLLS_PER_RUN poll activities. */
  async pollUntilDone(jobId: string): Promise<AgentJobResult> {
    const pollsPerRun = this.input.continueAsNewAfterPolls ?? POLLS_PER_RUN;
    // Failed poll activities count too: that bounds a run's history however long the API stays down.
    let pollsThisRun = 0;
    let retryInMs: number | null = null;
    const schedule = this.#schedule;
    for (;;) {
      if ((this.polls > 0 || pollsThisRun > 0) && Date.now() >= this.deadlineMs) {
        throw this.timedOut('the agent job was still working');
      }
      this.#wakeIfReady();
      const waitMs = schedule.waitMs(Date.now(), this.deadlineMs, Math.random, retryInMs);
      const timed = !this.#wait.requested;
      if (timed) {
        this.nextPollAt = new Date(Date.now() + waitMs).toISOString();
        setCurrentDetails(show.nextPollDetails(this));
      }
      await this.#wait.for(waitMs, `wait ${Math.round(waitMs / 1000)}s before polling`);
      // After a wait of the schedule, the poll activity's first wait is the schedule's next one.
      if (timed && retryInMs === null) schedule.grow();
      this.nextPollAt = null;
      retryInMs = null;
      // Messages start only here, after a wait (decision 0002); polls go on while one waits for the quota.
      const followUp = this.#followUps.next(this.turn.idle);
      if (followUp !== null) {
        void this.#send(followUp, jobId);
        continue;
      }
      const turnOfRead = this.turn.number;
      const startedAt = Date.now();
      const intervalMs = schedule.intervalMs;
      const read = await this.#wait.poll(() => pollJob(this, jobId, intervalMs));
      pollsThisRun++;
      const pollSchedule = { ...this.input.poll, intervalMs };
      if (read === null || !read.value.ok) {
        // Cancelled for a requested poll, its attempts unseen: the schedule goes on from where
        // they would have brought it (and a failure waits as the workflow decided).
        const reached = scheduleAfter(pollSchedule, Date.now() - startedAt);
        if (read === null) this.polls += reached.polls;
        else if (!read.value.ok) retryInMs = read.value.retryInMs;
        // A message answered meanwhile restarted the schedule for its turn: that one stands.
        if (turnOfRead === this.turn.number) schedule.intervalMs = reached.intervalMs;
      } else {
        const { record, polls } = read.value.value;
        this.polls += polls;
        if (turnOfRead !== this.turn.number) {
          // A message was answered while this poll was under way: it may show the turn before.
          this.#wait.request();
        } else {
          schedule.intervalMs = intervalAfterAttempt(pollSchedule, polls);
          this.#recorded(record);
          const ended = this.#endOf(record);
          // Messages waiting to be sent, or one on its way: the turn that ended is not the last.
          if (ended !== null && this.#followUps.queued === 0 && !this.#followUps.sending) {
            await condition(allHandlersFinished);
            return this.#finish(ended, record);
          }
        }
      }
      const runIsLong = pollsThisRun >= pollsPerRun || workflowInfo().continueAsNewSuggested;
      if (runIsLong && !this.#followUps.holdsRun) return await this.#continueAsNew(jobId);
    }
  }

  /**
   * The run ends with `err`: reports the outcome and shows the end, and returns the failure to end
   * with. At the deadline, a message on its way (which ends at the same deadline) fails its update
   * with its own error first; otherwise its caller would hear only that the workflow completed. Its
   * error may come back only then, so the workflow's `AgentJobTimedOut` is built again to name it.
   */
  async failed(err: unknown): Promise<unknown> {
    const atDeadline = err instanceof ApplicationFailure && err.type === FailureType.AgentJobTimedOut;
    if (atDeadline) {
      await condition(() => !this.#followUps.sending);
      const what = this.#timedOutWhat.get(err as ApplicationFailure);
      if (what !== undefined) err = timedOut(this, what);
    }
    const outcome = outcomeOf(err);
    if (outcome !== null) this.#reportEnd(outcome, false);
    if (isCancellation(err)) this.#showEnd('cancelled');
    // The quota's deadline and final API errors end the workflow too: the phase says so.
    else if (err instanceof ApplicationFailure) {
      this.end = atDeadline ? 'timed-out' : 'failed';
      this.nextPollAt = null;
    }
    return err;
  }

  /** `AgentJobTimedOut` naming `what` was under way; the run shows it has timed out. */
  timedOut(what: string): ApplicationFailure {
    this.end = 'timed-out';
    this.nextPollAt = null;
    const failure = timedOut(this, what);
    this.#timedOutWhat.set(failure, what);
    return failure;
  }

  /** See ApiCaller; a success clears only its own call's error (a working poll does not hide failing messages). */
  reportApiError(error: LastApiError | null, doing: string, waitingForKey: boolean): void {
    if (error !== null || this.lastError?.during === doing) this.lastError = error;
    // The gauge counts the workflows waiting: each refusal reports, so a stale one drops out.
    if (waitingForKey) show.projectMetrics.keyWait(this.projectId, true);
    if (waitingForKey === this.waitingForKey) return;
    this.waitingForKey = waitingForKey;
    show.showKeyWait(this.projectId, waitingForKey, doing, error?.status ?? null);
  }

  /** A create or message was sent again after an attempt that may have been applied. */
  countResent(): void {
    this.resent++;
  }

  /** The next quota use of `kind`: unique within the workflow, across continue-as-new. */
  nextQuotaUse(kind: QuotaUseKind): QuotaUse {
    return { kind, name: `${kind}-${this.turns}-${++this.#quotaUses}` };
  }

  /** Records a record the API answered, and tags the workflow with its job's ID (decision 0011). */
  #recorded(record: AgentJobRecord): void {
    this.lastRecord = record;
    show.showJobId(record.id);
  }

  #showEnd(phase: 'completed' | 'archived' | 'failed' | 'cancelled'): void {
    this.end = phase;
    this.nextPollAt = null;
    setCurrentDetails(show.endDetails(this, phase));
  }

  /** The status that ends the turn, or null to poll on. */
  #endOf(record: AgentJobRecord): EndStatus | null {
    const reading = this.turn.read(record, this.#followUps.sending, Date.now());
    if (reading.kind === 'unknown-status') {
      log.warn('agent job in an undocumented status; polling on', {
        status: record.status,
        jobId: record.id,
      });
      if (reading.giveUp) throw unknownStatus(record, reading.inARow);
    }
    if (reading.kind !== 'ended') return null;
    this.#followUps.turnEnded(this.turn.state.ended, record);
    return reading.status;
  }

  #finish(status: EndStatus, record: AgentJobRecord): AgentJobResult {
    show.countTerminal(status);
    this.#showEnd(status);
    // Throws AgentJobFailed for `failed`, which `failed` above reports.
    const result = turnResult(this, record);
    this.#reportEnd(status, result.prLink !== null);
    return result;
  }

  /** Tells the per-project metrics how the job ended, counted from the first run's start. */
  #reportEnd(outcome: string, hasPrLink: boolean): void {
    const seconds = Math.max(0, Date.now() - (this.deadlineMs - this.input.timeoutMs)) / 1000;
    show.projectMetrics.jobEnded(this.projectId, outcome, seconds, hasPrLink);
  }

  async #continueAsNew(jobId: string): Promise<never> {
    await condition(() => allHandlersFinished() || !this.#followUps.holdsRun);
    // A follow-up message may have held the run until the deadline: end here, not in a new run.
    if (Date.now() >= this.deadlineMs) throw this.timedOut('the agent job was still working');
    log.info('continuing as new to keep the history bounded', { polls: this.polls });
    const followUps = this.#followUps.carried();
    const next: Continuation = {
      jobId,
      created: this.created,
      deadlineMs: this.deadlineMs,
      progress: {
        polls: this.polls,
        lastRecord: this.lastRecord,
        lastError: this.lastError,
        resent: this.resent,
      },
      turn: this.turn.state,
      intervalMs: this.#schedule.intervalMs,
      streak: this.streak.state,
      pollRequested: this.#wait.requested,
      quotaUses: this.#quotaUses,
      // Left out when empty: a run without follow-ups carries what it always did.
      ...(followUps.length > 0 ? { followUps } : {}),
    };
    return continueAsNew<(input: AgentJobInput, carried?: Continuation) => Promise<AgentJobResult>>(
      this.raw,
      next,
    );
  }

  /** A message's time has come: the wait in progress ends, so that the loop sends it. */
  #wakeIfReady(): void {
    if (this.#followUps.ready(this.turn.idle)) this.#wait.request();
  }

  async #send(followUp: FollowUp, jobId: string): Promise<void> {
    try {
      const record = await sendMessage(this, jobId, followUp.prompt, followUp.key, this.turn.number + 1);
      this.turn.messageAnswered(record, this.lastRecord);
      this.#recorded(record);
      this.#schedule.restart();
      // Look again soon rather than at the end of the wait that ran before the message.
      this.#wait.request();
      followUp.answered({ record, turn: this.turn.number });
    } catch (err) {
      followUp.failed(err);
    } finally {
      this.#followUps.sent();
    }
  }
}
