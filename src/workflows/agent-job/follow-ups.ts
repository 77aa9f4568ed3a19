/**
 * The follow-up messages of one workflow: those waiting to be sent, in order, the one on its way,
 * and the `followUp` updates whose caller has no answer yet (what continue-as-new carries, and what
 * a caller re-attaching in the next run attaches to). A `sendMessage` goes ahead of the queue; a
 * `followUp` and the prompt of `{ jobId, prompt }` wait for the turn in progress to end. One
 * message is on its way at a time. The poll loop asks {@link FollowUps.next} and sends.
 */
import { ApplicationFailure, condition } from '@temporalio/workflow';
import { MAX_QUEUED_FOLLOW_UPS, type AgentJobProgress, type AgentJobRecord } from '../../contract.js';
import { checkPrompt } from '../../input.js';
import { wrapsSealed } from '../sealed-failures.js';

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
type SendWhen = 'now' | 'after-turn';

/** A `followUp` update whose caller has no answer yet, carried into the next run where the caller re-attaches. */
export interface CarriedFollowUp {
  updateId: string;
  prompt: string;
  /** The message's Idempotency-Key, unchanged across runs. */
  key: string;
  /** The turn its message started; null while it waits to be sent. */
  turn: number | null;
  /** The record its turn ended with; null until then. */
  ended: AgentJobRecord | null;
  /**
   * Its message failed: the failure's type and message (the error itself cannot travel as data).
   * `sealed`: it arrived sealed, so the next run keeps its message out of plain text (decision 0021).
   */
  failed: { type: string | null; message: string; sealed?: true } | null;
}

/** A carried follow-up, and in this run the error its message failed with. */
export interface UnansweredFollowUp extends CarriedFollowUp {
  error?: unknown;
}

/**
 * Sent follow-ups whose caller has not come back for the result, carried into the next run: 20,
 * each a record of at most 16 KiB (RECORD_BUDGET_BYTES) and an ID (queued ones: MAX_QUEUED_FOLLOW_UPS).
 */
const MAX_CARRIED_SENT = 20;

/**
 * Largest carried follow-ups, in UTF-8 bytes at worst (3 per UTF-16 unit): 1 MiB, half of
 * Temporal's 2 MB payload limit. Past it the run waits for them.
 */
const MAX_CARRIED_BYTES = 1024 * 1024;

/** The follow-ups of one run. */
export class FollowUps {
  #queue: Array<{ item: FollowUp; when: SendWhen }> = [];
  #sending = false;
  /** The `followUp` updates whose caller has no answer yet, by update ID, in the order they came. */
  readonly #unanswered = new Map<string, UnansweredFollowUp>();

  /** `onQueued`: called after each follow-up is queued. */
  constructor(private readonly onQueued: () => void = () => undefined) {}

  /** A message is on its way to the API. */
  get sending(): boolean {
    return this.#sending;
  }

  /** Follow-ups waiting to be sent. */
  get queued(): number {
    return this.#queue.length;
  }

  /** A `sendMessage` is already queued or on its way: the next one must wait for it. */
  get busy(): boolean {
    return this.#sending || this.#queue[0]?.when === 'now';
  }

  /** Queues `item`; one sent `now` goes ahead of those waiting for a turn to end. */
  add(item: FollowUp, when: SendWhen): void {
    if (when === 'now') this.#queue.unshift({ item, when });
    else this.#queue.push({ item, when });
    this.onQueued();
  }

  /** Queues `prompt` under `key`; resolves once it is sent, rejects with the message's failure. */
  send(prompt: string, key: string, when: SendWhen): Promise<Sent> {
    return new Promise<Sent>((resolve, reject) => {
      this.add({ prompt, key, updateId: null, answered: resolve, failed: reject }, when);
    });
  }

  /** The `sendMessage` validator. */
  checkSendMessage(prompt: unknown, jobId: string | null, phase: AgentJobProgress['phase']): void {
    checkPrompt(prompt, 'sendMessage prompt');
    if (jobId === null) throw new Error('the agent job is not created yet; try again in a moment');
    if (this.busy) throw new Error('a follow-up message is already being sent; wait for it');
    if (!['polling', 'creating'].includes(phase))
      throw new Error(`the workflow is ${phase}; it takes no more messages`);
  }

