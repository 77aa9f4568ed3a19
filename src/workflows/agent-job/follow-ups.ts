/**
 * Follow-up messages: the `sendMessage` and `followUp` updates queue them, and the poll loop sends
 * the next one whose time has come (./follow-up-queue.ts decides when). No handler starts a call itself:
 * see docs/decisions/0002.
 */
import { condition, currentUpdateInfo, setHandler } from '@temporalio/workflow';
import { ApplicationFailure, HandlerUnfinishedPolicy } from '@temporalio/common';
import {
  followUpUpdate,
  MAX_QUEUED_FOLLOW_UPS,
  sendMessageUpdate,
  type AgentJobRecord,
} from '../../contract.js';
import { checkPrompt } from '../../input.js';
import type { AgentJobApi } from './api.js';
import { FollowUpQueue, type SendWhen } from './follow-up-queue.js';
import { updateMessageKey } from './api.js';
import { turnResult, type ResultContext } from './outcomes.js';
import type { PollSchedule } from '../../poll-schedule.js';
import type { PollWait } from './poll-wait.js';
import { phaseOf, showRecord, type RunProgress } from './progress.js';
import type { CarriedFollowUp } from './run-state.js';
import type { Turn } from './turn.js';

/**
 * Sent follow-ups whose caller has not come back for the result, carried into the next run: 20,
 * each a record of at most 16 KiB (RECORD_BUDGET_BYTES) and an ID; queued ones are bounded by
 * MAX_QUEUED_FOLLOW_UPS, and all of them together by MAX_CARRIED_BYTES.
 */
const MAX_CARRIED_SENT = 20;

/**
 * Largest carried follow-ups, in UTF-8 bytes at worst (3 per UTF-16 unit): 1 MiB, half of
 * Temporal's 2 MB payload limit. Past it the run waits for them, as before carrying existed.
 */
const MAX_CARRIED_BYTES = 1024 * 1024;

/** A queued follow-up: its prompt and key, and how to tell its sender what became of it. */
interface FollowUp {
  prompt: string;
  key: string;
  /** The `followUp` update's ID; null for a `sendMessage` and the prompt of `{ jobId, prompt }`. */
  updateId: string | null;
  answered(sent: Sent): void;
  failed(err: unknown): void;
}

/** A message the API answered, and the turn it started. */
interface Sent {
  record: AgentJobRecord;
  turn: number;
}

/** A `followUp` not answered yet, and in this run the error its message failed with. */
interface Unanswered extends CarriedFollowUp {
  error?: unknown;
}

/** What the messages share with the rest of the workflow. */
export interface FollowUpsContext extends ResultContext {
  progress: RunProgress;
  turn: Turn;
  schedule: PollSchedule;
  wait: PollWait;
  api: AgentJobApi;
}

/** The follow-up messages of one run. */
export class FollowUps {
  readonly #queue = new FollowUpQueue<FollowUp>();
  /**
   * `followUp` updates whose caller has no answer yet, by update ID, in the order they were queued:
   * what continue-as-new carries, and what a caller re-attaching in the next run attaches to.
   */
  readonly #unanswered = new Map<string, Unanswered>();

  constructor(private readonly ctx: FollowUpsContext) {}

  /** A message is on its way. */
  get sending(): boolean {
    return this.#queue.sending;
  }

  /** Messages wait to be sent, or one is on its way: the turn that ended is not the last. */
  get pending(): boolean {
    return this.#queue.queued > 0 || this.#queue.sending;
  }

