/**
 * The three calls of the Agent Job API as this workflow makes them: each an activity with its own
 * timeouts and retry policy, bounded by the deadline (./api-calls.ts), and the create and the
 * follow-up message within the project's quota: taken at once by the call itself when the quota
 * has room, else through the queue (../quota-requester.ts).
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  patched,
  proxyActivities,
  proxyLocalActivities,
  workflowInfo,
  type ActivityOptions,
  type LocalActivityOptions,
} from '@temporalio/workflow';
import type { AgentJobActivities } from '../../activities/index.js';
import {
  FailureType,
  type AgentJobRecord,
  type ApiErrorDetails,
  type QuotaRequest,
  type QuotaUseKind,
} from '../../contract.js';
import { CREATE_BACKOFF, GET_BACKOFF, MESSAGE_BACKOFF, retryPolicyOf } from '../../retries.js';
import type { ProjectQuotaRequester } from '../quota-requester.js';
import { attempt, untilAnswered, type ApiCallContext, type AttemptResult } from './api-calls.js';
import type { RunState } from './run-state.js';

// The activities mark final errors non-retryable and set each wait themselves (`nextRetryDelay`);
// whatever must be counted or waited for longer comes back to the workflow (./api-calls.ts).
//
// Creates and messages are retried by Temporal only after an attempt that surely did not reach the
// API (a refused connection, a 503): the API honours no idempotency key. A timeout (the worker may
// have died mid-request) is not retried by the server (the `TemporalTimeout:` types below), and an
// ambiguous answer is handed back by the activity: the workflow retries those itself, telling the
// next attempt that the one before may have been applied (./api-calls.ts).
const RETRY_NO_TIMEOUTS = ['TemporalTimeout:StartToClose', 'TemporalTimeout:Heartbeat'];
const createOptions: ActivityOptions = {
  // The HTTP client gives up well before this (the whole request within 60s).
  startToCloseTimeout: '75s',
  retry: { ...retryPolicyOf(CREATE_BACKOFF), nonRetryableErrorTypes: RETRY_NO_TIMEOUTS },
  // Heartbeats carry a cancellation to the request in flight; the workflow then waits for the
  // request to finish, to record the job it may have made.
  heartbeatTimeout: '10s',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
};
const getOptions: ActivityOptions = { startToCloseTimeout: '75s', retry: retryPolicyOf(GET_BACKOFF) };
// A local poll retries in the worker for a few seconds only, then comes back to the poll loop, which
// waits on its own timer: an outage of any length keeps each run's history bounded.
const localGetOptions: LocalActivityOptions = {
  startToCloseTimeout: getOptions.startToCloseTimeout,
  retry: { ...retryPolicyOf(GET_BACKOFF), maximumAttempts: 3 },
  localRetryThreshold: '10s',
};
// A follow-up message starts a turn, like a create: same patience, and an idempotency key too.
const messageOptions: ActivityOptions = {
  startToCloseTimeout: '75s',
  retry: { ...retryPolicyOf(MESSAGE_BACKOFF), nonRetryableErrorTypes: RETRY_NO_TIMEOUTS },
};

const { createAgentJob } = proxyActivities<AgentJobActivities>(createOptions);
const { getAgentJob } = proxyActivities<AgentJobActivities>(getOptions);
const { getAgentJob: getAgentJobLocally } = proxyLocalActivities<AgentJobActivities>(localGetOptions);
const { sendAgentJobMessage } = proxyActivities<AgentJobActivities>(messageOptions);

/**
 * The patch of the quota's fast path. 1.0's histories (test/histories) queue every create and
 * message first, so a run that replays one keeps that path; every new run takes its uses at once.
 * Its only cost is one marker event per run that makes a create or message (not a billable
 * action). Decision 0001 rolls workflow changes by build ID instead: once 1.0's histories replay
 * on 1.0's own build, this call goes and the fast path is the only one.
 */
export const QUOTA_TAKE_PATCH = 'quota-take-at-once';

/** How a create or message meets the quota: `takeAs` a request ID (the fast path), or `managed` by the queue. */
interface CallQuota {
  /** A grant from the queue covers the call: a 429 goes back to the queue, not to a retry. */
  managed: boolean;
  /** The call takes its use itself, under this request ID; null when the queue granted it or the quota is off. */
  takeAs: string | null;
}

/** Under the project quota a 429 goes back to the quota (pause, keep the place), not to a retry. */
function quotaManaged(options: ActivityOptions, managed: boolean): Partial<ActivityOptions> {
  if (!managed) return {};
  const types = options.retry?.nonRetryableErrorTypes ?? [];
  return { retry: { ...options.retry, nonRetryableErrorTypes: [...types, FailureType.RateLimited] } };
}

/** What the calls share with the workflow. */
export interface CallsContext {
  projectId: string;
  localPolls: boolean;
  /** The input's `blipTolerance`, in ms. */
  blipToleranceMs: number;
  /** The run's deadline, progress (for the last error), failure streak and quota use count. */
  run: Pick<RunState, 'deadlineMs' | 'progress' | 'streak' | 'quotaUses'>;
  quota: ProjectQuotaRequester;
  /** The failure for the deadline, naming what was under way. */
  timedOut(what: string): ApplicationFailure;
}

/** The Agent Job API as the workflow calls it. */
export class AgentJobCalls {
  constructor(private readonly ctx: CallsContext) {}

