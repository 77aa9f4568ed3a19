/**
 * The three calls of the Agent Job API as this workflow makes them: each an activity with its own
 * timeouts and retry policy, bounded by the deadline (./api-failures.ts); the create and the
 * message each take a use of the project's quota (../project-quota/requester.ts).
 */
import {
  currentUpdateInfo,
  ActivityCancellationType,
  proxyActivities,
  setCurrentDetails,
  workflowInfo,
  type ActivityOptions,
} from '@temporalio/workflow';
import type { AgentJobActivities, CreateAgentJobInput, PolledRecord } from '../../activities/index.js';
import { FailureType, type AgentJobRecord } from '../../contract.js';
import { markdownText, quoted } from '../../escape.js';
import type { QuotaUseKind } from '../../quota/messages.js';
import { CREATE_BACKOFF, MESSAGE_BACKOFF, retryPolicyOf } from '../../failure-policy/backoff.js';
import { POLL_ATTEMPT_TIMEOUT_MS, pollRetryCapMs } from '../../poll-schedule.js';
import type { ResolvedInput } from '../../input.js';
import type { ProjectQuotaRequester, QuotaUse } from '../project-quota/requester.js';
import { attempt, untilAnswered, type ApiCall, type ApiCaller, type AttemptResult } from './api-failures.js';

/** What the calls read of the run (./run.ts), besides what ./api-failures.ts reports to it. */
export interface CallingRun extends ApiCaller {
  readonly projectId: string;
  readonly input: Pick<ResolvedInput, 'poll'>;
  readonly quota: ProjectQuotaRequester;
  /** The next quota use of `kind`, named uniquely within the workflow. */
  nextQuotaUse(kind: QuotaUseKind): QuotaUse;
}

// Short waits are Temporal's retries; longer ones come back to the workflow (decision 0006).
// Creates and messages are retried by Temporal only after an attempt that surely did not reach the
// API; a timeout comes back to the workflow, which retries it itself as one that may have been
// applied (docs/decisions/0009-who-sends-a-create-again.md). So does the SDK's `WorkerShutdown`
// (our type name too): an attempt that let it out after sending may have been applied, one
// stopped before sending comes back as surely not applied (src/activities/index.ts).
const RETRY_NO_TIMEOUTS = [
  'TemporalTimeout:StartToClose',
  'TemporalTimeout:Heartbeat',
  FailureType.WorkerShutdown,
];
// A follow-up message starts a turn, like a create: same patience, and an idempotency key too.
const sendOptions = (backoff: typeof CREATE_BACKOFF): ActivityOptions => ({
  // The HTTP client gives up well before this (the whole request within 60s).
  startToCloseTimeout: '75s',
  retry: { ...retryPolicyOf(backoff), nonRetryableErrorTypes: RETRY_NO_TIMEOUTS },
});
const createOptions: ActivityOptions = {
  ...sendOptions(CREATE_BACKOFF),
  // Heartbeats carry a cancellation to the request in flight; the workflow then waits for the
  // request to finish, to record the job it may have made.
  heartbeatTimeout: '10s',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
};
// One poll activity covers a wait, its attempts polling by server-side retry; TRY_CANCEL lets a
// requested poll end it at once (docs/decisions/0010-poll-by-server-side-retry.md).
const pollOptions: ActivityOptions = {
  startToCloseTimeout: POLL_ATTEMPT_TIMEOUT_MS,
  cancellationType: ActivityCancellationType.TRY_CANCEL,
};

const { createAgentJob } = proxyActivities<AgentJobActivities>(createOptions);
const { pollAgentJob } = proxyActivities<AgentJobActivities>(pollOptions);
const { sendAgentJobMessage } = proxyActivities<AgentJobActivities>(sendOptions(MESSAGE_BACKOFF));

/** Creates the agent job, until the deadline. `previousCreate`: why one may have been sent before this workflow started. */
export function createJob(
  run: CallingRun,
  prompt: string,
  previousCreate: string | null,
): Promise<AgentJobRecord> {
  const { projectId } = run;
  const { workflowId, runId, originalExecutionRunId } = workflowInfo();
  // The create's key is the workflow ID, so one workflow never creates two agent jobs.
  const idempotencyKey = headerValue(workflowId);
  setCurrentDetails(`Creating the agent job in project ${markdownText(projectId)}`);
  // A reset run, or one started again after a run that ended with its create on the wire, cannot
  // know whether the create was sent: the ambiguous-call policy decides (decision 0009).
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

/** Polls the agent job until its record is not `active` (or the deadline is near), from `intervalMs`. */
export function pollJob(
  run: CallingRun,
  jobId: string,
  intervalMs: number,
): Promise<AttemptResult<PolledRecord>> {
  const { projectId, input, deadlineMs } = run;
  const { maxIntervalMs, backoffCoefficient } = input.poll;
  const schedule = { intervalMs, maxIntervalMs, backoffCoefficient };
  // The server caps `nextRetryDelay` at `maximumInterval`; an attempt that timed out retries after
  // 1 s (or less on a faster schedule), not after a growing backoff (decision 0010).
  const maximumInterval = pollRetryCapMs(maxIntervalMs);
  const retry = { initialInterval: Math.min(1_000, maximumInterval), backoffCoefficient: 1, maximumInterval };
  return attempt(
    run,
    {
      operation: 'getJob',
      // Plain text for failure messages and logs: the ID JSON-quoted (./outcomes.ts says why).
      doing: `reading agent job ${quoted(jobId)}`,
      whatTimedOut: 'the agent job could not be read',
    },
    // No schedule-to-close timeout: the attempts keep to the deadline in the input (decision 0010).
    () =>
      pollAgentJob.executeWithOptions({ summary: `poll agent job ${markdownText(jobId)}`, retry }, [
        { projectId, jobId, schedule, deadlineMs },
      ]),
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
type SentWith = Pick<CreateAgentJobInput, 'uncertain' | 'quotaRequestId' | 'quotaRefused'>;

/**
 * A create or message, sent until the API answers or the deadline comes. Each attempt is its own
 * quota use, taken by the activity (nothing in this history when the quota has room); when the
 * quota queues it, or the API refused the use, the requester waits and calls again.
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
  return untilAnswered(
    run,
    call,
    (uncertain) =>
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

/** The time left until the deadline when the call is sent (after any wait in the quota's queue). */
function timeLeftMs(run: CallingRun, whatTimedOut: string): number {
  const leftMs = run.deadlineMs - Date.now();
  if (leftMs <= 0) throw run.timedOut(whatTimedOut);
  return Math.max(1_000, leftMs);
}

// The `Idempotency-Key` of each call that starts work at the API: stable across attempts, worker
// restarts and continue-as-new. The live API honours none (decision 0009).

/** The key of the prompt of `{ jobId, prompt }`: a later workflow with this ID gets a new key. */
export function startFollowUpKey(): string {
  const { workflowId, firstExecutionRunId } = workflowInfo();
  return headerValue(`${workflowId}/${firstExecutionRunId}/follow-up`);
}

/** The key of an update's message: one per update ID, the same for a client retrying it (also after continue-as-new). */
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
