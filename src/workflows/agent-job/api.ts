/**
 * The three calls of the Agent Job API as this workflow makes them: each an activity with its own
 * timeouts and retry policy, bounded by the deadline (./api-failures.ts), and the create and the
 * follow-up message within the project's quota: each call takes its use itself, and waits in the
 * quota's queue when the take says so (../project-quota/requester.ts).
 */
import type { ApplicationFailure } from '@temporalio/workflow';
import {
  currentUpdateInfo,
  ActivityCancellationType,
  log,
  proxyActivities,
  proxySinks,
  setCurrentDetails,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { AgentJobActivities, PolledRecord } from '../../activities/index.js';
import type { AgentJobRecord } from '../../contract.js';
import { markdownText, quoted } from '../../escape.js';
import type { QuotaUseKind } from '../project-quota/messages.js';
import {
  CREATE_BACKOFF,
  GET_BACKOFF,
  MESSAGE_BACKOFF,
  retryPolicyOf,
  SDK_WORKER_SHUTDOWN_TYPE,
  type ApiOperation,
} from '../../agent-api/failure-policy.js';
import type { ProjectMetricsSinks } from '../../observability/project-metrics.js';
import { POLL_ATTEMPT_TIMEOUT_MS, pollRetryCapMs, type ResolvedPollSettings } from '../../poll-schedule.js';
import type { ProjectQuotaRequester, QuotaTicket } from '../project-quota/requester.js';
import { attempt, untilAnswered, type ApiCallContext, type AttemptResult } from './api-failures.js';
import type { RunState } from './run-state.js';

// The activities mark final errors non-retryable and set each wait themselves (`nextRetryDelay`);
// whatever must be counted or waited for longer comes back to the workflow (./api-failures.ts).
//
// Creates and messages are retried by Temporal only after an attempt that surely did not reach the
// API (a refused connection, a 503): the API honours no idempotency key. A timeout (the worker may
// have died mid-request) is not retried by the server (the `TemporalTimeout:` types below), and an
// ambiguous answer is handed back by the activity: the workflow retries those itself, telling the
// next attempt that the one before may have been applied (./api-failures.ts).
//
// A stopping worker lets a create or message it already sent finish (src/activities/index.ts);
// an attempt that let the SDK's `WorkerShutdown` failure out all the same comes back to the
// workflow too, which treats it as one that may have been sent.
const RETRY_NO_TIMEOUTS = [
  'TemporalTimeout:StartToClose',
  'TemporalTimeout:Heartbeat',
  SDK_WORKER_SHUTDOWN_TYPE,
];
const createOptions: ActivityOptions = {
  // The HTTP client gives up well before this (the whole request within 60s).
  startToCloseTimeout: '75s',
  retry: { ...retryPolicyOf(CREATE_BACKOFF), nonRetryableErrorTypes: RETRY_NO_TIMEOUTS },
  // Heartbeats carry a cancellation to the request in flight; the workflow then waits for the
  // request to finish, to record the job it may have made.
  heartbeatTimeout: '10s',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
};
// One poll activity covers a wait: its attempts poll by server-side retry, each with its own
// `nextRetryDelay` (src/poll-schedule.ts). The policy's own backoff only spaces attempts
// that timed out. TRY_CANCEL: a requested poll cancels it at once, also while the server waits
// between attempts, and the workflow goes on without waiting for the worker.
//
// The server caps every retry delay, `nextRetryDelay` included, at the policy's maximum interval:
// that is the schedule's longest wait with its jitter (set per call below). A timeout, whose delay
// is the policy's own, retries after 1 s: an attempt lost with its worker costs its 30 s
// start-to-close (the GET itself is bounded at 20 s in the activity), not that plus a minute.
const pollOptions: ActivityOptions = {
  startToCloseTimeout: POLL_ATTEMPT_TIMEOUT_MS,
  cancellationType: ActivityCancellationType.TRY_CANCEL,
};

/** The poll activity's retry policy for a schedule whose longest wait is `maxIntervalMs`. */
function pollRetryPolicy(maxIntervalMs: number): ActivityOptions['retry'] {
  const maximumInterval = pollRetryCapMs(maxIntervalMs);
  // 1 s after a timeout, or less on a schedule faster than that.
  return { initialInterval: Math.min(1_000, maximumInterval), backoffCoefficient: 1, maximumInterval };
}
// A follow-up message starts a turn, like a create: same patience, and an idempotency key too.
const messageOptions: ActivityOptions = {
  startToCloseTimeout: '75s',
  retry: { ...retryPolicyOf(MESSAGE_BACKOFF), nonRetryableErrorTypes: RETRY_NO_TIMEOUTS },
};

const { createAgentJob } = proxyActivities<AgentJobActivities>(createOptions);
const { projectMetrics } = proxySinks<ProjectMetricsSinks>();
const { pollAgentJob } = proxyActivities<AgentJobActivities>(pollOptions);
const { sendAgentJobMessage } = proxyActivities<AgentJobActivities>(messageOptions);

/** What the calls share with the workflow. */
export interface ApiContext {
  projectId: string;
  poll: ResolvedPollSettings;
  /** The input's `blipTolerance` and `credentialTolerance`, in ms. */
  tolerances: { blipMs: number; credentialMs: number };
  /** The run's deadline, progress (for the last error), failure streak and quota use count. */
  run: Pick<RunState, 'deadlineMs' | 'progress' | 'streak' | 'quotaUses'>;
  quota: ProjectQuotaRequester;
  /** The failure for the deadline, naming what was under way. */
  timedOut(what: string): ApplicationFailure;
}

/** The Agent Job API as the workflow calls it. */
export class AgentJobApi {
  constructor(private readonly ctx: ApiContext) {}

  /**
   * Creates the agent job, waiting out transient failures until the deadline. `uncertain`: why a
   * create may have been sent before this run's first attempt (a reset run), or null.
   */
  create(prompt: string, idempotencyKey: string, uncertain: string | null): Promise<AgentJobRecord> {
    const { projectId } = this.ctx;
    return untilAnswered(
      this.#context('createJob', 'the agent job could not be created'),
      'creating the agent job',
      CREATE_BACKOFF,
      (_timeoutMs, uncertain) =>
        this.#withinQuota('create', (ticket) =>
          createAgentJob.executeWithOptions(
            {
              summary: `create agent job in project ${markdownText(projectId)}`,
              scheduleToCloseTimeout: this.#timeLeftMs('the agent job could not be created'),
            },
            [{ projectId, prompt, idempotencyKey, uncertain, ...quotaInput(ticket) }],
          ),
        ),
      uncertain,
    );
  }

  /**
   * Polls the agent job until its record is not `active` (or the deadline is near): one activity,
   * the server retrying it at the schedule's pace from `intervalMs`. Its record and the polls it
   * made, or the wait before the next try after an answer the workflow must see.
   */
  poll(jobId: string, intervalMs: number): Promise<AttemptResult<PolledRecord>> {
    const { projectId, poll } = this.ctx;
    const schedule = {
      intervalMs,
      maxIntervalMs: poll.maxIntervalMs,
      backoffCoefficient: poll.backoffCoefficient,
    };
    return attempt(
      this.#context('getJob', 'the agent job could not be read'),
      // Plain text for failure messages and logs: the ID JSON-quoted (./outcomes.ts says why).
      `reading agent job ${quoted(jobId)}`,
      GET_BACKOFF,
      // No schedule-to-close timeout: the deadline goes in the input, and the attempts keep to it
      // (src/poll-schedule.ts, POLL_PAST_DEADLINE).
      () =>
        pollAgentJob.executeWithOptions(
          {
            summary: `poll agent job ${markdownText(jobId)}`,
            retry: pollRetryPolicy(poll.maxIntervalMs),
          },
          [{ projectId, jobId, schedule, deadlineMs: this.ctx.run.deadlineMs }],
        ),
      // Its attempts before the one that failed were answers (active records) the workflow never saw.
      { afterUnseenAttempts: true },
    );
  }

  /** Sends a follow-up message that starts turn `turn`, waiting out transient failures. */
  sendMessage(jobId: string, prompt: string, idempotencyKey: string, turn: number): Promise<AgentJobRecord> {
    const { projectId } = this.ctx;
    return untilAnswered(
      this.#context('sendMessage', 'the follow-up message could not be sent'),
      'sending the follow-up message',
      MESSAGE_BACKOFF,
      (_timeoutMs, uncertain) =>
        this.#withinQuota('message', (ticket) =>
          sendAgentJobMessage.executeWithOptions(
            {
              summary: `send follow-up message (turn ${turn})`,
              scheduleToCloseTimeout: this.#timeLeftMs('the follow-up message could not be sent'),
            },
            [{ projectId, jobId, prompt, idempotencyKey, uncertain, ...quotaInput(ticket) }],
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
   * Each call is its own quota use, so a retry after another error takes again. The call takes its
   * use itself (one update from its activity, nothing in this history when the quota has room); when
   * the quota queues it, or the API refused the use it took, the requester waits and calls again.
   */
  #withinQuota<T>(kind: QuotaUseKind, call: (ticket: QuotaTicket) => Promise<T>): Promise<T> {
    const { run, quota } = this.ctx;
    const use = { kind, name: `${kind}-${run.progress.turns}-${++run.quotaUses}` };
    return quota.run(use, call, run.deadlineMs);
  }

  #context(operation: ApiOperation, whatTimedOut: string): ApiCallContext {
    const { progress, deadlineMs, streak } = this.ctx.run;
    const { projectId } = this.ctx;
    return {
      deadlineMs,
      streak,
      operation,
      tolerances: {
        // Once the API has answered for the job, 404s and odd bodies are a blip until they last.
        blipMs: progress.lastRecord === null ? null : this.ctx.tolerances.blipMs,
        credentialMs: this.ctx.tolerances.credentialMs,
      },
      // A success clears only its own call's error: a poll that works does not hide that follow-up
      // messages keep failing.
      reportError: (error, doing, waitingForKey) => {
        if (error !== null || progress.lastError?.during === doing) progress.lastError = error;
        // The gauge counts the workflows waiting: each refusal reports, so a stale one drops out.
        if (waitingForKey) projectMetrics.keyWait(projectId, true);
        if (waitingForKey === progress.waitingForKey) return;
        progress.waitingForKey = waitingForKey;
        // One line when the wait starts and one when it ends, naming the project, for alerts.
        if (waitingForKey) {
          setCurrentDetails(
            `Waiting for a working API key: the Agent Job API refused it (HTTP ${error?.status ?? '401/403'}); trying again with the key read afresh`,
          );
          log.warn('the Agent Job API refuses the API key; waiting for a working one', {
            projectId,
            doing,
            status: error?.status ?? null,
          });
        } else {
          log.info('the Agent Job API accepts the API key again', { projectId, doing });
          projectMetrics.keyWait(projectId, false);
        }
      },
      timedOut: () => this.ctx.timedOut(whatTimedOut),
      resent: () => {
        progress.resent++;
      },
    };
  }
}

/** The quota fields of a create or message activity's input: the take's request ID and the 429 it follows. */
function quotaInput({ requestId, refused }: QuotaTicket) {
  return { quotaRequestId: requestId, ...(refused && { quotaRefused: refused }) };
}

// The `Idempotency-Key` of each call that starts work at the API: stable across attempts, worker
// restarts and continue-as-new, so a server that honours it sees one intent as one. The live API
// honours none: what keeps a create or message to one call is that the workflow sends it again only
// under `AGENT_API_AMBIGUOUS_CREATE=retry` (./api-failures.ts, src/activities/index.ts).

/** The create's key: the workflow ID, so one workflow never creates two agent jobs. */
export function createKey(): string {
  return headerValue(workflowInfo().workflowId);
}

/**
 * The key of the prompt of `{ jobId, prompt }`: the workflow ID and its first run, so a later
 * workflow with this ID is a new follow-up and gets a new key.
 */
export function startFollowUpKey(): string {
  const { workflowId, firstExecutionRunId } = workflowInfo();
  return headerValue(`${workflowId}/${firstExecutionRunId}/follow-up`);
}

/**
 * The key of an update's message: one per update ID, so a client retrying the update (also after
 * continue-as-new) sends the same key, and a new message never reuses a failed one's.
 */
export function updateMessageKey(turn: number): string {
  const updateId = currentUpdateInfo()?.id ?? `turn-${turn + 1}`;
  return headerValue(`${workflowInfo().workflowId}/message/${updateId}`);
}

/** Header values must be visible ASCII; an ID with spaces or any Unicode is percent-encoded. */
function headerValue(id: string): string {
  return /^[\x21-\x7e]+$/.test(id) ? id : encodeURIComponent(id);
}