  /**
   * The run cannot continue as new yet: a message is on its way or a `sendMessage` (or the prompt
   * of `{ jobId, prompt }`) waits. `followUp`s waiting to be sent, or for their turn to end, do
   * not hold it: the next run takes them ({@link carried}) and their callers re-attach there.
   */
  get holdsRun(): boolean {
    if (this.#queue.holdsRun((followUp) => followUp.updateId !== null)) return true;
    // Prompts of up to 32,000 characters: a queue of long ones could pass the payload limit.
    return this.#unanswered.size > 0 && JSON.stringify(this.carried).length * 3 > MAX_CARRIED_BYTES;
  }

  /**
   * The follow-ups the next run takes: those sent first (the newest {@link MAX_CARRIED_SENT}, their
   * prompt left out: it went out already), then those queued, in their order. Bounded so that
   * callers who never come back cannot grow the continue-as-new input without end.
   */
  get carried(): CarriedFollowUp[] {
    const queued = new Set(this.#queue.waiting.map((followUp) => followUp.updateId));
    const all = [...this.#unanswered.values()];
    const sent = all.filter((f) => !queued.has(f.updateId)).slice(-MAX_CARRIED_SENT);
    return [...sent, ...all.filter((f) => queued.has(f.updateId))].map(
      ({ updateId, prompt, key, turn, ended, failed, error }) => ({
        updateId,
        prompt: queued.has(updateId) ? prompt : '',
        key,
        turn,
        ended,
        failed: error === undefined ? failed : failureOf(error),
      }),
    );
  }

  /** The turn in progress ended with `record`: the follow-ups that started it keep it. */
  turnEnded(record: AgentJobRecord): void {
    const { ended } = this.ctx.turn.state;
    for (const followUp of this.#unanswered.values()) {
      if (followUp.turn !== null && followUp.turn <= ended) followUp.ended ??= record;
    }
  }

  /** A message's time has come: the poll loop should not wait. */
  get ready(): boolean {
    return this.#queue.ready(this.ctx.turn.idle);
  }

  /**
   * Takes the follow-ups `carried` from the run before (queued ones first in the queue, in their
   * order), then registers the `sendMessage` and `followUp` updates.
   */
  listen(carried: CarriedFollowUp[] = []): void {
    for (const followUp of carried) this.#track({ ...followUp });
    const { progress } = this.ctx;
    setHandler(sendMessageUpdate, async (prompt) => (await this.#answer(prompt, 'now')).record, {
      validator: (prompt) => {
        checkPrompt(prompt, 'sendMessage prompt');
        if (progress.jobId === null)
          throw new Error('the agent job is not created yet; try again in a moment');
        if (this.#queue.busy) throw new Error('a follow-up message is already being sent; wait for it');
        const phase = phaseOf(progress, this.sending);
        if (!['polling', 'creating'].includes(phase)) {
          throw new Error(`the workflow is ${phase}; it takes no more messages`);
        }
      },
      description: 'Send a follow-up prompt to the agent job and resume polling until the new turn ends',
    });
    setHandler(
      followUpUpdate,
      async (prompt) => {
        const updateId = updateIdNow();
        try {
          // A caller re-attaching after continue-as-new: its follow-up is already here, not queued again.
          const followUp =
            this.#unanswered.get(updateId) ??
            this.#track({
              updateId,
              prompt,
              key: updateMessageKey(this.ctx.turn.number),
              turn: null,
              ended: null,
              failed: null,
            });
          const turn = await this.#started(followUp);
          const ended = await this.#ended(followUp);
          // Its own turn's, also for a caller that re-attaches after a later turn has started.
          return { ...turnResult(this.ctx, ended), turns: turn };
        } finally {
          this.#unanswered.delete(updateId);
        }
      },
      {
        validator: (prompt) => {
          checkPrompt(prompt, 'followUp prompt');
          // One this workflow already took (a caller re-attaching): answered whatever the phase.
          if (this.#unanswered.has(updateIdNow())) return;
          if (progress.end !== null) {
            throw new Error(`the workflow is ${progress.end}; it takes no more follow-ups`);
          }
          if (this.#queue.queued >= MAX_QUEUED_FOLLOW_UPS) {
            throw new Error(`${MAX_QUEUED_FOLLOW_UPS} follow-ups are already queued; wait for them`);
          }
        },
        // A workflow that ends at its deadline leaves waiting follow-ups behind: their callers read
        // the workflow's own failure instead. One that continues as new carries them: their
        // callers re-attach to the next run with the same update ID.
        unfinishedPolicy: HandlerUnfinishedPolicy.ABANDON,
        description:
          'Queue a follow-up prompt: sent once the turn in progress ends, returns when its own turn ends',
      },
    );
  }

  /** Queues `prompt`; resolves once it is sent, rejects with the message's failure. */
  #answer(prompt: string, when: SendWhen): Promise<Sent> {
    return this.queue(prompt, when, updateMessageKey(this.ctx.turn.number));
  }

  /** Queues a follow-up; resolves with its answer and the turn it started. */
  queue(prompt: string, when: SendWhen, key: string): Promise<Sent> {
    return new Promise<Sent>((resolve, reject) => {
      this.#add({ prompt, key, updateId: null, answered: resolve, failed: reject }, when);
    });
  }

  /** The prompt of `{ jobId, prompt }`: queued like a `followUp`; its failure fails the workflow. */
  queueAtStart(prompt: string, key: string): Promise<Sent> {
    return this.queue(prompt, 'after-turn', key);
  }

  #add(followUp: FollowUp, when: SendWhen): void {
    this.#queue.add(followUp, when);
    if (this.ready) this.ctx.wait.request();
  }

  /** Keeps `followUp` until its caller is answered, and queues it unless it was sent already. */
  #track(followUp: Unanswered): Unanswered {
    this.#unanswered.set(followUp.updateId, followUp);
    if (followUp.turn !== null || followUp.failed !== null) return followUp;
    const { updateId, prompt, key } = followUp;
    const answered = (sent: Sent) => (followUp.turn = sent.turn);
    const failed = (err: unknown) => (followUp.error = err);
    this.#add({ prompt, key, updateId, answered, failed }, 'after-turn');
    return followUp;
  }

