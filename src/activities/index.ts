/**
 * The activities: the only place where the workflow touches the Agent Job API. A factory receives
 * the API client and the policies, so the worker, the tests and the benchmark wire their own.
 *
 * Every API error leaves here as an `ApplicationFailure` whose `type` is a {@link FailureType}
 * name and whose details are an {@link ApiErrorDetails}, as the failure policy
 * (src/agent-api/failure-policy.ts) says: short waits are left to Temporal's retries
 * (`nextRetryDelay`); everything the workflow must count or wait for itself is handed back to it
 * (non-retryable for Temporal, `final: false` and the policy's `bound` in the details).
 */
import {
  activityInfo,
  cancellationDetails,
  cancellationSignal,
  heartbeat,
  log,
  metricMeter,
} from '@temporalio/activity';
import {
  ApplicationFailure,
  ApplicationFailureCategory,
  type MetricCounter,
  type RetryPolicy,
} from '@temporalio/common';
import { AgentApiError, type ApiOperation } from '../agent-api/index.js';
import type { AgentApiClient } from '../agent-api/index.js';
import { FailureType, isTerminalStatus, type AgentJobRecord, type ApiErrorDetails } from '../contract.js';
import { withTimeout } from '../agent-api/abort.js';
import { durationMs } from '../duration.js';
import { quoted } from '../escape.js';
import {
  GET_BACKOFF,
  handedBack,
  isFinal,
  outcomeUnknownType,
  retryDelayMs,
  type Backoff,
} from '../agent-api/failure-policy.js';
import {
  afterRecord,
  afterTransientError,
  POLL_PAST_DEADLINE,
  STILL_ACTIVE,
  type ErrorVerdict,
  type PollScheduleInput,
} from '../poll-schedule.js';
import type { ProjectQuotaSettings } from '../quota/settings.js';
import type { ProjectMetrics } from '../observability/project-metrics.js';
import { takeProjectQuotaUse, type QuotaTakeInput } from './project-quota.js';

/**
 * What to do with a create or follow-up message whose outcome is unknown (timeout or reset after
 * sending, 500/502/504): either may have started an agent job or a turn.
 */
export type AmbiguousCreatePolicy = 'retry' | 'fail';

/** What the activities need. */
export interface ActivityDeps {
  api: Pick<AgentApiClient, 'createJob' | 'getJob' | 'sendMessage'>;
  /**
   * What an attempt after one that may have reached the API does (see `mayResend` below).
   * `retry` (default): send again with the same Idempotency-Key; the live API ignores the key, so a
   * second agent job (or turn) may follow: each such send is logged, counted and shown.
   * `fail`: send nothing; fail with `CreateOutcomeUnknown` (or `MessageOutcomeUnknown`) and let a person look.
   */
  ambiguousCreatePolicy?: AmbiguousCreatePolicy;
  /** The per-project API quota (AGENT_API_PROJECT_QUOTA); absent or null: off. */
  projectQuota?: ProjectQuotaSettings | null;
  /** Per-project metrics (uses accepted, 429s); absent: not counted. */
  projectMetrics?: Pick<ProjectMetrics, 'used' | 'rateLimited' | 'quotaWaited'>;
}

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

/** Input of the get activity. */
export interface GetAgentJobInput {
  projectId: string;
  jobId: string;
}

/** Input of the poll activity: the job, the schedule its attempts follow, and the deadline they keep to. */
export interface PollAgentJobInput extends GetAgentJobInput {
  schedule: PollScheduleInput;
  /**
   * The workflow's deadline, epoch ms: no attempt starts after it, no GET runs past it, no retry
   * is set for it or later. Absent from poll activities that earlier builds scheduled with the
   * deadline as their schedule-to-close timeout instead.
   */
  deadlineMs?: number;
}

/** What a poll activity returns: a record that is not `active` (or the deadline is near), and its attempts. */
export interface PolledRecord {
  record: AgentJobRecord;
  /** Attempts this activity made: each one GET. */
  polls: number;
}

