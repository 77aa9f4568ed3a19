/**
 * The public contract of the agent-job workflow: names, input and result types, failure types,
 * messages and search-attribute keys. Workflows, activities, the worker, the starter and the tests
 * import it; no name below is spelled anywhere else.
 *
 * This module must stay importable from workflow code: no Node modules, no I/O, no clocks.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal, defineUpdate, type Sinks } from '@temporalio/workflow';
import {
  ApiFailureType,
  MAX_JOB_ID_BYTES,
  type AgentJobRecord,
  type AgentJobStatus,
} from './agent-api/types.js';
import { durationMs } from './duration.js';
import { fitPart, isWellFormed, MAX_WORKFLOW_ID_BYTES, utf8ByteLength } from './ids.js';

export {
  AGENT_JOB_STATUSES,
  ApiFailureType,
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
 * How urgent a start is, as Temporal task-queue priority keys (1 runs first, 5 last, 3 when unset):
 * on workers shared with a backlog, an interactive job's workflow and activity tasks go ahead of a
 * batch's. Activities inherit their workflow's. docs/starting-jobs.md says what the server needs.
 */
export const START_PRIORITIES = { interactive: 2, batch: 4 } as const;

/** A name of {@link START_PRIORITIES}. */
export type StartPriority = keyof typeof START_PRIORITIES;

/** The project quota's grants unblock waiting jobs, so its tasks go first. */
export const QUOTA_PRIORITY_KEY = 1;

/** The server's limit on a fairness key. */
const MAX_FAIRNESS_KEY_BYTES = 64;

/**
 * The task priority of a start: its class, and the project as the fairness key, so that within a
 * class one project's burst shares the workers with the others' tasks instead of going first. A
 * project ID over 64 bytes keeps its start and a hash of the whole.
 */
export function taskPriority(
  projectId: string,
  priorityKey: number,
): { priorityKey: number; fairnessKey: string } {
  return { priorityKey, fairnessKey: fitPart(projectId, projectId, MAX_FAIRNESS_KEY_BYTES) };
}

/**
 * Every failure type that leaves an activity or the workflow: the API client's
 * ({@link ApiFailureType}) and the workflow's own. The values are stable API: callers match on
 * `ApplicationFailure.type`, so a rename is a breaking change.
 */
export const FailureType = {
  ...ApiFailureType,
  /** The workflow input is invalid; the message names the field. No agent job was created. */
  InvalidInput: 'InvalidInput',
  /** A create whose outcome is unknown, under the `fail` policy for ambiguous calls. */
  CreateOutcomeUnknown: 'CreateOutcomeUnknown',
  /** A follow-up message whose outcome is unknown, under the `fail` policy for ambiguous calls. */
  MessageOutcomeUnknown: 'MessageOutcomeUnknown',
  /** The agent job ended with status `failed`; details carry the final record. */
  AgentJobFailed: 'AgentJobFailed',
  /** The agent job was still working at the workflow's deadline; details carry the last record. */
  AgentJobTimedOut: 'AgentJobTimedOut',
  /** The agent job stayed in a status the API does not document for too many polls. */
  UnknownStatus: 'UnknownStatus',
  /**
   * A create or message activity found its project's quota busy (requests queued, no room, a 429
   * pause) and sent nothing: the workflow queues for a use and calls again. Never ends a workflow.
   */
  ProjectQuotaQueue: 'ProjectQuotaQueue',
} as const;

/** One of the {@link FailureType} names. */
export type FailureType = (typeof FailureType)[keyof typeof FailureType];

/**
 * A duration as callers write it in JSON: a Temporal duration string (`'10s'`, `'5 minutes'`) or
 * milliseconds. Strings are checked at run time by {@link resolveInput}.
 */
export type DurationInput = string | number;

/** How often the workflow polls. */
export interface PollSettings {
  /** First wait after create, and after each follow-up message. Default 5s (the API recommends 5–10 s). */
  initialInterval?: DurationInput;
  /** The longest wait between polls. Default 60s. */
  maxInterval?: DurationInput;
  /** Growth factor of the wait after each poll that finds the job active. Default 1.5; 1 keeps it fixed. */
  backoffCoefficient?: number;
  /**
   * Ignored since 1.1, accepted so 1.0 callers' inputs stay valid: every wait is one poll activity
   * that the server retries once per poll (docs/PERFORMANCE.md measures it against 1.0's timer and
   * local activity per poll).
   */
  localActivity?: boolean;
}

