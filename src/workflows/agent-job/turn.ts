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
 * After a follow-up message, a terminal record identical to the previous turn's end may be read
 * from a replica that has not seen the message yet, whatever the message's own answer said (an
 * `active` answer included). It counts as the new turn's end only once it has held this long: 30 s,
 * several reads at the fast schedule a new turn restarts, and far longer than a replica's lag.
 */
export const NEW_TURN_GRACE_MS = 30_000;

/**
 * How long reads in an undocumented status may go on before the workflow fails with
 * `UnknownStatus`: 20 minutes, time rather than polls, so a fast schedule does not give up sooner.
 */
export const UNKNOWN_STATUS_LIMIT_MS = 20 * 60_000;

/** A terminal status: `completed`, `archived` or `failed`. */
export type EndStatus = Exclude<AgentJobStatus, 'active'>;

/** What one read means. */
export type TurnReading =
  /** The turn goes on (or a message is on its way, which starts another): poll on. */
  | { kind: 'working' }
  /** A terminal record from before the latest message: the new turn may not have started yet. */
  | { kind: 'stale' }
  /** A status the API does not document; `giveUp` once they went on for too long. */
  | { kind: 'unknown-status'; inARow: number; giveUp: boolean }
  /** The turn ended with this status. */
  | { kind: 'ended'; status: EndStatus };

/** What a turn carries across continue-as-new. */
export interface TurnState {
  /** Turns started: 1 for the first prompt, plus one per follow-up message answered. */
  turns: number;
  /** The last turn whose end was read. */
  ended: number;
  /** The previous turn's terminal record, while a read of it may still be stale. */
  recordBeforeMessage: AgentJobRecord | null;
  /** Workflow time of the first read, since the last other answer, that showed {@link recordBeforeMessage}. */
  staleSinceMs?: number | null;
  /** Reads in a row in an undocumented status. */
  unknownStatusPolls: number;
  /** Workflow time of the first of those reads. */
  unknownStatusSinceMs?: number | null;
}

/** Tracks the turns of one agent job. */
export class Turn {
  readonly state: TurnState;

  constructor(carried?: TurnState) {
    this.state = carried ?? {
      turns: 1,
      ended: 0,
      recordBeforeMessage: null,
      staleSinceMs: null,
      unknownStatusPolls: 0,
      unknownStatusSinceMs: null,
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

  /** Decides what `record`, read at workflow time `nowMs`, means. `sending`: a message is on its way. */
  read(record: AgentJobRecord, sending: boolean, nowMs: number): TurnReading {
    const s = this.state;
    if (!(AGENT_JOB_STATUSES as readonly string[]).includes(record.status)) {
      s.unknownStatusPolls++;
      s.unknownStatusSinceMs ??= nowMs;
      return {
        kind: 'unknown-status',
        inARow: s.unknownStatusPolls,
        giveUp: nowMs - s.unknownStatusSinceMs >= UNKNOWN_STATUS_LIMIT_MS,
      };
    }
    s.unknownStatusPolls = 0;
    s.unknownStatusSinceMs = null;
    if (sending) return { kind: 'working' };
    const previous = s.recordBeforeMessage;
    if (previous !== null && sameRecord(previous, record)) {
      s.staleSinceMs ??= nowMs;
      if (nowMs - s.staleSinceMs < NEW_TURN_GRACE_MS) return { kind: 'stale' };
    } else {
      // Another answer: a record identical to the previous end must hold afresh from here.
      s.staleSinceMs = null;
    }
    if (!isTerminalStatus(record.status)) return { kind: 'working' };
    s.recordBeforeMessage = null;
    s.staleSinceMs = null;
    s.ended = s.turns;
    return { kind: 'ended', status: record.status as EndStatus };
  }

  /**
   * A follow-up message was answered with `record`: a new turn starts. `previous`: the last record
   * read before it, whose end a read may still show ({@link NEW_TURN_GRACE_MS}).
   */
  messageAnswered(record: AgentJobRecord, previous: AgentJobRecord | null): void {
    const s = this.state;
    s.turns++;
    const end = [previous, record].find((r) => r !== null && isTerminalStatus(r.status)) ?? null;
    s.recordBeforeMessage = end;
    s.staleSinceMs = null;
  }
}

function sameRecord(a: AgentJobRecord, b: AgentJobRecord): boolean {
  return a.status === b.status && a.prLink === b.prLink && (a.archivedAt ?? null) === (b.archivedAt ?? null);
}
