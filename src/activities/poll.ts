/**
 * The read activities: `getAgentJob` reads the agent job once, and `pollAgentJob` polls it by
 * server-side retry until it is no longer `active` or the deadline is near (../poll-schedule.ts).
 */
import { activityInfo, cancellationSignal } from '@temporalio/activity';
import { ApplicationFailure, ApplicationFailureCategory } from '@temporalio/common';
import type { AgentApiClient } from '../agent-api/index.js';
import type { AgentJobRecord } from '../contract.js';
import { quoted } from '../escape.js';
import type { ActivityMetrics } from './metrics.js';
import {
  afterRecord,
  afterTransientError,
  POLL_PAST_DEADLINE,
  STILL_ACTIVE,
  type PollScheduleInput,
} from '../poll-schedule.js';
import { remainingMs } from './attempt.js';
import type { KeyAnswers, ToFailure } from './failures.js';

/** Input of the get activity. */
export interface GetAgentJobInput {
  projectId: string;
  jobId: string;
}

/** Input of the poll activity: the job, the schedule its attempts follow, and the deadline they keep to. */
export interface PollAgentJobInput extends GetAgentJobInput {
  schedule: PollScheduleInput;
  /**
   * The workflow's deadline, epoch ms, which no attempt, GET or retry passes. Absent from earlier
   * builds' polls, which had it as their schedule-to-close timeout.
   */
  deadlineMs?: number;
}

/** What a poll activity returns: a record that is not `active` (or the deadline is near), and its attempts. */
export interface PolledRecord {
  record: AgentJobRecord;
  /** Attempts this activity made: each one GET. */
  polls: number;
}

/** What the read activities need. */
export interface PollDeps {
  api: Pick<AgentApiClient, 'getJob'>;
  toFailure: ToFailure;
  keys: Pick<KeyAnswers, 'answered'>;
  metrics: Pick<ActivityMetrics, 'polled'>;
}

/** Longest GET of a poll attempt, inside the poll activity's 30 s start-to-close timeout. */
const POLL_REQUEST_MS = 20_000;

/** Builds the get and poll activities. */
export function createPollActivities({ api, toFailure, keys, metrics }: PollDeps) {
  /** One GET of the job; its failure leaves as `toFailure` makes it, with `failure`'s options. */
  async function read(
    input: GetAgentJobInput,
    timeoutMs?: number,
    failure?: Parameters<ToFailure>[3],
  ): Promise<AgentJobRecord> {
    let record: AgentJobRecord;
    try {
      record = await api.getJob(input.projectId, input.jobId, { signal: cancellationSignal(), timeoutMs });
    } catch (err) {
      throw toFailure(err, 'getJob', input.projectId, failure);
    }
    keys.answered(input.projectId);
    metrics.polled(record);
    return record;
  }

  return {
    /** Reads the agent job once: one poll. */
    getAgentJob: (input: GetAgentJobInput): Promise<AgentJobRecord> => read(input),

    /**
     * Polls the agent job by server-side retry (decision 0010): one GET per attempt, failing
     * with a benign {@link STILL_ACTIVE} while the job is `active`. Returns any other record, or the
     * active one when the next poll would come after the deadline.
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
      // A GET that hangs is a transient RequestTimeout, retried at the schedule's pace; so is any
      // transient error the workflow need not see, waiting on the server.
      const record = await read(input, Math.min(POLL_REQUEST_MS, leftMs()), {
        retry: (retryAfterMs) => afterTransientError(retryAfterMs, input.schedule, info.attempt, Math.random),
        deadlineMs: input.deadlineMs,
      });
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
  };
}

/**
 * Builds an error without capturing a stack: "still active" is an answer made at every poll, and
 * its stack, formatted by the SDK and stored by the server at each attempt, said nothing.
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