  /**
   * Creates the agent job, waiting out transient failures until the deadline. `uncertain`: why a
   * create may have been sent before this run's first attempt (a reset run), or null.
   */
  create(prompt: string, idempotencyKey: string, uncertain: string | null): Promise<AgentJobRecord> {
    const { projectId } = this.ctx;
    return untilAnswered(
      this.#context('the agent job could not be created'),
      'creating the agent job',
      CREATE_BACKOFF,
      (_timeoutMs, uncertain) =>
        this.#withinQuota('create', ({ managed, takeAs }) =>
          createAgentJob.executeWithOptions(
            {
              summary: `create agent job in project ${projectId}`,
              scheduleToCloseTimeout: this.#timeLeftMs('the agent job could not be created'),
              ...quotaManaged(createOptions, managed),
            },
            [
              {
                projectId,
                prompt,
                idempotencyKey,
                uncertain,
                ...(takeAs !== null && { quotaRequestId: takeAs }),
              },
            ],
          ),
        ),
      uncertain,
    );
  }

  /** Reads the agent job once: its record, or the wait before the next try. */
  read(jobId: string, poll: number): Promise<AttemptResult<AgentJobRecord>> {
    const get = this.ctx.localPolls ? getAgentJobLocally : getAgentJob;
    return attempt(
      this.#context('the agent job could not be read'),
      `reading agent job ${jobId}`,
      GET_BACKOFF,
      (timeoutMs) =>
        get.executeWithOptions(
          { summary: `poll ${poll} of agent job ${jobId}`, scheduleToCloseTimeout: timeoutMs },
          [{ projectId: this.ctx.projectId, jobId }],
        ),
    );
  }

  /** Sends a follow-up message that starts turn `turn`, waiting out transient failures. */
  sendMessage(jobId: string, prompt: string, idempotencyKey: string, turn: number): Promise<AgentJobRecord> {
    const { projectId } = this.ctx;
    return untilAnswered(
      this.#context('the follow-up message could not be sent'),
      'sending the follow-up message',
      MESSAGE_BACKOFF,
      (_timeoutMs, uncertain) =>
        this.#withinQuota('message', ({ managed, takeAs }) =>
          sendAgentJobMessage.executeWithOptions(
            {
              summary: `send follow-up message (turn ${turn})`,
              scheduleToCloseTimeout: this.#timeLeftMs('the follow-up message could not be sent'),
              ...quotaManaged(messageOptions, managed),
            },
            [
              {
                projectId,
                jobId,
                prompt,
                idempotencyKey,
                uncertain,
                ...(takeAs !== null && { quotaRequestId: takeAs }),
              },
            ],
          ),
        ),
    );
  }

  /**
   * The time left until the deadline, read when the call is sent: a call that waited in the quota
   * queue gets what is left then, not what was left when it was queued. Past the deadline nothing
   * is sent.
   */
  #timeLeftMs(whatTimedOut: string): number {
    const leftMs = this.ctx.run.deadlineMs - Date.now();
    if (leftMs <= 0) throw this.ctx.timedOut(whatTimedOut);
    return Math.max(1_000, leftMs);
  }

  /**
   * Each call is its own quota use, so a retry after another error asks again. The call first
   * takes its use itself (one update from its activity, nothing in this history); only when the
   * quota tells it to queue, or the API refused the use it took, does it go through the queue:
   * then the call that follows the grant takes nothing.
   */
  async #withinQuota<T>(kind: QuotaUseKind, call: (quota: CallQuota) => Promise<T>): Promise<T> {
    const { run, quota } = this.ctx;
    const use = { kind, name: `${kind}-${run.progress.turns}-${++run.quotaUses}` };
    const queued = (refused?: QuotaRequest['refused']) =>
      quota.run(use, (managed) => call({ managed, takeAs: null }), run.deadlineMs, refused);
    if (!patched(QUOTA_TAKE_PATCH)) return queued();
    const requestId = `${workflowInfo().workflowId}/${use.name}`;
    try {
      return await call({ managed: false, takeAs: requestId });
    } catch (err) {
      const fallback = quotaFallbackOf(err);
      if (fallback === null) throw err;
      return queued(fallback === 'queue' ? undefined : { requestId, retryAfterMs: fallback.retryAfterMs });
    }
  }

  #context(whatTimedOut: string): ApiCallContext {
    const { progress, deadlineMs, streak } = this.ctx.run;
    return {
      deadlineMs,
      streak,
      // Once the API has answered for the job, 404s and odd bodies are a blip until they last.
      blipToleranceMs: progress.lastRecord === null ? null : this.ctx.blipToleranceMs,
      // A success clears only its own call's error: a poll that works does not hide that follow-up
      // messages keep failing.
      reportError: (error, doing) => {
        if (error !== null || progress.lastError?.during === doing) progress.lastError = error;
      },
      timedOut: () => this.ctx.timedOut(whatTimedOut),
      resent: () => {
        progress.resent++;
      },
    };
  }
}

/**
 * What a create or message that took its own use asks of the queue: `queue` (the quota was busy
 * and nothing was sent), the 429 that refused the use it took (the quota must hear it), or null
 * for any other outcome, which the call's own handling reads (./api-calls.ts).
 */
function quotaFallbackOf(err: unknown): 'queue' | { retryAfterMs: number | null } | null {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof ApplicationFailure)) return null;
  if (err.cause.type === FailureType.ProjectQuotaQueue) return 'queue';
  if (err.cause.type !== FailureType.RateLimited) return null;
  const details = err.cause.details?.[0] as Partial<ApiErrorDetails> | undefined;
  if (details?.quotaTaken !== true) return null;
  return { retryAfterMs: typeof details.retryAfterMs === 'number' ? details.retryAfterMs : null };
}