  /** The turn `followUp`'s message started, once sent; throws what its message failed with. */
  async #started(followUp: Unanswered): Promise<number> {
    await condition(() => followUp.turn !== null || followUp.error !== undefined || followUp.failed !== null);
    // What the message call threw: an ApplicationFailure or an ActivityFailure, as for a sender awaiting it.
    if (followUp.error !== undefined) throw followUp.error as Error;
    if (followUp.failed !== null) {
      throw ApplicationFailure.create({
        type: followUp.failed.type ?? undefined,
        message: `${followUp.failed.message} (the message failed in an earlier run of this workflow)`,
        nonRetryable: true,
      });
    }
    return followUp.turn as number;
  }

  /** The record `followUp`'s turn ended with, once it has. */
  async #ended(followUp: Unanswered): Promise<AgentJobRecord> {
    await condition(() => followUp.ended !== null);
    return followUp.ended as AgentJobRecord;
  }

  /**
   * Starts sending the next message to `jobId` if its time has come; true when it did. Polls go on
   * meanwhile, as the message may wait for the project's quota.
   */
  sendNext(jobId: string): boolean {
    const followUp = this.#queue.next(this.ctx.turn.idle);
    if (followUp === null) return false;
    void this.#send(followUp, jobId);
    return true;
  }

  async #send(followUp: FollowUp, jobId: string): Promise<void> {
    const { progress, turn, api, schedule, wait } = this.ctx;
    try {
      const record = await api.sendMessage(jobId, followUp.prompt, followUp.key, turn.number + 1);
      turn.messageAnswered(record, progress.lastRecord);
      progress.turns = turn.number;
      showRecord(progress, record);
      schedule.restart();
      // Look again soon rather than at the end of the wait that ran before the message.
      wait.request();
      followUp.answered({ record, turn: turn.number });
    } catch (err) {
      followUp.failed(err);
    } finally {
      this.#queue.sent();
    }
  }
}

/** The ID of the update being handled or validated. */
function updateIdNow(): string {
  const info = currentUpdateInfo();
  if (info === undefined) throw new Error('not in an update handler');
  return info.id;
}

/** What continue-as-new carries of a message's failure: its type and message. */
function failureOf(err: unknown): CarriedFollowUp['failed'] {
  if (err instanceof ApplicationFailure) return { type: err.type ?? null, message: err.message };
  return { type: null, message: err instanceof Error ? err.message : 'the message failed' };
}
