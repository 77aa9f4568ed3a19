/**
 * The create activity: makes the agent job, at most once per attempt that may reach the API, and
 * records a job that was made even when the workflow is being cancelled.
 */
import { cancellationSignal, heartbeat, log } from '@temporalio/activity';
import { AgentApiError, type AgentApiClient } from '../agent-api/index.js';
import type { AgentJobRecord } from '../contract.js';
import type { ActivityMetrics, ProjectUseMetrics } from './metrics.js';
import { workerStopping } from './attempt.js';
import {
  stoppedBeforeSending,
  type KeyAnswers,
  type ResendGate,
  type SendingOperation,
  type ToFailure,
} from './failures.js';
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

/**
 * The one send flow of a create or message: the gate, the quota take, the call, the key noted, and
 * its failure. `applied` reads a 2xx answer that was not a record (null: it was not applied);
 * `heartbeats`: the attempt heartbeats, so the workflow's cancellation reaches it.
 */
export async function sendOnce<Input extends CreateAgentJobInput>(
  deps: SendDeps<Input>,
  operation: SendingOperation,
  input: Input,
  call: () => Promise<AgentJobRecord>,
  applied: (
    answer: AgentApiError,
    cancelled: AbortSignal,
  ) => AgentJobRecord | null | Promise<AgentJobRecord | null>,
  heartbeats: boolean,
): Promise<AgentJobRecord> {
  deps.mayResend(operation, input);
  const cancelled = cancellationSignal();
  if (heartbeats) heartbeat();
  const beat = heartbeats ? setInterval(() => heartbeat(), CREATE_HEARTBEAT_MS) : undefined;
  let quotaTaken = false;
  let sending = false;
  try {
    // Within the heartbeats: the take may wait for the quota workflow longer than their timeout.
    quotaTaken = await deps.takeQuota(input);
    sending = true;
    // Aborted neither by a stopping worker nor by the workflow: once sent, only its answer says
    // whether it was applied. The HTTP timeouts bound it, inside the shutdown grace.
    const record = await call();
    deps.keys.answered(input.projectId);
    return record;
  } catch (err) {
    // Before the cancellation: a job that was made is recorded even by a cancelled workflow.
    const record = err instanceof AgentApiError ? await applied(err, cancelled) : null;
    if (record !== null) return record;
    if (!sending && workerStopping()) throw stoppedBeforeSending(operation);
    // The workflow's own cancellation; a stopping worker's is not one (its attempt is read below).
    if (heartbeats && cancelled.aborted && !workerStopping()) throw cancelled.reason;
    throw deps.toFailure(err, operation, input.projectId, { quotaTaken });
  } finally {
    clearInterval(beat);
  }
}

/** Builds the create activity. */
export function createCreateActivity(
  deps: SendDeps<CreateAgentJobInput> & { api: Pick<AgentApiClient, 'createJob'> },
) {
  return {
    /**
     * Creates the agent job; an attempt after an ambiguous one passes the policy's gate first. A
     * create in flight is not aborted by a cancellation: it may already have made the agent job. It
     * heartbeats so the cancellation reaches it, lets the request finish, and returns the record
     * when the job was made, so the workflow records its ID before it ends as cancelled.
     */
    createAgentJob: async (input: CreateAgentJobInput): Promise<AgentJobRecord> => {
      const record = await sendOnce(
        deps,
        'createJob',
        input,
        () => deps.api.createJob(input.projectId, input.prompt, { idempotencyKey: input.idempotencyKey }),
        (answer) => createdDespiteAnswer(answer, deps.metrics),
        true,
      );
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
