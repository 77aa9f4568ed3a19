/**
 * The take a create or message activity makes just before it sends (docs/project-quota.md). The
 * worker's quota setting travels with each take, so workflow inputs stay as they were.
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
  quotaTakeUpdate,
  type QuotaMiss,
  type QuotaTake,
  type QuotaUseKind,
} from '../quota/messages.js';
import { formatQuotaLimit, quotaLimitFor, type ProjectQuotaSettings } from '../quota/settings.js';

/**
 * How long a take waits for the quota workflow's answer. Past it the workflow takes again later: a
 * quota workflow that slow to answer has a backlog, and the activity's own 75 s are for the API call.
 */
const TAKE_TIMEOUT_MS = 15_000;

/** What the create or message activity's input says of the quota, set by the workflow. */
export interface QuotaTakeInput {
  projectId: string;
  /** The request ID of this use, `<workflow ID>/<use name>`; absent or null: take nothing. */
  quotaRequestId?: string | null;
  /** The 429 that refused the use of the take before this one: see {@link QuotaTake.refused}. */
  quotaRefused?: QuotaTake['refused'] | null;
}

/**
 * Takes one use of the project's budget for the call about to be sent: `at-once` or `from-queue`
 * (held since it queued), or `off` (no take asked for or no quota): send. Else throws a benign,
 * non-retryable `ProjectQuotaQueue` failure with the {@link QuotaMiss}: nothing may be sent.
 */
export async function takeProjectQuotaUse(
  settings: ProjectQuotaSettings | null | undefined,
  kind: QuotaUseKind,
  input: QuotaTakeInput,
): Promise<'at-once' | 'from-queue' | 'off'> {
  const limit = settings ? quotaLimitFor(settings, input.projectId) : null;
  if (!settings || limit === null || !input.quotaRequestId) return 'off';
  const { projectId, quotaRequestId: requestId } = input;
  const info = activityInfo();
  // Always set for an activity of a workflow, which these are.
  const execution = info.workflowExecution;
  if (!execution) return 'off';
  const take: QuotaTake = {
    requestId,
    workflowId: execution.workflowId,
    runId: execution.runId,
    kind,
    limit,
    leaseMs: settings.leaseMs,
    ...(input.quotaRefused && { refused: input.quotaRefused }),
  };
  const client = getClient();
  const cancelled = cancellationSignal();
  const askedAt = Date.now();
  let miss: QuotaMiss;
  try {
    const answer = await withTimeout(cancelled, TAKE_TIMEOUT_MS, (signal) =>
      client.connection.withAbortSignal(signal, () =>
        client.workflow.executeUpdateWithStart(quotaTakeUpdate, {
          args: [take],
          startWorkflowOperation: new WithStartWorkflowOperation(PROJECT_QUOTA_WORKFLOW_TYPE, {
            workflowId: projectQuotaWorkflowId(projectId),
            // The quota workflow runs where the agent-job workflows run: the workers of one
            // deployment share a task queue, so whichever is up serves it.
            taskQueue: info.taskQueue,
            args: [{ projectId, limit }],
            staticSummary: `API budget of project ${projectId}: ${formatQuotaLimit(limit)}`,
            // First (QUOTA_PRIORITY_KEY), with the fairness key of the project's jobs.
            priority: taskPriority(projectId, QUOTA_PRIORITY_KEY),
            // Started by a versioned worker: it follows rollouts (../workflows/project-quota/workflow.ts).
            ...(settings.followsRollouts && { memo: { [FOLLOWS_ROLLOUTS_MEMO]: true } }),
            workflowIdConflictPolicy: 'USE_EXISTING',
          }),
        }),
      ),
    );
    // Queued: the job takes again a lease on if no grant came (QUOTA_REASK_MS).
    if (answer.outcome === 'queued') miss = { ...answer, reaskInMs: settings.leaseMs };
    else if (answer.outcome !== 'granted') miss = answer;
    // The use counts from `sendWithinMs` after the quota took it: a call sent later could reach the
    // API after the window freed the use. The workflow takes again under the same ID, which moves it.
    else if (Date.now() - askedAt <= answer.sendWithinMs) return answer.fromQueue ? 'from-queue' : 'at-once';
    else miss = { outcome: 'late' };
  } catch (err) {
    if (cancelled.aborted) throw cancelled.reason;
    const reason =
      err instanceof Error
        ? `${err.name}: ${err.cause instanceof Error ? err.cause.message : err.message}`
        : String(err);
    log.warn('the project quota did not answer a take; the workflow takes again later', {
      projectId,
      requestId,
      reason,
    });
    miss = { outcome: 'unanswered', reason };
  }
  throw ApplicationFailure.create({
    type: FailureType.ProjectQuotaQueue,
    message: `Project ${projectId}'s quota did not give a use at once (${miss.outcome}): nothing was sent; the workflow waits for one.`,
    nonRetryable: true,
    details: [miss],
    // Expected whenever the budget is busy: not logged as a failure.
    category: ApplicationFailureCategory.BENIGN,
  });
}
