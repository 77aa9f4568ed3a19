/**
 * What a record of the agent job means for the turn being watched. A turn is the work on one
 * prompt: the first one, then one per follow-up message. Pure: no Temporal, no clock.
 */
import {
  AGENT_JOB_STATUSES,
  isTerminalStatus,
  type AgentJobRecord,
  type AgentJobStatus,
} from '../../contract.js';

/**
 * After a follow-up message, a terminal record identical to the one before the message may be the
 * previous turn's, read before the service applied the message. It counts as the new turn's end
 * only when it stays so this many polls, or when an `active` was seen in between.
 */
export const NEW_TURN_GRACE_POLLS = 5;

/** Consecutive reads in an undocumented status before the workflow fails with `UnknownStatus`. */
export const UNKNOWN_STATUS_POLL_LIMIT = 20;

/** A terminal status: `completed`, `archived` or `failed`. */
export type EndStatus = Exclude<AgentJobStatus, 'active'>;

/** What one read means. */
export type TurnReading =
  /** The turn goes on (or a message is on its way, which starts another): poll on. */
  | { kind: 'working' }
  /** A terminal record from before the latest message: the new turn may not have started yet. */
  | { kind: 'stale' }
  /** A status the API does not document; `giveUp` once there were too many in a row. */
  | { kind: 'unknown-status'; inARow: number; giveUp: boolean }
  /** The turn ended with this status. */
  | { kind: 'ended'; status: EndStatus };

/** What a turn carries across continue-as-new. */
export interface TurnState {
  /** Turns started: 1 for the first prompt, plus one per follow-up message answered. */
  turns: number;
  /** The last turn whose end was read. */
  ended: number;
  /** The record that answered the latest follow-up message, while its turn may not have started. */
  recordBeforeMessage: AgentJobRecord | null;
  /** Reads since that message that still showed {@link recordBeforeMessage}. */
  stalePolls: number;
  /** Reads in a row in an undocumented status. */
  unknownStatusPolls: number;
}

/** Tracks the turns of one agent job. */
export class Turn {
  readonly state: TurnState;

  constructor(carried?: TurnState) {
    this.state = carried ?? {
      turns: 1,
      ended: 0,
      recordBeforeMessage: null,
      stalePolls: 0,
      unknownStatusPolls: 0,
    };
  }

  /** The turn in progress; a read issued in an earlier turn cannot end this one. */
  get number(): number {
    return this.state.turns;
  }

  /** The turn in progress has ended, and no message started another. */
  get idle(): boolean {
    return this.state.ended >= this.state.turns && this.state.recordBeforeMessage === null;
  }

  /** Decides what `record` means. `sending`: a follow-up message is on its way. */
  read(record: AgentJobRecord, sending: boolean): TurnReading {
    const s = this.state;
    if (!(AGENT_JOB_STATUSES as readonly string[]).includes(record.status)) {
      s.unknownStatusPolls++;
      return {
        kind: 'unknown-status',
        inARow: s.unknownStatusPolls,
        giveUp: s.unknownStatusPolls >= UNKNOWN_STATUS_POLL_LIMIT,
      };
    }
    s.unknownStatusPolls = 0;
    if (sending) return { kind: 'working' };
    if (!isTerminalStatus(record.status)) {
      s.recordBeforeMessage = null;
      return { kind: 'working' };
    }
    if (s.recordBeforeMessage !== null) {
      const unchanged = sameRecord(s.recordBeforeMessage, record);
      if (unchanged && ++s.stalePolls < NEW_TURN_GRACE_POLLS) return { kind: 'stale' };
      s.recordBeforeMessage = null;
    }
    s.ended = s.turns;
    return { kind: 'ended', status: record.status as EndStatus };
  }

  /**
   * A follow-up message was answered with `record`: a new turn starts. A terminal answer may still
   * be the previous turn's record, so the turn is not over until the job is seen active or a
   * different terminal record shows up.
   */
  messageAnswered(record: AgentJobRecord): void {
    const s = this.state;
    s.turns++;
    s.recordBeforeMessage = isTerminalStatus(record.status) ? record : null;
    s.stalePolls = 0;
  }
}

function sameRecord(a: AgentJobRecord, b: AgentJobRecord): boolean {
  return a.status === b.status && a.prLink === b.prLink && (a.archivedAt ?? null) === (b.archivedAt ?? null);
}
