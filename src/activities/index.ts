/**
 * The activities: the only place where the workflow touches the Agent Job API. A factory receives
 * the API client and the policies, so the worker, the tests and the benchmark wire their own.
 *
 * Every API error leaves here as an `ApplicationFailure` whose `type` is a {@link FailureType}
 * name; whether Temporal retries it is decided here, from the client's classification and the
 * attempt number, so the workflow's retry policies need no list of error types.
 */
import { activityInfo, cancellationSignal, log, metricMeter } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { AgentApiError, type ApiOperation } from '../agent-api/index.js';
import type { AgentApiClient } from '../agent-api/index.js';
import { FailureType, isTerminalStatus, type AgentJobRecord } from '../contract.js';
import type { ProjectQuotaSettings } from '../quota/settings.js';
import { createProjectQuotaActivities } from './project-quota.js';

/** What to do with a create whose outcome is unknown (timeout or reset after sending, 500/502/504). */
export type AmbiguousCreatePolicy = 'retry' | 'fail';

/** What the activities need. */
export interface ActivityDeps {
  api: Pick<AgentApiClient, 'createJob' | 'getJob' | 'sendMessage'>;
  /**
   * `retry` (default): retry with the same Idempotency-Key; a server that ignores the key may then
   * create a second agent job, so each such retry is logged and counted. `fail`: fail at once with
   * `CreateOutcomeUnknown` and let a person look.
   */
  ambiguousCreatePolicy?: AmbiguousCreatePolicy;
  /** Attempts allowed for 404 on get: a just-created agent job may not be readable at once. */
  jobNotFoundAttempts?: number;
  /** Attempts allowed for a body that is not a record (a proxy's error page). */
  unexpectedResponseAttempts?: number;
  /** The per-project API quota (AGENT_API_PROJECT_QUOTA); absent or null: off. */
  projectQuota?: ProjectQuotaSettings | null;
}

/** Input of the create activity. The key is derived from the workflow ID by the workflow. */
export interface CreateAgentJobInput {
  projectId: string;
  prompt: string;
  idempotencyKey: string;
}

/** Input of the get activity. */
export interface GetAgentJobInput {
  projectId: string;
  jobId: string;
}

/** Input of the follow-up message activity. */
export interface SendAgentJobMessageInput {
  projectId: string;
  jobId: string;
  prompt: string;
  idempotencyKey: string;
}

/** Default bound on 404 attempts for get; a few seconds of retries cover read-after-create lag. */
export const DEFAULT_JOB_NOT_FOUND_ATTEMPTS = 5;
/** Default bound on attempts that got a body that is not a record. */
export const DEFAULT_UNEXPECTED_RESPONSE_ATTEMPTS = 5;

/** Builds the activities around an API client. */
export function createActivities(deps: ActivityDeps) {
  const policy = deps.ambiguousCreatePolicy ?? 'retry';
  const bounds: Partial<Record<FailureType, number>> = {
    [FailureType.JobNotFound]: deps.jobNotFoundAttempts ?? DEFAULT_JOB_NOT_FOUND_ATTEMPTS,
    [FailureType.UnexpectedResponse]: deps.unexpectedResponseAttempts ?? DEFAULT_UNEXPECTED_RESPONSE_ATTEMPTS,
  };

  async function call<T>(operation: ApiOperation, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    try {
      return await run(cancellationSignal());
    } catch (err) {
      if (!(err instanceof AgentApiError)) throw err;
      throw toFailure(err, operation);
    }
  }

  function toFailure(err: AgentApiError, operation: ApiOperation): ApplicationFailure {
    const attempt = activityInfo().attempt;
    metricMeter.createCounter('agent_job_api_errors', 'errors', 'Agent Job API errors by type').add(1, {
      type: err.type,
      operation,
    });
    if (operation === 'createJob' && err.retryable && err.requestMayHaveTakenEffect) {
      if (policy === 'fail') {
        return ApplicationFailure.create({
          type: FailureType.CreateOutcomeUnknown,
          message:
            `${err.message}. The agent job may or may not have been created; the ambiguous-create policy is "fail", ` +
            'so it was not retried. Look for the job before starting again.',
          nonRetryable: true,
          cause: err,
        });
      }
      metricMeter
        .createCounter('agent_job_ambiguous_creates', 'creates', 'Creates retried with an unknown outcome')
        .add(1);
      log.warn(
        'create outcome unknown; retrying with the same Idempotency-Key (a server that ignores it may create a duplicate agent job)',
        {
          type: err.type,
          status: err.status,
          attempt,
        },
      );
    }
    const bound = bounds[err.type];
    const exhausted = bound !== undefined && attempt >= bound;
    return ApplicationFailure.create({
      type: err.type,
      message: exhausted ? `${err.message} (gave up after ${attempt} attempts)` : err.message,
      nonRetryable: !err.retryable || exhausted,
      nextRetryDelay: err.retryAfterMs ?? undefined,
      // nextRetryDelay does not reach the workflow; the project quota reads Retry-After from here.
      details: err.retryAfterMs === null ? undefined : [{ retryAfterMs: err.retryAfterMs }],
      cause: err,
    });
  }

  return {
    /** Creates the agent job. Retries carry the same Idempotency-Key. */
    createAgentJob: async (input: CreateAgentJobInput): Promise<AgentJobRecord> => {
      const record = await call('createJob', (signal) =>
        deps.api.createJob(input.projectId, input.prompt, { idempotencyKey: input.idempotencyKey, signal }),
      );
      metricMeter.createCounter('agent_jobs_created', 'jobs', 'Agent jobs created').add(1);
      log.info('agent job created', { projectId: input.projectId, jobId: record.id, status: record.status });
      return record;
    },

    /** Reads the agent job once: one poll. */
    getAgentJob: async (input: GetAgentJobInput): Promise<AgentJobRecord> => {
      const record = await call('getJob', (signal) =>
        deps.api.getJob(input.projectId, input.jobId, { signal }),
      );
      metricMeter.createCounter('agent_job_polls', 'polls', 'Get-job polls that returned a record').add(1, {
        terminal: String(isTerminalStatus(record.status)),
      });
      return record;
    },

    /** Sends a follow-up prompt, which starts a new turn of the agent job. */
    sendAgentJobMessage: async (input: SendAgentJobMessageInput): Promise<AgentJobRecord> => {
      const record = await call('sendMessage', (signal) =>
        deps.api.sendMessage(input.projectId, input.jobId, input.prompt, {
          idempotencyKey: input.idempotencyKey,
          signal,
        }),
      );
      log.info('follow-up message sent', {
        projectId: input.projectId,
        jobId: input.jobId,
        status: record.status,
      });
      return record;
    },

    ...createProjectQuotaActivities(deps.projectQuota),
  };
}

/** The activities' type, for `proxyActivities` in workflow code. */
export type AgentJobActivities = ReturnType<typeof createActivities>;
