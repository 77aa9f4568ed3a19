/**
 * The state of one workflow run, grouped by concern, and what it carries into the next run
 * through continue-as-new. Workflow code (it reads the workflow clock).
 */
import type { AgentJobProgress, AgentJobRecord } from '../../contract.js';
import type { ResolvedInput } from '../../input.js';
import type { RunProgress } from './progress.js';
import { FailureStreak, type FailureStreakState } from './failure-streak.js';
import { PollSchedule } from '../../poll-schedule.js';
import { PollWait } from './poll-wait.js';
import { Turn, type TurnState } from './turn.js';

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
   */
  failed: { type: string | null; message: string } | null;
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

/** One run's state. */
export interface RunState {
  /** What the `status` query answers, and the facts its phase follows from. */
  progress: RunProgress;
  /** Absolute deadline, epoch ms, fixed by the first run. */
  deadlineMs: number;
  /** This workflow created the agent job (false when it attached through `jobId`). */
  created: boolean;
  turn: Turn;
  schedule: PollSchedule;
  wait: PollWait;
  streak: FailureStreak;
  /** Quota uses asked for across runs, so no request name repeats. */
  quotaUses: number;
}

/** The state of a first run, or of a run continued from `carried`. */
export function startRun(resolved: ResolvedInput, carried: Continuation | undefined): RunState {
  return {
    progress: {
      end: null,
      queued: false,
      waitingForKey: false,
      jobId: carried?.jobId ?? resolved.jobId ?? null,
      lastRecord: carried?.progress.lastRecord ?? null,
      polls: carried?.progress.polls ?? 0,
      turns: carried?.turn.turns ?? 1,
      nextPollAt: null,
      lastError: carried?.progress.lastError ?? null,
      resent: carried?.progress.resent ?? 0,
      queue: null,
    },
    deadlineMs: carried?.deadlineMs ?? Date.now() + resolved.timeoutMs,
    created: carried?.created ?? !resolved.jobId,
    turn: new Turn(carried?.turn),
    schedule: new PollSchedule(resolved.poll, carried?.intervalMs),
    wait: new PollWait(carried?.pollRequested),
    streak: new FailureStreak(carried?.streak),
    quotaUses: carried?.quotaUses ?? 0,
  };
}

/** What `run`, driving `jobId` with `followUps` not answered yet, carries into the next run. */
export function carryOver(run: RunState, jobId: string, followUps: CarriedFollowUp[]): Continuation {
  const { progress } = run;
  return {
    jobId,
    created: run.created,
    deadlineMs: run.deadlineMs,
    progress: {
      polls: progress.polls,
      lastRecord: progress.lastRecord,
      lastError: progress.lastError,
      resent: progress.resent,
    },
    turn: run.turn.state,
    intervalMs: run.schedule.intervalMs,
    streak: run.streak.state,
    pollRequested: run.wait.requested,
    quotaUses: run.quotaUses,
    // Left out when empty: a run without follow-ups carries what it always did.
    ...(followUps.length > 0 ? { followUps } : {}),
  };
}