/** Input of the follow-up message activity. */
export interface SendAgentJobMessageInput {
  projectId: string;
  jobId: string;
  prompt: string;
  idempotencyKey: string;
  /** As {@link CreateAgentJobInput.uncertain}: an earlier attempt may have started a turn. */
  uncertain?: string | null;
  /** As {@link CreateAgentJobInput.quotaRequestId}. */
  quotaRequestId?: string | null;
  /** As {@link CreateAgentJobInput.quotaRefused}. */
  quotaRefused?: QuotaTakeInput['quotaRefused'];
}

/** Longest GET of a poll attempt, inside the poll activity's 30 s start-to-close timeout. */
const POLL_REQUEST_MS = 20_000;

/** How often a create in flight reports to the server, so a cancellation reaches it. */
const CREATE_HEARTBEAT_MS = 1_000;

/**
 * Reads of the job after a follow-up message whose 2xx answer was not a record: the message took
 * effect, so the activity must end without being retried (a retry sends the message again). A read
 * right after works almost always; three, 1 s and 2 s apart, ride out a blip.
 */
const READS_AFTER_ANSWER = 3;

/**
 * The time those reads may take, at most: with the message call itself (the HTTP client gives up
 * within about 55 s) it stays inside the message activity's 75 s start-to-close timeout, so that
 * timeout never retries a message that was applied.
 */
const READS_AFTER_ANSWER_BUDGET_MS = 15_000;

