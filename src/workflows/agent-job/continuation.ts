/**
 * What a run carries into the next through continue-as-new, and which of its unanswered
 * follow-ups it keeps and carries. Pure: no workflow APIs.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { AgentJobProgress, AgentJobRecord } from '../../contract.js';
import { wrapsSealed } from '../sealed-failures.js';
import type { FailureStreakState } from '../../failure-policy/streak.js';
import type { TurnState } from './turn.js';

/**
 * Sent follow-ups whose caller has not come back for the result, carried into the next run: 20,
 * each a record of at most 16 KiB (RECORD_BUDGET_BYTES) and an ID; queued ones are bounded by
 * MAX_QUEUED_FOLLOW_UPS, and all of them together by MAX_CARRIED_BYTES.
 */
const MAX_CARRIED_SENT = 20;

/**
 * A `followUp` update whose caller has not had its answer, carried into the next run so that the
 * caller, re-attaching there with the same update ID, gets it (and its message is sent once).
 */
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
   * Its message failed: the failure's type and message (continue-as-new input is data, so the
   * error itself cannot travel; the caller re-attaching gets an ApplicationFailure with both).
   * `sealed`: that failure arrived sealed (the payload codec is on), so the next run keeps its
   * message out of plain text (decision 0021); absent otherwise.
   */
  failed: { type: string | null; message: string; sealed?: true } | null;
}

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

/** A carried follow-up, and in this run the error its message failed with (not carried as such). */
export interface UnansweredFollowUp extends CarriedFollowUp {
  error?: unknown;
}

/**
 * Largest carried follow-ups, in UTF-8 bytes at worst (3 per UTF-16 unit): 1 MiB, half of
 * Temporal's 2 MB payload limit. Past it the run waits for them, as before carrying existed.
 */
const MAX_CARRIED_BYTES = 1024 * 1024;

/**
 * The `followUp` updates whose caller has no answer yet, by update ID, in the order they were
 * queued: what continue-as-new carries, and what a caller re-attaching in the next run attaches to.
 */
export class UnansweredFollowUps {
  readonly #byId = new Map<string, UnansweredFollowUp>();

  get(updateId: string): UnansweredFollowUp | undefined {
    return this.#byId.get(updateId);
  }

  add(followUp: UnansweredFollowUp): void {
    this.#byId.set(followUp.updateId, followUp);
  }

  /** Its caller has its answer. */
  answered(updateId: string): void {
    this.#byId.delete(updateId);
  }

  /** The turns up to `endedTurn` ended with `record`: the follow-ups that started them keep it. */
  turnEnded(endedTurn: number, record: AgentJobRecord): void {
    for (const followUp of this.#byId.values()) {
      if (followUp.turn !== null && followUp.turn <= endedTurn) followUp.ended ??= record;
    }
  }

  /** Too large to carry (prompts of up to 32,000 characters): the run must wait for them instead. */
  tooLargeToCarry(queued: Set<string | null>): boolean {
    return this.#byId.size > 0 && JSON.stringify(this.carried(queued)).length * 3 > MAX_CARRIED_BYTES;
  }

  /**
   * What the next run takes, `queued` being the update IDs still waiting to be sent: those sent
   * first (the newest {@link MAX_CARRIED_SENT}, their prompt left out: it went out already), then
   * those queued, in their order. Bounded so that callers who never come back cannot grow the
   * continue-as-new input without end.
   */
  carried(queued: Set<string | null>): CarriedFollowUp[] {
    const unanswered = [...this.#byId.values()];
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

/** What continue-as-new carries of a message's failure: its type and message, and whether it was sealed. */
function failureOf(err: unknown): CarriedFollowUp['failed'] {
  const sealed = wrapsSealed(err) ? { sealed: true as const } : {};
  if (err instanceof ApplicationFailure) return { type: err.type ?? null, message: err.message, ...sealed };
  return { type: null, message: err instanceof Error ? err.message : 'the message failed', ...sealed };
}
