/**
 * The activity that puts a workflow in its project's quota queue: one signal-with-start to the
 * project's quota workflow, which it starts on this task queue when none runs. The worker's quota
 * setting travels with each request, so workflow inputs stay as they were.
 */
import { activityInfo, getClient } from '@temporalio/activity';
import {
  PROJECT_QUOTA_WORKFLOW_TYPE,
  projectQuotaWorkflowId,
  QUOTA_PRIORITY_KEY,
  quotaRequestSignal,
  taskPriority,
  type QuotaRequest,
  type QuotaTicket,
  type QuotaUseKind,
} from '../contract.js';
import { formatQuotaLimit, quotaLimitFor, type ProjectQuotaSettings } from '../quota/settings.js';

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
        workflowId: projectQuotaWorkflowId(input.projectId),
        // The quota workflow runs where the agent-job workflows run: the workers of one deployment
        // share a task queue, so whichever is up serves it.
        taskQueue: activityInfo().taskQueue,
        args: [{ projectId: input.projectId, limit }],
        signal: quotaRequestSignal,
        signalArgs: [{ ...input, limit, leaseMs: settings.leaseMs }],
        staticSummary: `API budget of project ${input.projectId}: ${formatQuotaLimit(limit)}`,
        priority: taskPriority(input.projectId, QUOTA_PRIORITY_KEY),
      });
      return { state: 'requested', requestId: input.requestId, leaseMs: settings.leaseMs };
    },
  };
}