/** Builds the activities around an API client. */
export function createActivities(deps: ActivityDeps) {
  const policy = deps.ambiguousCreatePolicy ?? 'retry';
  const countPoll = pollCounter();
  const keys = new KeyAnswers();

  async function call<T>(
    operation: ApiOperation,
    projectId: string,
    run: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    try {
      const value = await run(cancellationSignal());
      keys.answered(projectId);
      return value;
    } catch (err) {
      if (!(err instanceof AgentApiError)) throw err;
      throw toFailure(err, operation, projectId);
    }
  }

  /**
   * The project quota: a create or message takes its use now. True when it did (a 429 then goes
   * back to the workflow, which tells the quota); false when the quota is off. A busy quota throws,
   * with nothing sent (./project-quota.ts).
   */
  async function takeQuota(kind: 'create' | 'message', input: QuotaTakeInput): Promise<boolean> {
    const taken = await takeProjectQuotaUse(deps.projectQuota, kind, input);
    // A use taken at once waited 0 s for the quota: the wait histogram covers every use, not
    // only the ones that queued (the workflow records those).
    if (taken === 'at-once') deps.projectMetrics?.quotaWaited(input.projectId, 0);
    return taken !== 'off';
  }

  /**
   * A create is not aborted by a cancellation: a POST in flight may already have made the agent
   * job, and aborting it would lose the job's ID. The activity heartbeats so the cancellation
   * reaches it, lets the request finish (the HTTP timeouts bound it), and returns the record when
   * the job was made, so the workflow records its ID before it ends as cancelled.
   */
  async function createUnlessCancelled(input: CreateAgentJobInput): Promise<AgentJobRecord> {
    mayResend('createJob', input);
    const cancelled = cancellationSignal();
    heartbeat();
    const beat = setInterval(() => heartbeat(), CREATE_HEARTBEAT_MS);
    let quotaTaken = false;
    let sending = false;
    try {
      // Within the heartbeats: the take may wait for the quota workflow longer than their timeout.
      quotaTaken = await takeQuota('create', input);
      sending = true;
      // Not aborted by a cancellation or a stopping worker: once sent, only its answer says
      // whether a job was made (the HTTP timeouts bound it, inside the shutdown grace).
      const record = await deps.api.createJob(input.projectId, input.prompt, {
        idempotencyKey: input.idempotencyKey,
      });
      keys.answered(input.projectId);
      return record;
    } catch (err) {
      // Before the cancellation: a job that was made is recorded even by a cancelled workflow.
      const created = err instanceof AgentApiError ? createdDespiteAnswer(err) : null;
      if (created !== null) return created;
      if (!sending && workerStopping()) throw stoppedBeforeSending('createJob');
      // The workflow's own cancellation; a stopping worker's is not one (its attempt is read below).
      if (cancelled.aborted && !workerStopping()) throw cancelled.reason;
      if (!(err instanceof AgentApiError)) throw err;
      throw toFailure(err, 'createJob', input.projectId, { quotaTaken });
    } finally {
      clearInterval(beat);
    }
  }

  /**
   * A create answered 2xx whose body was not a record but named the job: the job exists, and the
   * workflow goes on with its ID. The record kept until the first poll holds what is known: that
   * ID, and the status the API documents for a new job.
   */
  function createdDespiteAnswer(err: AgentApiError): AgentJobRecord | null {
    if (!err.verdict.appliedWithoutRecord || err.jobId === null) return null;
    countUnreadableAnswer('createJob');
    log.warn('agent job created, but the answer was not a record; going on with the job ID it names', {
      jobId: err.jobId,
      status: err.status,
      problem: err.message,
    });
    return { id: err.jobId, status: 'active', prLink: null };
  }

  /**
   * A follow-up message answered 2xx whose body was not a record: the new turn started. The job is
   * read instead, a few times within the activity's time (a retry of the activity would send the
   * message again); the record read may still be the previous turn's, which the workflow handles
   * as it does a message answered with one. When no read works, a final `UnreadableAnswer`.
   */
  async function readAfterAnswer(
    input: SendAgentJobMessageInput,
    answer: AgentApiError,
    cancelled: AbortSignal,
  ): Promise<AgentJobRecord> {
    countUnreadableAnswer('sendMessage');
    const info = activityInfo();
    // 5 s kept for the answer to reach the server before the attempt's timeout.
    const budgetMs = Math.min(READS_AFTER_ANSWER_BUDGET_MS, timeLeftMs(info) - 5_000);
    let last: unknown = null;
    const record = await withTimeout(cancelled, Math.max(0, Math.floor(budgetMs)), async (signal) => {
      for (let read = 1; read <= READS_AFTER_ANSWER && !signal.aborted; read++) {
        try {
          return await deps.api.getJob(input.projectId, input.jobId, { signal });
        } catch (err) {
          if (cancelled.aborted && !workerStopping()) throw cancelled.reason;
          last = err;
        }
        if (read < READS_AFTER_ANSWER) await pause(1_000 * read, signal);
      }
      return null;
    });
    if (record !== null) {
      log.warn('follow-up message applied, but the answer was not a record; read the agent job instead', {
        jobId: input.jobId,
        problem: answer.message,
      });
      return record;
    }
    // A stopping worker ends the reads; the message was applied all the same, so the failure is final.
    if (cancelled.aborted && !workerStopping()) throw cancelled.reason;
    const why = last instanceof Error ? last.message : 'no time was left to read it';
    throw apiFailure(answer, {
      type: FailureType.UnreadableAnswer,
      message: `${answer.message}. Reading the agent job afterwards failed too (${why}): follow the job with { projectId, jobId: ${JSON.stringify(input.jobId)} } rather than sending the message again.`,
      nonRetryable: true,
      details: [{ status: answer.status, retryAfterMs: null, attempt: info.attempt, final: true }],
    });
  }

  /**
   * The one gate every create and message attempt passes before it sends: after an attempt that
   * may have reached the API, `fail` sends nothing, ever (whoever retries: this worker, another, a
   * new run of the workflow, since the workflow carries `uncertain`), and `retry` sends again with
   * a warning and a metric, as the API honours no idempotency key: a second agent job or turn may
   * follow. Temporal itself retries these activities only after attempts that surely did not reach
   * the API; after any other, the workflow does, and it passes what it knows.
   */
  function mayResend(
    operation: 'createJob' | 'sendMessage',
    input: { projectId: string; uncertain?: string | null },
  ): void {
    const why = input.uncertain ?? null;
    if (why === null) return;
    if (policy === 'fail') {
      throw ApplicationFailure.create({
        type: outcomeUnknownType(operation),
        message: `${outcomeUnknownMessage(operation, why)} The ambiguous-call policy is "fail" (AGENT_API_AMBIGUOUS_CREATE), so it is not sent again.`,
        nonRetryable: true,
        details: [{ status: null, retryAfterMs: null, attempt: activityInfo().attempt, final: true }],
      });
    }
    countAmbiguous(operation);
    log.warn(
      `${operation === 'createJob' ? 'create' : 'follow-up message'} sent again after an attempt whose outcome is unknown; the API honours no Idempotency-Key, so a second ${operation === 'createJob' ? 'agent job' : 'turn'} may follow`,
      { projectId: input.projectId, why },
    );
  }

  function countAmbiguous(operation: ApiOperation): void {
    metricMeter
      .createCounter(
        'agent_job_ambiguous_creates',
        'calls',
        'Creates and messages sent again after an attempt whose outcome is unknown',
      )
      .add(1, { operation });
  }

  function countUnreadableAnswer(operation: ApiOperation): void {
    metricMeter
      .createCounter(
        'agent_job_unreadable_answers',
        'calls',
        'Creates and messages answered 2xx with a body that is not a record',
      )
      .add(1, { operation });
  }

  /**
   * The activity's failure for an API error. `quotaTaken`: the call took its use of the project
   * quota itself, so a 429 goes back to the workflow. `retry` decides the wait of a transient one
   * (the poll schedule's, for the poll activity); by default the retry policy's backoff raised to
   * `Retry-After`.
   */
  function toFailure(
    err: AgentApiError,
    operation: ApiOperation,
    projectId: string,
    {
      quotaTaken = false,
      retry,
      deadlineMs,
    }: {
      quotaTaken?: boolean;
      retry?: (retryAfterMs: number | null) => ErrorVerdict;
      /** The deadline when the input carries it (the poll activity's); else the schedule-to-close timeout's. */
      deadlineMs?: number;
    } = {},
  ): ApplicationFailure {
    const info = activityInfo();
    const { verdict } = err;
    const refusedTake = quotaTaken && verdict.refusesQuotaUse;
    if (verdict.refusesQuotaUse) deps.projectMetrics?.rateLimited(projectId, operation);
    // Any answer but a refused key shows the key works for the project (a create may wait on it).
    if (err.status !== null && !verdict.refusesKey) keys.answered(projectId);
    metricMeter.createCounter('agent_job_api_errors', 'errors', 'Agent Job API errors by type').add(1, {
      type: err.type,
      operation,
    });
    const details = (final: boolean): ApiErrorDetails => ({
      status: err.status,
      retryAfterMs: err.retryAfterMs,
      attempt: info.attempt,
      final,
      bound: final ? 'final' : verdict.bound,
      ...(operation === 'getJob' ? {} : { mayHaveBeenApplied: err.requestMayHaveTakenEffect }),
      ...(refusedTake && { quotaTaken: true }),
      ...(verdict.refusesKey && { keyAnsweredAgoMs: keys.agoMs(projectId) }),
    });
    if (operation !== 'getJob' && err.retryable && err.requestMayHaveTakenEffect && policy === 'fail') {
      return apiFailure(err, {
        type: outcomeUnknownType(operation),
        message: `${err.message.replace(/\.$/, '')}. ${outcomeUnknownMessage(operation, 'this attempt')} The ambiguous-call policy is "fail" (AGENT_API_AMBIGUOUS_CREATE), so it is not sent again.`,
        nonRetryable: true,
        details: [details(true)],
      });
    }
    const final = isFinal(verdict);
    const next: ErrorVerdict | null = final
      ? null
      : (retry?.(err.retryAfterMs) ?? {
          kind: 'retry',
          delayMs: retryDelayMs({
            backoff: backoffOf(info.retryPolicy),
            failures: info.attempt,
            retryAfterMs: err.retryAfterMs,
            random: Math.random,
          }),
        });
    const delayMs = next?.kind === 'retry' ? next.delayMs : null;
    // Hand the failure back to the workflow instead of letting Temporal retry it: when it is final,
    // when a create or message may have been applied (only the workflow may send it again, and it
    // tells the next attempt so), when the workflow counts answers of its type in a row, when the
    // wait would outlast the deadline, or when the API refused a use this call took from the project
    // quota (the quota decides when).
    const handBack =
      refusedTake ||
      delayMs === null ||
      (operation !== 'getJob' && err.requestMayHaveTakenEffect) ||
      handedBack(verdict, operation) ||
      delayMs >= remainingMs(info, deadlineMs);
    return apiFailure(err, {
      type: err.type,
      message: err.message,
      nonRetryable: handBack,
      nextRetryDelay: handBack ? undefined : (delayMs ?? undefined),
      details: [details(final)],
      // A transient error is expected and retried: the SDK logs it at DEBUG, not as a failure.
      category: final ? undefined : ApplicationFailureCategory.BENIGN,
    });
  }

  return {
    /** Creates the agent job; an attempt after an ambiguous one passes the policy's gate first. */
    createAgentJob: async (input: CreateAgentJobInput): Promise<AgentJobRecord> => {
      const record = await createUnlessCancelled(input);
      metricMeter.createCounter('agent_jobs_created', 'jobs', 'Agent jobs created').add(1);
      deps.projectMetrics?.used(input.projectId, 'create');
      log.info('agent job created', { projectId: input.projectId, jobId: record.id, status: record.status });
      return record;
    },

    /** Reads the agent job once: one poll. */
    getAgentJob: async (input: GetAgentJobInput): Promise<AgentJobRecord> => {
      const record = await call('getJob', input.projectId, (signal) =>
        deps.api.getJob(input.projectId, input.jobId, { signal }),
      );
      countPoll(record);
      return record;
    },

    /**
     * Polls the agent job by server-side retry (../poll-schedule.ts): one GET per attempt; while the
     * job is `active` the attempt fails with a benign {@link STILL_ACTIVE} whose `nextRetryDelay`
     * follows the schedule, so the server waits between polls and writes no history. Returns any
     * other record, or the active one when the next poll would come after the deadline.
     */
    pollAgentJob: async (input: PollAgentJobInput): Promise<PolledRecord> => {
      const info = activityInfo();
      const leftMs = () => remainingMs(info, input.deadlineMs);
      if (leftMs() <= 0) {
        throw ApplicationFailure.create({
          type: POLL_PAST_DEADLINE,
          message: `agent job ${input.jobId}: this poll attempt started after the workflow's deadline`,
          nonRetryable: true,
        });
      }
      let record: AgentJobRecord;
      try {
        // Bounded well inside the poll activity's start-to-close timeout (30 s), and by the deadline:
        // a GET that hangs is a transient RequestTimeout, retried at the schedule's pace like any other.
        record = await deps.api.getJob(input.projectId, input.jobId, {
          signal: cancellationSignal(),
          timeoutMs: Math.min(POLL_REQUEST_MS, leftMs()),
        });
      } catch (err) {
        if (!(err instanceof AgentApiError)) throw err;
        // A transient error the workflow need not see waits on the server at the schedule's pace.
        throw toFailure(err, 'getJob', input.projectId, {
          retry: (retryAfterMs) =>
            afterTransientError(retryAfterMs, input.schedule, info.attempt, Math.random),
          deadlineMs: input.deadlineMs,
        });
      }
      countPoll(record);
      keys.answered(input.projectId);
      const verdict = afterRecord(record.status, input.schedule, info.attempt, leftMs(), Math.random);
      if (verdict.kind === 'return') return { record, polls: info.attempt };
      throw withoutStack(() =>
        ApplicationFailure.create({
          type: STILL_ACTIVE,
          // Shown as the pending poll's last failure in the UI and the CLI: the API's text quoted.
          message: `agent job ${quoted(input.jobId)} is ${quoted(record.status)}; polling again in ${Math.round(verdict.delayMs / 1000)}s`,
          nextRetryDelay: verdict.delayMs,
          // Expected: the SDK logs it at DEBUG and does not count it as a failed activity.
          category: ApplicationFailureCategory.BENIGN,
        }),
      );
    },

    /** Sends a follow-up prompt, which starts a new turn of the agent job. */
    sendAgentJobMessage: async (input: SendAgentJobMessageInput): Promise<AgentJobRecord> => {
      mayResend('sendMessage', input);
      let quotaTaken: boolean;
      try {
        quotaTaken = await takeQuota('message', input);
      } catch (err) {
        if (workerStopping()) throw stoppedBeforeSending('sendMessage');
        throw err;
      }
      const cancelled = cancellationSignal();
      let record: AgentJobRecord;
      try {
        // Not aborted by a stopping worker (nor by the workflow, which waits for no cancellation
        // here): once sent, only its answer says whether a turn started. The HTTP timeouts bound it.
        record = await deps.api.sendMessage(input.projectId, input.jobId, input.prompt, {
          idempotencyKey: input.idempotencyKey,
        });
        keys.answered(input.projectId);
      } catch (err) {
        if (!(err instanceof AgentApiError)) throw err;
        if (!err.verdict.appliedWithoutRecord)
          throw toFailure(err, 'sendMessage', input.projectId, { quotaTaken });
        record = await readAfterAnswer(input, err, cancelled);
      }
      deps.projectMetrics?.used(input.projectId, 'message');
      log.info('follow-up message sent', {
        projectId: input.projectId,
        jobId: input.jobId,
        status: record.status,
      });
      return record;
    },
  };
}

