/**
 * The create activity: makes the agent job, at most once per attempt that may reach the API, and
 * records a job that was made even when the workflow is being cancelled.
 */
import { cancellationSignal, heartbeat, log } from '@temporalio/activity';
import { AgentApiError, type AgentApiClient } from '../agent-api/index.js';
import type { AgentJobRecord } from '../contract.js';
import type { ActivityMetrics, ProjectUseMetrics } from './metrics.js';
import { workerStopping } from './attempt.js';
import { stoppedBeforeSending, type KeyAnswers, type ResendGate, type ToFailure } from './failures.js';
import type { QuotaTakeInput } from './project-quota.js';

/** Input of the create activity. The key is derived from the workflow ID by the workflow. */
export interface CreateAgentJobInput {
  projectId: string;
  prompt: string;
  idempotencyKey: string;
  /**
   * Set by the workflow when an earlier attempt of this call may have reached the API (it timed
   * out, its worker died, its answer was lost): why. The ambiguous-call policy then decides whether
   * this attempt may send at all. Absent or null: no earlier attempt could have been applied.
   */
  uncertain?: string | null;
  /**
   * Set by the workflow when the project quota is to be asked: the call takes its use just before
   * it sends, under this request ID (./project-quota.ts). Absent or null: it takes nothing.
   */
  quotaRequestId?: string | null;
  /** The 429 that refused the use of this call's previous take, for the quota to hear. */
  quotaRefused?: QuotaTakeInput['quotaRefused'];
}

/** What an activity that sends needs, the create or the follow-up message (./message.ts). */
export interface SendDeps<Input> {
  /** The ambiguous-call policy's gate (./failures.ts). */
  mayResend: ResendGate;
  /** Takes the send's use of the project quota when the workflow asked it to: true when it did. */
  takeQuota: (input: Input) => Promise<boolean>;
  toFailure: ToFailure;
  keys: Pick<KeyAnswers, 'answered'>;
  metrics: Pick<ActivityMetrics, 'created' | 'unreadableAnswer'>;
  projectMetrics?: Pick<ProjectUseMetrics, 'used'>;
}

/** How often a create in flight reports to the server, so a cancellation reaches it. */
const CREATE_HEARTBEAT_MS = 1_000;

/** Builds the create activity. */
export function createCreateActivity(
  deps: SendDeps<CreateAgentJobInput> & { api: Pick<AgentApiClient, 'createJob'> },
) {
  /**
   * A create in flight is not aborted by a cancellation: it may already have made the agent job. The
   * activity heartbeats so the cancellation reaches it, lets the request finish, and returns the
   * record when the job was made, so the workflow records its ID before it ends as cancelled.
   */
  async function createUnlessCancelled(input: CreateAgentJobInput): Promise<AgentJobRecord> {
    deps.mayResend('createJob', input);
    const cancelled = cancellationSignal();
    heartbeat();
    const beat = setInterval(() => heartbeat(), CREATE_HEARTBEAT_MS);
    let quotaTaken = false;
    let sending = false;
    try {
      // Within the heartbeats: the take may wait for the quota workflow longer than their timeout.
      quotaTaken = await deps.takeQuota(input);
      sending = true;
      // Nor by a stopping worker: the HTTP timeouts bound it, inside the shutdown grace.
      const record = await deps.api.createJob(input.projectId, input.prompt, {
        idempotencyKey: input.idempotencyKey,
      });
      deps.keys.answered(input.projectId);
      return record;
    } catch (err) {
      // Before the cancellation: a job that was made is recorded even by a cancelled workflow.
      const created = err instanceof AgentApiError ? createdDespiteAnswer(err, deps.metrics) : null;
      if (created !== null) return created;
      if (!sending && workerStopping()) throw stoppedBeforeSending('createJob');
      // The workflow's own cancellation; a stopping worker's is not one (its attempt is read below).
      if (cancelled.aborted && !workerStopping()) throw cancelled.reason;
      throw deps.toFailure(err, 'createJob', input.projectId, { quotaTaken });
    } finally {
      clearInterval(beat);
    }
  }

  return {
    /** Creates the agent job; an attempt after an ambiguous one passes the policy's gate first. */
    createAgentJob: async (input: CreateAgentJobInput): Promise<AgentJobRecord> => {
      const record = await createUnlessCancelled(input);
      deps.metrics.created();
      deps.projectMetrics?.used(input.projectId, 'create');
      log.info('agent job created', { projectId: input.projectId, jobId: record.id, status: record.status });
      return record;
    },
  };
}

/**
 * A create answered 2xx whose body was not a record but named the job: the workflow goes on with
 * its ID and the status the API documents for a new job, until the first poll.
 */
function createdDespiteAnswer(
  err: AgentApiError,
  metrics: Pick<ActivityMetrics, 'unreadableAnswer'>,
): AgentJobRecord | null {
  if (!err.verdict.appliedWithoutRecord || err.jobId === null) return null;
  metrics.unreadableAnswer('createJob');
  log.warn('agent job created, but the answer was not a record; going on with the job ID it names', {
    jobId: err.jobId,
    status: err.status,
    problem: err.message,
  });
  return { id: err.jobId, status: 'active', prLink: null };
}
