/**
 * The follow-up messages of one workflow, in the order they are sent. A `sendMessage` update goes
 * at once (ahead of the queue); a `followUp` update, and the prompt of `{ jobId, prompt }`, wait
 * for the turn in progress to end. Turns never interleave: one message is on its way at a time.
 * Pure: the workflow's loop asks {@link FollowUpQueue.next} at one point of each pass and sends.
 */
import type { AgentJobRecord } from '../../contract.js';

/** A queued follow-up: its prompt and key, and how to tell its sender what became of it. */
export interface FollowUp {
  prompt: string;
  key: string;
  /** The `followUp` update's ID; null for a `sendMessage` and the prompt of `{ jobId, prompt }`. */
  updateId: string | null;
  answered(sent: Sent): void;
  failed(err: unknown): void;
}

/** A message the API answered, and the turn it started. */
export interface Sent {
  record: AgentJobRecord;
  turn: number;
}

/** When a follow-up may be sent. */
export type SendWhen = 'now' | 'after-turn';

/** One queued follow-up, with what the caller attaches to it (its prompt, key, and how to answer). */
interface Queued<T> {
  item: T;
  when: SendWhen;
}

/** The queue; `T` is what the workflow keeps per follow-up. */
export class FollowUpQueue<T> {
  #queue: Array<Queued<T>> = [];
  #sending = false;

  /** A message is on its way to the API. */
  get sending(): boolean {
    return this.#sending;
  }

  /** Follow-ups waiting to be sent. */
  get queued(): number {
    return this.#queue.length;
  }

  /** The follow-ups waiting to be sent, in the order they will go. */
  get waiting(): T[] {
    return this.#queue.map((queued) => queued.item);
  }

  /** A `sendMessage` is already queued or on its way: the next one must wait for it. */
  get busy(): boolean {
    return this.#sending || this.#queue[0]?.when === 'now';
  }

  /** Queues `item`; one sent `now` goes ahead of those waiting for a turn to end. */
  add(item: T, when: SendWhen): void {
    const entry = { item, when };
    if (when === 'now') this.#queue.unshift(entry);
    else this.#queue.push(entry);
  }

  /** A follow-up's time has come: the next pass of the poll loop sends it. */
  ready(turnIdle: boolean): boolean {
    const head = this.#queue[0];
    return !this.#sending && head !== undefined && (head.when === 'now' || turnIdle);
  }

  /**
   * The run cannot continue as new yet: a message is on its way (its answer must be seen here), a
   * `sendMessage` waits, or a queued follow-up is one `carriable` says the next run cannot take.
   */
  holdsRun(carriable: (item: T) => boolean): boolean {
    return this.#sending || this.#queue.some((queued) => queued.when === 'now' || !carriable(queued.item));
  }

  /** The follow-up whose time has come, taken off the queue and marked on its way; else null. */
  next(turnIdle: boolean): T | null {
    if (!this.ready(turnIdle)) return null;
    const head = this.#queue.shift() as Queued<T>;
    this.#sending = true;
    return head.item;
  }

  /** The message on its way was answered, or failed. */
  sent(): void {
    this.#sending = false;
  }
}