/**
 * An `ApplicationFailure` for an API error, with short stacks and the API error as its cause
 * without the network error below it: a failure goes into history (a local activity's marker, an
 * activity's failed event), and its message already says everything the chain would.
 */
function apiFailure(
  err: AgentApiError,
  init: Omit<NonNullable<Parameters<typeof ApplicationFailure.create>[0]>, 'cause'>,
): ApplicationFailure {
  const cause = new AgentApiError({
    kind: err.kind,
    operation: err.operation,
    status: err.status,
    retryAfterMs: err.retryAfterMs,
    applied: err.requestMayHaveTakenEffect,
    message: err.message,
  });
  cause.stack = `${cause.name}: ${cause.message}`;
  const failure = ApplicationFailure.create({ ...init, cause });
  failure.stack = `${failure.name}: ${failure.message}`;
  return failure;
}

/**
 * Whether the worker is stopping: the SDK cancels running activities when its shutdown grace ends.
 * Not the workflow's cancellation: a create or message already sent is let finish.
 */
function workerStopping(): boolean {
  return cancellationDetails()?.workerShutdown === true;
}

/**
 * The failure of a create or message whose worker stopped before it sent anything (while it took
 * its quota use): surely not applied, so the workflow sends it again as a plain retry.
 */
function stoppedBeforeSending(operation: 'createJob' | 'sendMessage'): ApplicationFailure {
  const details: ApiErrorDetails = {
    status: null,
    retryAfterMs: null,
    attempt: activityInfo().attempt,
    final: false,
    bound: 'deadline',
    mayHaveBeenApplied: false,
  };
  return ApplicationFailure.create({
    type: FailureType.WorkerShutdown,
    message: `${operation === 'createJob' ? 'create' : 'follow-up message'} not sent: the worker stopped first`,
    details: [details],
    category: ApplicationFailureCategory.BENIGN,
  });
}

