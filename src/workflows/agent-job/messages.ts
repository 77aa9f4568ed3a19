/**
 * Follow-up messages: the `sendMessage` and `followUp` updates queue them, and the poll loop sends
 * the next one whose time has come (./follow-ups.ts decides when). No handler starts a call itself:
 * see docs/decisions/0002.
 */
import { condition, setHandler } from '@temporalio/workflow';
import { HandlerUnfinishedPolicy } from '@temporalio/common';
import {
  checkPrompt,
  followUpUpdate,
  MAX_QUEUED_FOLLOW_UPS,
  sendMessageUpdate,
  type AgentJobProgress,
  type AgentJobRecord,
} from '../../contract.js';
import type { AgentJobCalls } from './calls.js';
import { FollowUpQueue, type SendWhen } from './follow-ups.js';
import { updateMessageKey } from './keys.js';
import { turnResult, type ResultContext } from './outcomes.js';
import type { PollSchedule } from './poll-schedule.js';
import type { PollWait } from './poll-wait.js';
import { showRecord } from './progress.js';
import type { Turn } from './turn.js';

/** Phases a workflow ends in: none of them goes back to polling. */
const ENDED_PHASES: ReadonlySet<AgentJobProgress['phase']> = new Set([
  'completed',
  'archived',
  'failed',
  'timed-out',
  'cancelled',
]);

/** A queued follow-up: its prompt and key, and how to tell its sender what became of it. */
interface FollowUp {
  prompt: string;
  key: string;
  answered(sent: Sent): void;
  failed(err: unknown): void;
}

/** A message the API answered, and the turn it started. */
interface Sent {
  record: AgentJobRecord;
  turn: number;
}

/** What the messages share with the rest of the workflow. */
export interface MessagesContext extends ResultContext {
  progress: AgentJobProgress;
  turn: Turn;
  schedule: PollSchedule;
  wait: PollWait;
  calls: AgentJobCalls;
}

/** The follow-up messages of one run. */
export class Messages {
  readonly #queue = new FollowUpQueue<FollowUp>();

  constructor(private readonly ctx: MessagesContext) {}

  /** A message is on its way. */
  get sending(): boolean {
    return this.#queue.sending;
  }

  /** Messages wait to be sent, or one is on its way: the turn that ended is not the last. */
  get pending(): boolean {
    return this.#queue.queued > 0 || this.#queue.sending;
  }

  /** Follow-ups not done: the run cannot continue as new (an update cannot move to the next run). */
  get open(): boolean {
    return this.#queue.open > 0;
  }

  /** A message's time has come: the poll loop should not wait. */
  get ready(): boolean {
    return this.#queue.ready(this.ctx.turn.idle);
  }

  /** Registers the `sendMessage` and `followUp` updates. */
  listen(): void {
    const { progress } = this.ctx;
    setHandler(sendMessageUpdate, async (prompt) => (await this.#answer(prompt, 'now')).record, {
      validator: (prompt) => {
        checkPrompt(prompt, 'sendMessage prompt');
        if (progress.jobId === null)
          throw new Error('the agent job is not created yet; try again in a moment');
        if (this.#queue.busy) throw new Error('a follow-up message is already being sent; wait for it');
        if (!['polling', 'creating'].includes(progress.phase)) {
          throw new Error(`the workflow is ${progress.phase}; it takes no more messages`);
        }
      },
      description: 'Send a follow-up prompt to the agent job and resume polling until the new turn ends',
    });
    setHandler(
      followUpUpdate,
      async (prompt) => {
        await this.#answer(prompt, 'after-turn', (sent) => this.ctx.turn.state.ended >= sent.turn);
        return turnResult(this.ctx, progress.lastRecord as AgentJobRecord);
      },
      {
        validator: (prompt) => {
          checkPrompt(prompt, 'followUp prompt');
          if (!['queued', 'creating', 'polling', 'sending-message'].includes(progress.phase)) {
            throw new Error(`the workflow is ${progress.phase}; it takes no more follow-ups`);
          }
          if (this.#queue.queued >= MAX_QUEUED_FOLLOW_UPS) {
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
  }

  /**
   * Queues `prompt` and resolves once it is sent (and, with `until`, once that holds); rejects with
   * the message's failure. The follow-up stays open meanwhile.
   */
  async #answer(prompt: string, when: SendWhen, until?: (sent: Sent) => boolean): Promise<Sent> {
    try {
      const sent = await this.queue(prompt, when, updateMessageKey(this.ctx.turn.number));
      if (until) await condition(() => until(sent));
      return sent;
    } finally {
      this.#queue.close();
    }
  }

  /** Queues a follow-up; resolves with its answer and the turn it started. */
  queue(prompt: string, when: SendWhen, key: string): Promise<Sent> {
    return new Promise<Sent>((resolve, reject) => {
      this.#queue.add({ prompt, key, answered: resolve, failed: reject }, when);
      if (this.ready) this.ctx.wait.request();
    });
  }

  /** The prompt of `{ jobId, prompt }`: queued like a `followUp`; its failure fails the workflow. */
  queueAtStart(prompt: string, key: string): Promise<Sent> {
    return this.queue(prompt, 'after-turn', key).finally(() => this.#queue.close());
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
    const { progress, turn, calls, schedule, wait } = this.ctx;
    const before = progress.phase;
    progress.phase = 'sending-message';
    try {
      const record = await calls.sendMessage(jobId, followUp.prompt, followUp.key, turn.number + 1);
      turn.messageAnswered(record, progress.lastRecord);
      progress.turns = turn.number;
      showRecord(progress, record, true);
      schedule.restart();
      // Look again soon rather than at the end of the wait that ran before the message.
      wait.request();
      followUp.answered({ record, turn: turn.number });
    } catch (err) {
      followUp.failed(err);
    } finally {
      this.#queue.sent();
      // An end met meanwhile (the deadline, a final failure) stays shown.
      if (!ENDED_PHASES.has(progress.phase)) {
        progress.phase = before === 'sending-message' ? 'polling' : before;
      }
    }
  }
}
