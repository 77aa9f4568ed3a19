/**
 * The agent-job workflow's side of a job-end notification: the target named by `notify` is checked
 * before anything else, and at the end the notice is handed to a child workflow (./workflow.ts)
 * that the parent abandons (docs/decisions/0020-job-end-notification-as-a-child-workflow.md).
 * Without `notify` nothing here issues a command: such runs replay exactly as before.
 *
 * Workflow code: deterministic, no Node modules.
 */
import {
  ApplicationFailure,
  CancellationScope,
  ContinueAsNew,
  isCancellation,
  log,
  ParentClosePolicy,
  proxyActivities,
  startChild,
  workflowInfo,
  WorkflowIdReusePolicy,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { AgentJobActivities } from '../../activities/index.js';
import type { JobEndNotice } from '../../notify/notice.js';
import type { AgentJobRun } from '../agent-job/run.js';
import {
  JOB_END_NOTIFICATION_WORKFLOW_TYPE,
  jobEndNotificationId,
  ownFailure,
  type jobEndNotification,
} from './workflow.js';

const { notifyTarget } = proxyActivities<AgentJobActivities>({
  startToCloseTimeout: '30s',
  // An unknown name is final; a lost worker is retried, briefly: the input is wrong or the
  // deployment is, and the caller should hear of it soon either way.
  retry: { maximumAttempts: 5 },
});

/** What the notice reports of the run. */
type NoticeFacts = Pick<
  AgentJobRun,
  'projectId' | 'jobId' | 'lastRecord' | 'polls' | 'turns' | 'created' | 'resent' | 'end'
>;

/** One agent-job workflow's notification: its target, checked once, and the notice at its end. */
export class JobEndNotifier {
  #accepted: boolean;

  /** `target`: the input's `notify`, or null. `continued`: a run before this one checked it. */
  constructor(
    private readonly target: string | null,
    continued: boolean,
  ) {
    this.#accepted = target !== null && continued;
  }

  /** Refuses an unknown target before anything else runs (`UnknownNotifyTarget`, final). */
  async checkTarget(): Promise<void> {
    if (this.target === null || this.#accepted) return;
    await notifyTarget(this.target).catch(ownFailure);
    this.#accepted = true;
  }

  /**
   * The workflow fails with `err`, or is cancelled (the child starts in a scope a cancellation does
   * not reach): the notice, handed to the child. Continue-as-new is not an end.
   */
  async failed(run: NoticeFacts, err: unknown): Promise<void> {
    if (err instanceof ContinueAsNew) return;
    if (isCancellation(err)) {
      await this.notify(run, { type: 'Cancelled', message: 'The workflow was cancelled.' });
    } else if (err instanceof ApplicationFailure) {
      await this.notify(run, { type: err.type ?? 'ApplicationFailure', message: err.message });
    }
  }

  /** The workflow ends (returns, when `failure` is null): the notice of `run`, handed to the child. */
  async notify(run: NoticeFacts, failure: JobEndNotice['failure'] = null): Promise<void> {
    if (this.target === null || !this.#accepted || run.end === null) return;
    const info = workflowInfo();
    const notice: JobEndNotice = {
      type: 'agent-job.ended',
      deliveryId: info.firstExecutionRunId,
      workflowId: info.workflowId,
      projectId: run.projectId,
      outcome: run.end,
      jobId: run.jobId,
      prLink: run.lastRecord?.prLink ?? null,
      job: run.lastRecord,
      failure,
      polls: run.polls,
      turns: run.turns,
      created: run.created,
      resent: run.resent,
      endedAt: new Date(Date.now()).toISOString(),
    };
    try {
      await CancellationScope.nonCancellable(() =>
        startChild<typeof jobEndNotification>(JOB_END_NOTIFICATION_WORKFLOW_TYPE, {
          workflowId: jobEndNotificationId(info.firstExecutionRunId),
          args: [{ target: this.target as string, notice }],
          parentClosePolicy: ParentClosePolicy.ABANDON,
          workflowIdReusePolicy: WorkflowIdReusePolicy.REJECT_DUPLICATE,
          staticSummary: `Job-end notice to target ${this.target}`,
        }),
      );
    } catch (err) {
      // A reset run that ends again: the notice of this chain is on its way already, under the same delivery ID.
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
      log.info('the job-end notice was started before; not started again', { target: this.target });
    }
  }
}