/**
 * When this worker last had an answer other than a refused key from each project: a create whose
 * key is refused waits for a rotation only when the key worked for the project lately (else it is
 * the wrong key, and fails at once). One key source per worker process, so per project is enough.
 */
class KeyAnswers {
  readonly #at = new Map<string, number>();

  /** The API answered for `projectId` with something other than 401/403. */
  answered(projectId: string): void {
    this.#at.set(projectId, Date.now());
  }

  /** Milliseconds since that answer, or null when none came. */
  agoMs(projectId: string): number | null {
    const at = this.#at.get(projectId);
    return at === undefined ? null : Date.now() - at;
  }
}

/** What a person should know about a create or message that may have been applied. */
function outcomeUnknownMessage(operation: 'createJob' | 'sendMessage', why: string): string {
  return operation === 'createJob'
    ? `The agent job may or may not have been created (${why} may have reached the API): look for the job in the project before starting again, and follow it with { projectId, jobId } if it exists.`
    : `The follow-up message may or may not have started a turn (${why} may have reached the API): look at the job before sending it again.`;
}

/** The backoff of the activity's retry policy, or the get backoff when it has none. */
function backoffOf(policy: RetryPolicy | undefined): Backoff {
  if (policy === undefined) return GET_BACKOFF;
  const initialIntervalMs = intervalMs(policy, 'initialInterval') ?? GET_BACKOFF.initialIntervalMs;
  const backoffCoefficient = policy.backoffCoefficient ?? 2;
  return {
    initialIntervalMs,
    backoffCoefficient,
    maximumIntervalMs: intervalMs(policy, 'maximumInterval') ?? initialIntervalMs * 100,
  };
}