  /** The `followUp` validator for update `updateId`. */
  checkFollowUp(prompt: unknown, updateId: string, end: string | null): void {
    checkPrompt(prompt, 'followUp prompt');
    // One this workflow already took (a caller re-attaching): answered whatever the phase.
    if (this.#unanswered.has(updateId)) return;
    if (end !== null) throw new Error(`the workflow is ${end}; it takes no more follow-ups`);
    if (this.#queue.length >= MAX_QUEUED_FOLLOW_UPS) {
      throw new Error(`${MAX_QUEUED_FOLLOW_UPS} follow-ups are already queued; wait for them`);
    }
  }

  /** A follow-up's time has come: the next pass of the poll loop sends it. */
  ready(turnIdle: boolean): boolean {
    const head = this.#queue[0];
    return !this.#sending && head !== undefined && (head.when === 'now' || turnIdle);
  }

  /** The follow-up whose time has come, taken off the queue and marked on its way; else null. */
  next(turnIdle: boolean): FollowUp | null {
    if (!this.ready(turnIdle)) return null;
    this.#sending = true;
    return (this.#queue.shift() as { item: FollowUp }).item;
  }

  /** The message on its way was answered, or failed. */
  sent(): void {
    this.#sending = false;
  }

  /**
   * The run cannot continue as new yet: a message is on its way (its answer must be seen here), a
   * `sendMessage` or the prompt of `{ jobId, prompt }` waits, or the unanswered follow-ups are too
   * large to carry (prompts of up to 32,000 characters). Waiting `followUp`s do not hold it: the
   * next run takes them.
   */
  get holdsRun(): boolean {
    if (this.#sending || this.#queue.some(({ item }) => item.updateId === null)) return true;
    return this.#unanswered.size > 0 && JSON.stringify(this.carried()).length * 3 > MAX_CARRIED_BYTES;
  }

  /** The unanswered follow-up of update `updateId`, if this run has it. */
  get(updateId: string): UnansweredFollowUp | undefined {
    return this.#unanswered.get(updateId);
  }

  /** Keeps `followUp` until its caller is answered, and queues it unless it was sent already. */
  track(followUp: UnansweredFollowUp): UnansweredFollowUp {
    this.#unanswered.set(followUp.updateId, followUp);
    if (followUp.turn !== null || followUp.failed !== null) return followUp;
    const { updateId, prompt, key } = followUp;
    const answered = (sent: Sent) => (followUp.turn = sent.turn);
    const failed = (err: unknown) => (followUp.error = err);
    this.add({ prompt, key, updateId, answered, failed }, 'after-turn');
    return followUp;
  }

  /**
   * The `followUp` update `updateId`, queued under `key` unless a run before took it: its turn and
   * that turn's end record, or what its message failed with.
   */
  async answer(
    updateId: string,
    prompt: string,
    key: string,
  ): Promise<{ turn: number; ended: AgentJobRecord }> {
    try {
      const followUp =
        this.get(updateId) ?? this.track({ updateId, prompt, key, turn: null, ended: null, failed: null });
      // `ended` is set only once `turn` is.
      await condition(
        () => followUp.ended !== null || followUp.error !== undefined || followUp.failed !== null,
      );
      // What the message call threw: an ApplicationFailure or an ActivityFailure, as for a sender awaiting it.
      if (followUp.error !== undefined) throw followUp.error as Error;
      if (followUp.failed !== null) throw earlierRunFailure(followUp.failed);
      return { turn: followUp.turn as number, ended: followUp.ended as AgentJobRecord };
    } finally {
      this.answered(updateId);
    }
  }

  /** The caller of update `updateId` has its answer. */
  answered(updateId: string): void {
    this.#unanswered.delete(updateId);
  }

  /** The turns up to `endedTurn` ended with `record`: the follow-ups that started them keep it. */
  turnEnded(endedTurn: number, record: AgentJobRecord): void {
    for (const followUp of this.#unanswered.values()) {
      if (followUp.turn !== null && followUp.turn <= endedTurn) followUp.ended ??= record;
    }
  }

  /**
   * What the next run takes: the newest {@link MAX_CARRIED_SENT} sent (without their prompt), then
   * those queued, in order; bounded so that callers who never come back cannot grow it without end.
   */
  carried(): CarriedFollowUp[] {
    const queued = new Set(this.#queue.map(({ item }) => item.updateId));
    const unanswered = [...this.#unanswered.values()];
    const sent = unanswered.filter((f) => !queued.has(f.updateId)).slice(-MAX_CARRIED_SENT);
    return [...sent, ...unanswered.filter((f) => queued.has(f.updateId))].map(
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
}

/** What continue-as-new carries of a message's failure. */
function failureOf(err: unknown): CarriedFollowUp['failed'] {
  const sealed = wrapsSealed(err) ? { sealed: true as const } : {};
  if (err instanceof ApplicationFailure) return { type: err.type ?? null, message: err.message, ...sealed };
  return { type: null, message: err instanceof Error ? err.message : 'the message failed', ...sealed };
}

/**
 * A follow-up's failure in an earlier run, for its caller re-attaching in this one; one that arrived
 * sealed keeps its message in the details, a payload (decision 0021).
 */
export function earlierRunFailure(failed: NonNullable<CarriedFollowUp['failed']>): ApplicationFailure {
  const where = 'the message failed in an earlier run of this workflow';
  return ApplicationFailure.create({
    type: failed.type ?? undefined,
    message: failed.sealed
      ? `The follow-up ${where}; its failure's message is in the details`
      : `${failed.message} (${where})`,
    nonRetryable: true,
    details: failed.sealed ? [{ message: failed.message }] : undefined,
  });
}