/** Input of {@link WORKFLOW_TYPE}: one JSON object, so any SDK or the Temporal CLI can start it. */
export interface AgentJobInput {
  /** The documentation project. */
  projectId: string;
  /**
   * The instruction for the agent, at most {@link MAX_PROMPT_LENGTH} characters. Required without
   * `jobId` (it creates the agent job). With `jobId` it is a follow-up message: the workflow sends
   * it as a new turn of that agent job (once any turn in progress has ended) and returns when the
   * new turn ends; without it, the workflow attaches and watches the job until its turn ends.
   */
  prompt?: string;
  /** Work on an agent job that already exists instead of creating one (see `prompt`). */
  jobId?: string;
  /** Poll schedule. */
  poll?: PollSettings;
  /**
   * How long to wait for the agent job to end before failing with `AgentJobTimedOut`. Default 6h,
   * at most {@link MAX_TIMEOUT_MS} (7 days).
   */
  timeout?: DurationInput;
  /**
   * Poll activities per workflow run before continue-as-new, which keeps each run's history bounded.
   * Default 150. A job that stays `active` adds nothing to the history while its poll activity waits.
   */
  continueAsNewAfterPolls?: number;
  /**
   * How long the API may answer 404, or something that is not a record (maintenance pages), for an
   * agent job it has answered before (a failover, a deploy) before the workflow gives up. Default
   * 30m. A job never answered yet (a `jobId` with a typo) gives up after 5 such answers in a row.
   */
  blipTolerance?: DurationInput;
  /**
   * Set by `startAgentJob` when a run before this one under the same workflow ID may have created
   * the agent job without recording its ID (its create was on the wire when it was terminated or
   * timed out): why. The first create then follows `AGENT_API_AMBIGUOUS_CREATE`, as after a lost
   * answer. At most 500 characters; only without `jobId`.
   */
  previousCreate?: string;
}

/** Poll settings with every default applied, in milliseconds. */
export interface ResolvedPollSettings {
  initialIntervalMs: number;
  maxIntervalMs: number;
  backoffCoefficient: number;
}

/**
 * The details of every failure the activities raise for an API error: what the workflow decides
 * from, and what a caller reads in a final failure. Never holds a body or a key.
 */
export interface ApiErrorDetails {
  /** HTTP status, or null when no response arrived. */
  status: number | null;
  /** The server's `Retry-After` in ms (0 for a date in the past), or null when it sent none. */
  retryAfterMs: number | null;
  /** The activity attempt that met the error. */
  attempt: number;
  /** No retry can help (bad key, bad request, unknown project, an ambiguous call under `fail`). */
  final: boolean;
  /**
   * A create or message that may have reached the API all the same (a 502, a reset after sending,
   * no answer in time): the next attempt is ambiguous. Absent on reads.
   */
  mayHaveBeenApplied?: boolean;
  /**
   * Set on a 429 to a create or message whose use the activity took from the project quota at
   * once ({@link quotaTakeUpdate}): the workflow asks the quota's queue again, as after a refused
   * grant, so the quota pauses and learns. Absent otherwise.
   */
  quotaTaken?: boolean;
}

/** The last API error the workflow saw, as the `status` query and `AgentJobTimedOut` report it. */
export interface LastApiError {
  type: string;
  /** HTTP status, or null when no response arrived (or the error did not come from the API). */
  status: number | null;
  message: string;
  /** The call that met it (`creating the agent job`, `reading agent job …`, `sending the follow-up message`). */
  during: string;
}

/** Result on `completed` or `archived`. */
export interface AgentJobResult {
  /** The final record as the API returned it. */
  job: AgentJobRecord;
  /** `job.prLink`: null when the agent changed no files. */
  prLink: string | null;
  /** Terminal status: `completed` or `archived`. */
  status: AgentJobStatus;
  /** Get-job polls across every run of this workflow. */
  polls: number;
  /** Turns: 1 for the initial prompt plus one per follow-up message. */
  turns: number;
  /** Whether this workflow created the agent job (false when it attached through `jobId`). */
  created: boolean;
}