/** A retry policy's interval in milliseconds (the SDK checked it when the activity was scheduled). */
function intervalMs(policy: RetryPolicy, key: 'initialInterval' | 'maximumInterval'): number | undefined {
  const value: unknown = policy[key];
  return typeof value === 'string' || typeof value === 'number' ? durationMs(value) : undefined;
}

/**
 * Builds an error without capturing a stack. The poll's "still active" failure is an answer, not a
 * fault, and it is made at every poll: its stack said only where the poll activity is, yet the SDK
 * formatted and trimmed it and the server stored it with the activity at each attempt (about 5%
 * of a poll's worker CPU in bench:profile).
 */
function withoutStack<T>(make: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/** How often the polls counted in the worker are added to the SDK's counter. */
const POLL_COUNT_FLUSH_MS = 1_000;

/**
 * Counts a poll that returned a record in `agent_job_polls` (tagged by whether it was terminal).
 * The counts are added to the SDK's counter once a second, not at every poll: each add is a call
 * into the SDK's core, and polls run a hundred times a second (bench:profile measured 0.2 ms of
 * worker CPU per poll for it, about 7% of a poll's cost). A scrape sees them a second late at most.
 * The counter is made in the first activity of each namespace, task queue and type, so the SDK
 * tags it with those, as it tags any activity's metric.
 */
function pollCounter(): (record: AgentJobRecord) => void {
  const pending = new Map<string, { counter: MetricCounter; active: number; terminal: number }>();
  let flushing: NodeJS.Timeout | undefined;
  const flush = () => {
    flushing = undefined;
    for (const counts of pending.values()) {
      if (counts.active > 0) counts.counter.add(counts.active, { terminal: 'false' });
      if (counts.terminal > 0) counts.counter.add(counts.terminal, { terminal: 'true' });
      counts.active = counts.terminal = 0;
    }
  };
  return (record) => {
    const { namespace, taskQueue, activityType } = activityInfo();
    const key = `${namespace}\n${taskQueue}\n${activityType}`;
    let counts = pending.get(key);
    if (counts === undefined) {
      const counter = metricMeter.createCounter(
        'agent_job_polls',
        'polls',
        'Get-job polls that returned a record',
      );
      counts = { counter, active: 0, terminal: 0 };
      pending.set(key, counts);
    }
    if (isTerminalStatus(record.status)) counts.terminal++;
    else counts.active++;
    // Unref'd: a worker that is done exits without waiting a second for it.
    flushing ??= setTimeout(flush, POLL_COUNT_FLUSH_MS).unref();
  };
}

/** Waits `ms`, or less when `signal` aborts first (the caller looks at the signal). */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** Time left before this attempt's start-to-close timeout or the schedule-to-close one, whichever is first. */
function timeLeftMs(info: ReturnType<typeof activityInfo>): number {
  const attemptLeft = info.startToCloseTimeoutMs
    ? info.currentAttemptScheduledTimestampMs + info.startToCloseTimeoutMs - Date.now()
    : Number.POSITIVE_INFINITY;
  return Math.min(attemptLeft, remainingMs(info));
}

/**
 * Time left before the workflow's deadline: `deadlineMs` when the input carries it (the poll
 * activity's, which has no schedule-to-close timeout), else the activity's schedule-to-close timeout.
 */
function remainingMs(info: ReturnType<typeof activityInfo>, deadlineMs?: number): number {
  if (deadlineMs !== undefined) return deadlineMs - Date.now();
  if (!info.scheduleToCloseTimeoutMs) return Number.POSITIVE_INFINITY;
  return info.scheduledTimestampMs + info.scheduleToCloseTimeoutMs - Date.now();
}

/** The activities' type, for `proxyActivities` in workflow code. */
export type AgentJobActivities = ReturnType<typeof createActivities>;
