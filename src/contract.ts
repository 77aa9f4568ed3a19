/**
 * The public contract of the agent-job workflow: names, input and result types, failure types,
 * messages and search-attribute keys; no name below is spelled anywhere else. Workflow code imports
 * it: no Node modules, no I/O, no clocks. Each field's default, bounds and meaning: docs/contract.md.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { AgentJobRecord, AgentJobStatus } from './agent-api/types.js';
import type { StreakBound } from './failure-policy/table.js';
import { ApiFailureType } from './failure-policy/types.js';
import { AgentJobError, ErrorName } from './errors.js';

export { ApiFailureType } from './failure-policy/types.js';
export {
  AGENT_JOB_STATUSES,
  isTerminalStatus,
  MAX_JOB_ID_BYTES,
  TERMINAL_STATUSES,
  type AgentJobRecord,
  type AgentJobStatus,
} from './agent-api/types.js';

/** Workflow type name, as other SDKs and `temporal workflow start --type` see it. */
export const WORKFLOW_TYPE = 'agentJobWorkflow';

/** Task queue the worker listens on unless `TEMPORAL_TASK_QUEUE` says otherwise. */
export const DEFAULT_TASK_QUEUE = 'agent-jobs';

/**
 * How urgent a start is, as task-queue priority keys (1 runs first, 5 last, 3 when unset): on workers
 * with a backlog an interactive job's tasks (its activities' too) go ahead of a batch's. What the
 * server needs: docs/starting-jobs.md.
 */
export const START_PRIORITIES = { interactive: 2, batch: 4 } as const;

/** A name of {@link START_PRIORITIES}. */
export type StartPriority = keyof typeof START_PRIORITIES;

/**
 * Every failure type that leaves an activity or the workflow: the API client's
 * ({@link ApiFailureType}) and the workflow's own. The values are stable API: callers match on
 * `ApplicationFailure.type`, so a rename is a breaking change. What each means: docs/contract.md.
 */
export const FailureType = {
  ...ApiFailureType,
  InvalidInput: 'InvalidInput',
  UnsealedInput: 'UnsealedInput',
  AgentJobFailed: 'AgentJobFailed',
  AgentJobTimedOut: 'AgentJobTimedOut',
  UnknownStatus: 'UnknownStatus',
  /**
   * A create or message found its project's quota busy (takes queued, no room, a 429 pause) and sent
   * nothing: the workflow waits for the grant and calls again. Never ends a workflow.
   */
  ProjectQuotaQueue: 'ProjectQuotaQueue',
  UnknownNotifyTarget: 'UnknownNotifyTarget',
  NoticeUndelivered: 'NoticeUndelivered',
} as const;

/** One of the {@link FailureType} names. */
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/** A duration as callers write it in JSON: `'10s'`, `'5 minutes'`, or milliseconds. */
export type DurationInput = string | number;

/** How often the workflow polls. */
export interface PollSettings {
  /** First wait after create and after each follow-up message (default 5s, as the API recommends). */
  initialInterval?: DurationInput;
  maxInterval?: DurationInput;
  backoffCoefficient?: number;
  /** @deprecated Ignored since 1.1 so that 1.0 callers' inputs stay valid (decision 0010). */
  localActivity?: unknown;
}

/** Input of {@link WORKFLOW_TYPE}: one JSON object, so any SDK or the Temporal CLI can start it. */
export interface AgentJobInput {
  projectId: string;
  /** The instruction that creates the agent job; with `jobId`, an optional follow-up message. */
  prompt?: string;
  jobId?: string;
  poll?: PollSettings;
  timeout?: DurationInput;
  continueAsNewAfterPolls?: number;
  blipTolerance?: DurationInput;
  credentialTolerance?: DurationInput;
  /** Set by `startAgentJob` when an earlier run under this workflow ID may have created the job: why. */
  previousCreate?: string;
  notify?: string;
}

/**
 * The details of every failure the activities raise for an API error: what the workflow decides
 * from, and what a caller reads in a final failure. Never holds a body or a key.
 */