/** What the `status` query answers. */
export interface AgentJobProgress {
  phase:
    | 'queued'
    | 'creating'
    | 'polling'
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
  /**
   * ISO time of the next poll while the workflow waits on its own timer; null otherwise, and while a
   * poll activity polls (the server schedules its attempts: the Temporal UI shows the next one).
   */
  nextPollAt: string | null;
  /** The last activity failure seen, cleared by the next success. */
  lastError: LastApiError | null;
  /**
   * Creates and messages sent again after an attempt whose outcome was unknown
   * (`AGENT_API_AMBIGUOUS_CREATE=retry`): each may have made a second agent job or turn.
   */
  resent: number;
  /** Set while the workflow waits in its project's quota queue (phase `queued`), else null. */
  queue: QueuePlace | null;
}

/** Query: the workflow's progress. */
export const statusQuery = defineQuery<AgentJobProgress>('status');

/** Signal: poll at once (for instance from a webhook) instead of waiting for the timer. */
export const pollNowSignal = defineSignal('pollNow');

/**
 * Update: send a follow-up prompt to the agent job and resume polling until the new turn ends.
 * Returns the record the message call answered.
 */
export const sendMessageUpdate = defineUpdate<AgentJobRecord, [string]>('sendMessage');

/**
 * Update: queue a follow-up prompt. It is sent once the turn in progress and every follow-up queued
 * before it have ended, so turns never interleave; the update returns when its own turn ends, with
 * that turn's result (or fails with `AgentJobFailed` when the turn ends `failed`). The update ID is
 * the message's idempotency key: the same ID never sends twice to one agent job.
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
 * Longest project ID accepted, in UTF-8 bytes. A project ID is a short slug; it goes into workflow
 * IDs (`agent-job/<project>/...`, the quota workflow's), which the server limits to 255 bytes in
 * the compose setup, and into the `AgentProjectId` search attribute. 200 bytes keeps the quota
 * workflow's ID readable for any ASCII project ID (`agent-api-quota/` is 16 more) and leaves the
 * job workflows' IDs room for a key or job ID before they are cut and hashed.
 */
export const MAX_PROJECT_ID_BYTES = 200;

/** Longest prompt accepted, in characters. The API documents none; this guards history size. */
export const MAX_PROMPT_LENGTH = 32_000;

/** Defaults of {@link PollSettings}. */
export const DEFAULT_POLL: ResolvedPollSettings = {
  initialIntervalMs: 5_000,
  maxIntervalMs: 60_000,
  backoffCoefficient: 1.5,
};

/**
 * Jitter of each wait between polls, as a fraction (±10%), so thousands of workflows do not poll
 * in lockstep.
 */
export const POLL_JITTER = 0.1;

/**
 * The factor a wait between polls is multiplied by: uniform in [1 − POLL_JITTER, 1 + POLL_JITTER).
 * `random` is the caller's: the workflow's seeded `Math.random` in workflow code.
 */
export function pollJitterFactor(random: () => number): number {
  return 1 + (random() * 2 - 1) * POLL_JITTER;
}

/** Default of {@link AgentJobInput.timeout}: 6 hours. */
export const DEFAULT_TIMEOUT_MS = 6 * 60 * 60 * 1000;

/** The default {@link AgentJobInput.blipTolerance}: 30 minutes. */
export const DEFAULT_BLIP_TOLERANCE_MS = 30 * 60 * 1000;

/**
 * Longest {@link AgentJobInput.timeout}: 7 days. An agent job takes minutes to hours; a longer
 * wait is almost always a typo, and a bound keeps the worst-case history of one workflow known.
 */
export const MAX_TIMEOUT_MS = 7 * 24 * 60 * 60 * 1000;

/** Validated input with every default applied. */
export type ResolvedInput = {
  projectId: string;
  poll: ResolvedPollSettings;
  timeoutMs: number;
  continueAsNewAfterPolls: number | undefined;
  blipToleranceMs: number;
  previousCreate: string | null;
} &
  // Without `jobId` the prompt creates the job; with one, it is a first follow-up, or unset to watch.
  ({ jobId: undefined; prompt: string } | { jobId: string; prompt: string | undefined });

