/**
 * The three calls of the Agent Job API as this workflow makes them: each an activity with its own
 * timeouts and retry policy, bounded by the deadline (./api-failures.ts), and the create and the
 * follow-up message within the project's quota: each call takes its use itself, and waits in the
 * quota's queue when the take says so (../project-quota/requester.ts).
 */
import {
  currentUpdateInfo,
  ActivityCancellationType,
  proxyActivities,
  setCurrentDetails,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { AgentJobActivities, PolledRecord } from '../../activities/index.js';
import { FailureType, type AgentJobRecord } from '../../contract.js';
import { markdownText, quoted } from '../../escape.js';
import type { QuotaUseKind } from '../../quota/messages.js';
import { CREATE_BACKOFF, MESSAGE_BACKOFF, retryPolicyOf } from '../../failure-policy/backoff.js';
import { POLL_ATTEMPT_TIMEOUT_MS, pollRetryCapMs } from '../../poll-schedule.js';
import type { ResolvedInput } from '../../input.js';
import type { ProjectQuotaRequester, QuotaTicket, QuotaUse } from '../project-quota/requester.js';
import { attempt, untilAnswered, type ApiCall, type ApiCaller, type AttemptResult } from './api-failures.js';

/** What the calls read of the run (./run.ts), besides what ./api-failures.ts reports to it. */
export interface CallingRun extends ApiCaller {
  readonly projectId: string;
  readonly input: Pick<ResolvedInput, 'poll'>;
  readonly quota: ProjectQuotaRequester;
  /** The next quota use of `kind`, named uniquely within the workflow. */
  nextQuotaUse(kind: QuotaUseKind): QuotaUse;
}

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
// workflow too, which treats it as one that may have been sent. The SDK's type name is ours too:
// an attempt stopped before it sent anything comes back the same way, as surely not applied.
const RETRY_NO_TIMEOUTS = [
  'TemporalTimeout:StartToClose',
  'TemporalTimeout:Heartbeat',
  FailureType.WorkerShutdown,
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
const { pollAgentJob } = proxyActivities<AgentJobActivities>(pollOptions);
const { sendAgentJobMessage } = proxyActivities<AgentJobActivities>(messageOptions);

/**
 * Creates the agent job, waiting out transient failures until the deadline. `previousCreate`: why
 * a create may have been sent before this workflow started (the input's), or null.
 */
export function createJob(
  run: CallingRun,
  prompt: string,
  previousCreate: string | null,
): Promise<AgentJobRecord> {
  const { projectId } = run;
  const idempotencyKey = createKey();
  setCurrentDetails(`Creating the agent job in project ${markdownText(projectId)}`);
  // A run reset to a point before its create completed cannot know whether the run it replaces
  // had sent it, nor can a run started again after one ended with its create on the wire: the
  // ambiguous-call policy decides, as after a lost answer.
  const { runId, originalExecutionRunId } = workflowInfo();
  const uncertain =
    runId === originalExecutionRunId
      ? previousCreate
      : 'the run this one was reset from (it may have created the agent job before the reset point)';
  return sendWithinQuota(
    run,
    'create',
    {
      operation: 'createJob',
      doing: 'creating the agent job',
      whatTimedOut: 'the agent job could not be created',
    },
    `create agent job in project ${markdownText(projectId)}`,
    (options, sent) =>
      createAgentJob.executeWithOptions(options, [{ projectId, prompt, idempotencyKey, ...sent }]),
    uncertain,
  );
}

/**
 * Polls the agent job until its record is not `active` (or the deadline is near): one activity,
 * the server retrying it at the schedule's pace from `intervalMs`. Its record and the polls it
 * made, or the wait before the next try after an answer the workflow must see.
 */
export function pollJob(
  run: CallingRun,
  jobId: string,
  intervalMs: number,
): Promise<AttemptResult<PolledRecord>> {
  const { projectId, input, deadlineMs } = run;
  const { maxIntervalMs, backoffCoefficient } = input.poll;
  const schedule = { intervalMs, maxIntervalMs, backoffCoefficient };
  return attempt(
    run,
    {
      operation: 'getJob',
      // Plain text for failure messages and logs: the ID JSON-quoted (./outcomes.ts says why).
      doing: `reading agent job ${quoted(jobId)}`,
      whatTimedOut: 'the agent job could not be read',
    },
    // No schedule-to-close timeout: the deadline goes in the input, and the attempts keep to it
    // (src/poll-schedule.ts, POLL_PAST_DEADLINE).
    () =>
      pollAgentJob.executeWithOptions(
        { summary: `poll agent job ${markdownText(jobId)}`, retry: pollRetryPolicy(maxIntervalMs) },
        [{ projectId, jobId, schedule, deadlineMs }],
      ),
    // Its attempts before the one that failed were answers (active records) the workflow never saw.
    { afterUnseenAttempts: true },
  );
}

/** Sends a follow-up message that starts turn `turn`, waiting out transient failures. */
export function sendMessage(
  run: CallingRun,
  jobId: string,
  prompt: string,
  idempotencyKey: string,
  turn: number,
): Promise<AgentJobRecord> {
  const { projectId } = run;
  return sendWithinQuota(
    run,
    'message',
    {
      operation: 'sendMessage',
      doing: 'sending the follow-up message',
      whatTimedOut: 'the follow-up message could not be sent',
    },
    `send follow-up message (turn ${turn})`,
    (options, sent) =>
      sendAgentJobMessage.executeWithOptions(options, [
        { projectId, jobId, prompt, idempotencyKey, ...sent },
      ]),
  );
}

/** What every attempt of a create or message adds to its input: why it may follow an applied one, its quota take. */
interface SentWith {
  uncertain: string | null;
  quotaRequestId: string;
  quotaRefused?: QuotaTicket['refused'];
}

/**
 * A create or message: each attempt one use of the project's quota, sent until the API answers or
 * the deadline comes, with what is left of it as the activity's schedule-to-close timeout.
 * `uncertainFromStart`: why the call may have been sent before this run's first attempt.
 */
function sendWithinQuota(
  run: CallingRun,
  kind: QuotaUseKind,
  call: ApiCall,
  summary: string,
  start: (options: ActivityOptions, sent: SentWith) => Promise<AgentJobRecord>,
  uncertainFromStart: string | null = null,
): Promise<AgentJobRecord> {
  // Each attempt is its own quota use, so a retry after another error takes again. The call takes
  // its use itself (one update from its activity, nothing in this history when the quota has
  // room); when the quota queues it, or the API refused the use it took, the requester waits and
  // calls again.
  return untilAnswered(
    run,
    call,
    (_timeoutMs, uncertain) =>
      run.quota.run(
        run.nextQuotaUse(kind),
        ({ requestId, refused }) =>
          start(
            { summary, scheduleToCloseTimeout: timeLeftMs(run, call.whatTimedOut) },
            { uncertain, quotaRequestId: requestId, ...(refused && { quotaRefused: refused }) },
          ),
        run.deadlineMs,
      ),
    uncertainFromStart,
  );
}

/**
 * The time left until the deadline, read when the call is sent: a call that waited in the quota
 * queue gets what is left then, not what was left when it was queued. Past the deadline nothing
 * is sent.
 */
function timeLeftMs(run: CallingRun, whatTimedOut: string): number {
  const leftMs = run.deadlineMs - Date.now();
  if (leftMs <= 0) throw run.timedOut(whatTimedOut);
  return Math.max(1_000, leftMs);
}

// The `Idempotency-Key` of each call that starts work at the API: stable across attempts, worker
// restarts and continue-as-new, so a server that honours it sees one intent as one. The live API
// honours none: what keeps a create or message to one call is that the workflow sends it again only
// under `AGENT_API_AMBIGUOUS_CREATE=retry` (./api-failures.ts, src/activities/index.ts).

/** The create's key: the workflow ID, so one workflow never creates two agent jobs. */
function createKey(): string {
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

/** The ID of the update being handled or validated. */
export function updateIdNow(): string {
  const info = currentUpdateInfo();
  if (info === undefined) throw new Error('not in an update handler');
  return info.id;
}

/** Header values must be visible ASCII; an ID with spaces or any Unicode is percent-encoded. */
function headerValue(id: string): string {
  return /^[\x21-\x7e]+$/.test(id) ? id : encodeURIComponent(id);
}