export interface ApiErrorDetails {
  status: number | null;
  retryAfterMs: number | null;
  attempt: number;
  final: boolean;
  /** A create or message that may have reached the API all the same; absent on reads. */
  mayHaveBeenApplied?: boolean;
  /** A 429 to a use taken from the project quota: the workflow takes again carrying the refused take. */
  quotaTaken?: boolean;
  /** Absent from builds before it. */
  bound?: StreakBound;
  keyAnsweredAgoMs?: number | null;
}

/** The last API error the workflow saw, as the `status` query and `AgentJobTimedOut` report it. */
export interface LastApiError {
  type: string;
  /** HTTP status, or null when no response arrived (or the error did not come from the API). */
  status: number | null;
  message: string;
  /** The call that met it (`creating the agent job`, `reading agent job "…"`, `sending the follow-up message`). */
  during: string;
}

/** Result on `completed` or `archived`. */
export interface AgentJobResult {
  job: AgentJobRecord;
  prLink: string | null;
  status: AgentJobStatus;
  polls: number;
  turns: number;
  created: boolean;
  /**
   * Creates and messages sent again after an attempt of unknown outcome, across every run: above 0,
   * a duplicate agent job or turn is possible. Absent from results of builds before this field.
   */
  resent: number;
}

/** What the `status` query answers. */
export interface AgentJobProgress {
  phase:
    | 'queued'
    | 'creating'
    | 'polling'
    | 'waiting-for-api-key'
    | 'sending-message'
    | 'completed'
    | 'archived'
    | 'failed'
    | 'timed-out'
    | 'cancelled';
  jobId: string | null;
  lastRecord: AgentJobRecord | null;
  polls: number;
  turns: number;
  /** ISO time of the next poll on the workflow's own timer; null while a poll activity polls. */
  nextPollAt: string | null;
  lastError: LastApiError | null;
  resent: number;
  queue: QueuePlace | null;
}

/** Query: the workflow's progress. */
export const statusQuery = defineQuery<AgentJobProgress>('status');

/** Signal: poll at once (for instance from a webhook) instead of waiting for the timer. */
export const pollNowSignal = defineSignal('pollNow');

/** Update: send a follow-up prompt now and poll until the new turn ends; the message's record. */
export const sendMessageUpdate = defineUpdate<AgentJobRecord, [string]>('sendMessage');

/**
 * Update: queue a follow-up prompt, sent once the turns before it have ended; returns its own turn's
 * result. The update ID is the message's idempotency key.
 */
export const followUpUpdate = defineUpdate<AgentJobResult, [string]>('followUp');

/** Follow-ups one workflow holds queued at once; more are refused by the update's validator. */
export const MAX_QUEUED_FOLLOW_UPS = 20;

/** Search attributes operators filter on in the Temporal UI. All Keyword. */
export const SearchAttributes = {
  jobId: defineSearchAttributeKey('AgentJobId', SearchAttributeType.KEYWORD),
  status: defineSearchAttributeKey('AgentJobStatus', SearchAttributeType.KEYWORD),
  projectId: defineSearchAttributeKey('AgentProjectId', SearchAttributeType.KEYWORD),
} as const;

/** Every custom search attribute, for server start-up and registration. */
export const ALL_SEARCH_ATTRIBUTES = Object.values(SearchAttributes);

/**
 * Longest project ID accepted, in UTF-8 bytes: it goes into workflow IDs (255 bytes at most), and
 * 200 keeps the quota workflow's readable and leaves a job's room for a key before it is cut.
 */
export const MAX_PROJECT_ID_BYTES = 200;

/** Longest prompt accepted, in characters. The API documents none; this guards history size. */
export const MAX_PROMPT_LENGTH = 32_000;

/** Thrown by the input check (`resolveInput`) and by the library; the workflow turns it into an `InvalidInput` failure. */
export class InvalidInputError extends AgentJobError {
  constructor(
    /** The offending field, dotted (`poll.maxInterval`). */
    readonly field: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorName.InvalidInput, `${field}: ${message}`, options);
  }
}

/** A place in the queue, as the `status` query shows it. */
export interface QueuePlace {
  position: number;
  queueLength: number;
  /** ISO time of the earliest grant the budget allows, assuming no 429 pauses it. */
  earliestStartAt: string;
  /** ISO time this place was computed (it moves as the queue moves). */
  asOf: string;
}
