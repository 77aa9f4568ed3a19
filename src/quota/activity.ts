/**
 * The project quota from the activities' side: the activity that puts a workflow in its project's
 * quota queue (one signal-with-start to the project's quota workflow, which it starts on this task
 * queue when none runs), and the take that a create or message activity makes just before it sends
 * (one update-with-start, the fast path when nothing makes the call wait). The worker's quota
 * setting travels with each request and take, so workflow inputs stay as they were.
 */
import { activityInfo, cancellationSignal, getClient, log } from '@temporalio/activity';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import { WithStartWorkflowOperation } from '@temporalio/client';
import { withTimeout } from '../agent-api/abort.js';
import { FailureType } from '../contract.js';
import { taskPriority } from '../priority.js';
import {
  FOLLOWS_ROLLOUTS_MEMO,
  PROJECT_QUOTA_WORKFLOW_TYPE,
  projectQuotaWorkflowId,
  QUOTA_PRIORITY_KEY,
  quotaRequestSignal,
  quotaTakeUpdate,
  type QuotaLimit,
  type QuotaRequest,
  type QuotaTicket,
  type QuotaUseKind,
} from './messages.js';
import { formatQuotaLimit, quotaLimitFor, type ProjectQuotaSettings } from './settings.js';

/**
 * How long a take waits for the quota workflow's answer. Past it the call queues instead: a quota
 * workflow that slow to answer has a backlog, and the create or message activity's own 75 s are
 * for the API call.
 */
const TAKE_TIMEOUT_MS = 15_000;

/** What the create or message activity asks the quota for just before it sends. */
export interface QuotaTakeInput {
  projectId: string;
  /** The request ID the workflow built for this use: `<workflow ID>/<use name>`. */
  requestId: string;
  kind: QuotaUseKind;
}

/**
 * Takes one use of the project's budget now, for the call the activity is about to send:
 * `granted` (the use is counted: send), or `off` (the quota is off for this project on this
 * worker: send, nothing was asked). Any other answer throws a non-retryable
 * {@link FailureType.ProjectQuotaQueue} failure, with nothing sent: the workflow then queues
 * (src/workflows/agent-job/calls.ts). That covers a busy budget, a quota workflow running code
 * without the take (a rollout from 1.0: the update is rejected as unknown) or continuing as new,
 * too many updates in flight, and any error reaching it: the queue path retries those itself.
 */
export async function takeProjectQuotaUse(
  settings: ProjectQuotaSettings | null | undefined,
  input: QuotaTakeInput,
): Promise<'granted' | 'off'> {
  const limit = settings ? quotaLimitFor(settings, input.projectId) : null;
  if (limit === null) return 'off';
  const client = getClient();
  const cancelled = cancellationSignal();
  let reason: string;
  const askedAt = Date.now();
  try {
    const answer = await withTimeout(cancelled, TAKE_TIMEOUT_MS, (signal) =>
      client.connection.withAbortSignal(signal, () =>
        client.workflow.executeUpdateWithStart(quotaTakeUpdate, {
          args: [
            {
              requestId: input.requestId,
              kind: input.kind,
              limit,
              attempt: activityInfo().attempt,
              // A request under this ID from this run later tells the quota that this take's answer
              // never reached the call (it queued, nothing sent): the use is then counted once.
              ...runOf(),
            },
          ],
          startWorkflowOperation: new WithStartWorkflowOperation(PROJECT_QUOTA_WORKFLOW_TYPE, {
            ...quotaWorkflowStart(input.projectId, limit, settings?.followsRollouts),
            workflowIdConflictPolicy: 'USE_EXISTING',
          }),
        }),
      ),
    );
    // The use counts from `sendWithinMs` after the quota took it: a call sent later could reach the
    // API after the window freed the use. It stays counted (one use wasted for a window) and the
    // call queues, which is rare: the answer was that slow to come back.
    if (answer.outcome === 'granted' && Date.now() - askedAt <= answer.sendWithinMs) return 'granted';
    reason =
      answer.outcome === 'granted' ? `the answer came after ${Date.now() - askedAt} ms` : answer.reason;
  } catch (err) {
    if (cancelled.aborted) throw cancelled.reason;
    reason =
      err instanceof Error
        ? `${err.name}: ${err.cause instanceof Error ? err.cause.message : err.message}`
        : String(err);
    log.warn('the project quota did not answer a take; queueing instead', {
      projectId: input.projectId,
      requestId: input.requestId,
      reason,
    });
  }
  throw ApplicationFailure.create({
    type: FailureType.ProjectQuotaQueue,
    message: `Project ${input.projectId}'s quota did not give a use at once (${reason}): nothing was sent; the workflow queues for one.`,
    nonRetryable: true,
    details: [{ reason }],
    // Expected whenever the budget is busy: not logged as a failure.
    category: ApplicationFailureCategory.BENIGN,
  });
}

/** How the project's quota workflow is started when a request or a take finds none running. */
function quotaWorkflowStart(projectId: string, limit: QuotaLimit, followsRollouts = false) {
  return {
    workflowId: projectQuotaWorkflowId(projectId),
    // The quota workflow runs where the agent-job workflows run: the workers of one deployment
    // share a task queue, so whichever is up serves it.
    taskQueue: activityInfo().taskQueue,
    args: [{ projectId, limit }] as [{ projectId: string; limit: QuotaLimit }],
    staticSummary: `API budget of project ${projectId}: ${formatQuotaLimit(limit)}`,
    priority: taskPriority(projectId, QUOTA_PRIORITY_KEY),
    // Started by a versioned worker: it follows rollouts (src/quota/workflow.ts).
    ...(followsRollouts && { memo: { [FOLLOWS_ROLLOUTS_MEMO]: true } }),
  };
}

/** Input of {@link createProjectQuotaActivities}' enqueue activity. */
export interface EnqueueForProjectQuotaInput {
  projectId: string;
  /** Unique per use, stable across retries of this activity: a repeat finds its place again. */
  requestId: string;
  /** The workflow the grant is signalled to. */
  workflowId: string;
  kind: QuotaUseKind;
  /** Set when this request asks again for a use the API refused: see {@link QuotaRequest}. */
  refused?: QuotaRequest['refused'];
  /** When the granted call has surely ended: see {@link QuotaRequest}. */
  holdUntil?: number;
}

/** The quota activities; `settings` null or undefined turns the quota off on this worker. */
export function createProjectQuotaActivities(settings: ProjectQuotaSettings | null | undefined) {
  return {
    /** Queues one use with the project's quota workflow (a grant signal follows), or answers off. */
    enqueueForProjectQuota: async (input: EnqueueForProjectQuotaInput): Promise<QuotaTicket> => {
      const limit = settings ? quotaLimitFor(settings, input.projectId) : null;
      if (settings === null || settings === undefined || limit === null) return { state: 'off' };
      await getClient().workflow.signalWithStart(PROJECT_QUOTA_WORKFLOW_TYPE, {
        ...quotaWorkflowStart(input.projectId, limit, settings.followsRollouts),
        signal: quotaRequestSignal,
        signalArgs: [{ ...input, limit, leaseMs: settings.leaseMs, ...runOf() }],
      });
      return { state: 'requested', requestId: input.requestId, leaseMs: settings.leaseMs };
    },
  };
}

/** The asking workflow's run, which a take and a request name: QuotaTake.runId in src/contract.ts. */
function runOf(): { runId?: string } {
  const runId = activityInfo().workflowExecution?.runId;
  return runId ? { runId } : {};
}