/** Thrown by {@link resolveInput}; the workflow turns it into an `InvalidInput` failure. */
export class InvalidInputError extends Error {
  constructor(
    /** The offending field, dotted (`poll.maxInterval`). */
    readonly field: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${field}: ${message}`, options);
    this.name = 'InvalidInputError';
  }
}

/**
 * Validates the workflow input and applies defaults. Shared by the workflow (before any activity
 * runs) and the starter (so a person hears of a bad field before a workflow starts).
 */
export function resolveInput(input: unknown): ResolvedInput {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InvalidInputError('input', 'must be one JSON object with projectId and prompt');
  }
  const raw = input as Record<string, unknown>;
  const projectId = requireId(raw, 'projectId', MAX_PROJECT_ID_BYTES);
  // With a jobId the prompt is an optional follow-up; without one it creates the job.
  const target =
    raw.jobId === undefined
      ? { jobId: undefined, prompt: checkPrompt(raw.prompt) }
      : {
          jobId: requireId(raw, 'jobId', MAX_JOB_ID_BYTES),
          prompt: raw.prompt === undefined ? undefined : checkPrompt(raw.prompt),
        };
  const poll = resolvePoll(raw.poll);
  const timeoutMs = raw.timeout === undefined ? DEFAULT_TIMEOUT_MS : toMs(raw.timeout, 'timeout');
  if (timeoutMs < 1_000) throw new InvalidInputError('timeout', 'must be at least 1 second');
  if (timeoutMs > MAX_TIMEOUT_MS) throw new InvalidInputError('timeout', 'must be at most 7 days');
  const continueAsNewAfterPolls = raw.continueAsNewAfterPolls;
  if (
    continueAsNewAfterPolls !== undefined &&
    (typeof continueAsNewAfterPolls !== 'number' ||
      !Number.isInteger(continueAsNewAfterPolls) ||
      continueAsNewAfterPolls < 1)
  ) {
    throw new InvalidInputError('continueAsNewAfterPolls', 'must be a whole number of at least 1');
  }
  const blipToleranceMs =
    raw.blipTolerance === undefined ? DEFAULT_BLIP_TOLERANCE_MS : toMs(raw.blipTolerance, 'blipTolerance');
  if (blipToleranceMs < 1_000) throw new InvalidInputError('blipTolerance', 'must be at least 1 second');
  const previousCreate = raw.previousCreate ?? null;
  if (previousCreate !== null && (typeof previousCreate !== 'string' || previousCreate.length > 500)) {
    throw new InvalidInputError('previousCreate', 'must be a string of at most 500 characters');
  }
  if (previousCreate !== null && target.jobId !== undefined) {
    throw new InvalidInputError('previousCreate', 'applies to a create only, not with jobId');
  }
  return {
    projectId,
    ...target,
    poll,
    timeoutMs,
    continueAsNewAfterPolls,
    blipToleranceMs,
    previousCreate,
  };
}

/**
 * The prompt rule, for a create and for every follow-up: a non-blank string of at most
 * {@link MAX_PROMPT_LENGTH} characters. `field` names it in the error.
 */
export function checkPrompt(value: unknown, field = 'prompt'): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidInputError(field, 'is required and must be a non-blank string');
  }
  if (value.length > MAX_PROMPT_LENGTH) {
    throw new InvalidInputError(field, `is ${value.length} characters; the limit is ${MAX_PROMPT_LENGTH}`);
  }
  return value;
}

function requireText(raw: Record<string, unknown>, field: string): string {
  const value = raw[field];
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidInputError(field, 'is required and must be a non-blank string');
  }
  return value;
}

/**
 * A non-blank ID of well-formed Unicode within `maxBytes` of UTF-8: a lone surrogate has no UTF-8
 * form (it cannot go into a URL or a workflow ID), and a longer ID would break a workflow ID or a
 * search attribute at the server, after the workflow had started.
 */
function requireId(raw: Record<string, unknown>, field: string, maxBytes: number): string {
  const value = requireText(raw, field);
  if (!isWellFormed(value)) {
    throw new InvalidInputError(field, 'must be well-formed Unicode (it holds a lone UTF-16 surrogate)');
  }
  const bytes = utf8ByteLength(value);
  if (bytes > maxBytes) {
    throw new InvalidInputError(field, `is ${bytes} bytes of UTF-8; the limit is ${maxBytes}`);
  }
  return value;
}

function resolvePoll(value: unknown): ResolvedPollSettings {
  if (value === undefined) return DEFAULT_POLL;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError('poll', 'must be an object');
  }
  const raw = value as Record<string, unknown>;
  const initialIntervalMs =
    raw.initialInterval === undefined
      ? DEFAULT_POLL.initialIntervalMs
      : toMs(raw.initialInterval, 'poll.initialInterval');
  const maxIntervalMs =
    raw.maxInterval === undefined
      ? Math.max(DEFAULT_POLL.maxIntervalMs, initialIntervalMs)
      : toMs(raw.maxInterval, 'poll.maxInterval');
  const backoffCoefficient = raw.backoffCoefficient ?? DEFAULT_POLL.backoffCoefficient;
  // Sub-10ms polls would hammer the API; the floor still lets tests run fast.
  if (initialIntervalMs < 10) throw new InvalidInputError('poll.initialInterval', 'must be at least 10ms');
  if (maxIntervalMs < initialIntervalMs) {
    throw new InvalidInputError('poll.maxInterval', 'must be at least poll.initialInterval');
  }
  if (typeof backoffCoefficient !== 'number' || !Number.isFinite(backoffCoefficient)) {
    throw new InvalidInputError('poll.backoffCoefficient', 'must be a number');
  }
  if (backoffCoefficient < 1 || backoffCoefficient > 10) {
    throw new InvalidInputError('poll.backoffCoefficient', 'must be between 1 and 10');
  }
  if (raw.localActivity !== undefined && typeof raw.localActivity !== 'boolean') {
    throw new InvalidInputError('poll.localActivity', 'must be true or false');
  }
  return { initialIntervalMs, maxIntervalMs, backoffCoefficient };
}

function toMs(value: unknown, field: string): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value <= 0)
      throw new InvalidInputError(field, 'must be a positive number of milliseconds');
    return value;
  }
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidInputError(field, 'must be a duration such as "10s" or a number of milliseconds');
  }
  const ms = durationMs(value);
  if (ms === undefined) {
    throw new InvalidInputError(field, `"${value}" is not a duration such as "10s" or "5 minutes"`);
  }
  if (ms <= 0) {
    throw new InvalidInputError(field, `"${value}" is not a positive duration`);
  }
  return ms;
}

// ---------------------------------------------------------------------------------------------
// The project quota: one budget of API uses (creates and follow-up messages) per project, held by
// a long-lived workflow per project that every worker reaches by its workflow ID.
// ---------------------------------------------------------------------------------------------

/** Workflow type of the per-project quota workflow. */
export const PROJECT_QUOTA_WORKFLOW_TYPE = 'projectQuotaWorkflow';

/**
 * The quota workflow's ID for a project: one per project in the namespace, whichever worker asks.
 * The project ID is percent-encoded so that any project ID gives one readable, unambiguous ID.
 * An ID longer than {@link MAX_WORKFLOW_ID_BYTES} (27 CJK characters are 243 bytes encoded) keeps
 * its start and ends with a hash of the project ID (`fitPart`), so it always fits the server.
 * Never throws: a lone surrogate, refused at input, would be hashed too.
 */
export function projectQuotaWorkflowId(projectId: string): string {
  const prefix = 'agent-api-quota/';
  const wellFormed = isWellFormed(projectId);
  const encoded = encodeURIComponent(wellFormed ? projectId : projectId.replace(/\p{Cs}/gu, '\ufffd'));
  const budget = MAX_WORKFLOW_ID_BYTES - prefix.length;
  // A replaced surrogate must never read as the project whose ID holds U+FFFD: force the hash.
  return prefix + fitPart(encoded, projectId, wellFormed ? budget : Math.min(budget, encoded.length - 1));
}

/** A budget: `uses` API uses per rolling `windowMs`. */
export interface QuotaLimit {
  uses: number;
  windowMs: number;
}

/** What a use is for. Follow-up messages go ahead of queued creates (docs/project-quota.md). */
export type QuotaUseKind = 'create' | 'message';

/** A workflow's request for one use, sent by the enqueue activity. */
export interface QuotaRequest {
  /**
   * Unique per ask: `<workflow ID>/<kind>-<turn>-<n>` (`.../create-0-1`, `.../message-2-3`), with
   * `.2`, `.3`... when it asks again after a 429 or after a `used-before` answer. A repeat is
   * recognised; a repeat of a request already spent, released or refused is declined, not granted.
   */
  requestId: string;
  /** Where the grant is signalled: the workflow ID, so a continued run still gets it. */
  workflowId: string;
  kind: QuotaUseKind;
  /** The budget the asking worker is configured with; the newest request's wins. */
  limit: QuotaLimit;
  /** How long the grant may stay unconfirmed before its use returns to the budget, in ms. */
  leaseMs: number;
  /**
   * Epoch ms by which the granted call has surely ended (the requesting workflow's deadline and one
   * attempt more). Until then a lease that runs out unconfirmed is renewed while the requester
   * still runs: a call retrying through an outage keeps its use. Absent: the lease alone.
   */
  holdUntil?: number;
  /**
   * Set when this request asks again for a use the API refused (429): the refused request's ID
   * and the 429's Retry-After (ms, null without one). The project pauses, the refused grant is
   * dropped (if its lease still runs), and this request takes the head of the queue. A request of
   * its own, not a signal to the refused one, so that a repeat is recognised by its ID and a quota
   * workflow that ended in between is started again.
   */
  refused?: { requestId: string; retryAfterMs: number | null };
  /**
   * The run of the asking workflow, as {@link QuotaTake.runId}: a request under the ID of a take
   * that the same run made comes from a call that queued without sending (the take's answer was
   * lost or came too late), so the take's use becomes this request's and is not counted twice.
   */
  runId?: string;
}

/**
 * What the enqueue activity answers: the request was signalled to the project's quota workflow
 * (a grant signal follows), or the asking worker has the quota off for this project.
 */
export type QuotaTicket =
  /** `leaseMs`: the worker's lease, which also paces the check that the quota workflow still runs. */
  { state: 'requested'; requestId: string; leaseMs?: number } | { state: 'off' };

/** A place in the queue, as the `status` query shows it. */
export interface QueuePlace {
  /** 1 is next. */
  position: number;
  /** The project's queue length when this was computed. */
  queueLength: number;
  /** ISO time of the earliest grant the budget allows, assuming no 429 pauses it. */
  earliestStartAt: string;
  /** ISO time this place was computed (it moves as the queue moves). */
  asOf: string;
}

/**
 * Signal (with start) to the quota workflow: queue a request for one use. Idempotent by request ID:
 * a repeat of a queued request gets its place again, of a granted one its grant again. A signal,
 * not an update: a thousand requests arriving at once must all be taken, and the server limits the
 * updates in flight per workflow (10 by default) where it buffers signals.
 */
export const quotaRequestSignal = defineSignal<[QuotaRequest]>('quotaRequest');

/** Signal to the quota workflow: the granted use was spent (the API answered other than 429). */
export const quotaSpentSignal = defineSignal<[{ requestId: string; at: number }]>('quotaSpent');

/** Signal to the quota workflow: a queued or granted request is withdrawn unused (cancellation). */
export const quotaReleaseSignal = defineSignal<[{ requestId: string }]>('quotaRelease');

/**
 * Signal to the quota workflow from a workflow still waiting in its queue, every `QUOTA_REASK_MS`
 * without a word: the quota ignores it, and it fails when no quota workflow runs (one was
 * terminated), so that the waiting workflow asks again at once instead of at its estimated start.
 */
export const quotaWaitingSignal = defineSignal<[{ requestId: string }]>('quotaWaiting');

/**
 * A take of one use now, asked by a create or message activity just before it sends, with
 * update-with-start ({@link quotaTakeUpdate}). Idempotent by request ID: a repeat of a granted take
 * (a retried activity attempt) is granted again without counting a second use.
 */
export interface QuotaTake {
  /** Built as {@link QuotaRequest.requestId}; the update ID too. */
  requestId: string;
  kind: QuotaUseKind;
  /** The budget the asking worker is configured with; the newest one wins, as for a request. */
  limit: QuotaLimit;
  /**
   * The asking activity's attempt. Only a retried attempt (after one that surely did not reach the
   * API) may take a granted ID again; a first attempt that finds its ID taken comes from the
   * workflow's past (a reset) and queues under a new ID. Absent: 1.
   */
  attempt?: number;
  /**
   * The run of the asking workflow. A reset run reuses its request IDs under a new run ID, so the
   * budget tells a take of this run's past (its call may have been sent) from one whose answer
   * this run never saw ({@link QuotaRequest.runId}). Absent: none is told apart.
   */
  runId?: string;
}

/** Why a take was not granted: the caller queues (the quota's state did not change). */
export type QuotaTakeRefusal = 'queue-not-empty' | 'no-room' | 'paused' | 'after-429' | 'used-before';

/**
 * What a take answers: `granted` (the use is counted in the window as spent: send now) or `queue`
 * (nothing changed: ask through the queue, {@link quotaRequestSignal}).
 */
export type QuotaTakeAnswer =
  /** `sendWithinMs`: the use counts from this long after the take; a call not sent by then queues. */
  { outcome: 'granted'; sendWithinMs: number } | { outcome: 'queue'; reason: QuotaTakeRefusal };

/**
 * Update (with start) to the quota workflow: take one use now, if the budget has room, nothing is
 * queued ahead and no 429 pause runs. An update, not a signal, because the activity needs the
 * answer before it sends; a busy quota (or one running code without this handler, or draining for
 * continue-as-new) rejects it or answers `queue`, and the job queues as before.
 */
export const quotaTakeUpdate = defineUpdate<QuotaTakeAnswer, [QuotaTake]>('quotaTake');

/** Signal from the quota workflow to a requesting workflow: its use is granted. */
export const quotaGrantSignal = defineSignal<[{ requestId: string; leaseExpiresAt: string }]>('quotaGrant');

/** Signal from the quota workflow to a queued workflow: its place when it joined, and again after a 429 pause. */
export const quotaPlaceSignal = defineSignal<[{ requestId: string } & QueuePlace]>('quotaPlace');

/**
 * Why the quota workflow did not queue a request: `queue-full` (ask again with the same request ID
 * at `retryAt`) or `used-before` (the ID was spent, released or refused: ask under a new ID).
 */
export interface QuotaDeclined {
  requestId: string;
  reason: 'queue-full' | 'used-before';
  /** The project's queue length when it declined. */
  queueLength: number;
  /** ISO time to ask again (`queue-full`): about when half the queue will have been granted. */
  retryAt: string;
}

/** Signal from the quota workflow to a requesting workflow: its request was not queued. */
export const quotaDeclinedSignal = defineSignal<[QuotaDeclined]>('quotaDeclined');

/** What the quota workflow's `quotaStatus` query answers. */
export interface ProjectQuotaStatus {
  projectId: string;
  /** The configured budget, and the one learnt from 429s (lower, or equal when none came). */
  limit: QuotaLimit;
  effectiveUses: number;
  /** Uses counted in the current window, granted-but-unconfirmed ones included. */
  usesInWindow: number;
  /** Grants not yet confirmed, oldest first. */
  leases: Array<{ requestId: string; workflowId: string; grantedAt: string; expiresAt: string }>;
  queueLength: number;
  /** The first requests of the queue, in order (at most 20). */
  queueHead: Array<{ requestId: string; workflowId: string; kind: QuotaUseKind; enqueuedAt: string }>;
  /** ISO time the project's budget resumes after a 429, or null. */
  pausedUntil: string | null;
  /** Counters across every run of the quota workflow. */
  totals: {
    granted: number;
    spent: number;
    refused: number;
    released: number;
    expired: number;
    /** Requests not queued: the queue was full, or the request ID was used before. */
    declined: number;
    /** Uses taken at once ({@link quotaTakeUpdate}), counted in `granted` and `spent` too. */
    taken: number;
  };
}

/** Query on the quota workflow: its state. */
export const quotaStatusQuery = defineQuery<ProjectQuotaStatus>('quotaStatus');

/** A project quota's counts: the budget as learnt, the uses in its window (grants out included), the queue. */
export interface QuotaUsage {
  budgetUses: number;
  usesInWindow: number;
  queued: number;
}

/**
 * What workflows tell the worker for the per-project metrics (src/observability/project-metrics.ts),
 * through the `projectMetrics` sink: never during replay, so each event counts once.
 */
export interface ProjectMetricsSinks extends Sinks {
  projectMetrics: {
    /** A job's workflow ended: `outcome` is its end status or failure type; seconds since its start. */
    jobEnded(projectId: string, outcome: string, seconds: number, hasPrLink: boolean): void;
    /** A create or message waited this long in the project's quota queue before its grant. */
    quotaWaited(projectId: string, seconds: number): void;
    /** The quota's state after a pass: the budget, the uses in its window, the queue. */
    quotaState(projectId: string, usage: QuotaUsage): void;
  };
}
