/**
 * The follow-up message activity: sends a prompt that starts a new turn of the agent job, and reads
 * the job when the API applied the message without answering with a record.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { activityInfo, cancellationSignal, log } from '@temporalio/activity';
import { withTimeout } from '../agent-api/abort.js';
import { AgentApiError, type AgentApiClient } from '../agent-api/index.js';
import { FailureType, type AgentJobRecord } from '../contract.js';
import { timeLeftMs, workerStopping } from './attempt.js';
import type { CreateAgentJobInput, SendDeps } from './create.js';
import { apiFailure, stoppedBeforeSending } from './failures.js';

/** Input of the follow-up message activity: a create's, to the job `jobId`. */
export interface SendAgentJobMessageInput extends CreateAgentJobInput {
  jobId: string;
}

/**
 * Reads of the job after a follow-up message whose 2xx answer was not a record (a retry would send
 * the message again): three, 1 s and 2 s apart, ride out a blip.
 */
const READS_AFTER_ANSWER = 3;

/**
 * The time those reads may take, at most: with the message call itself (the HTTP client gives up
 * within about 55 s) it stays inside the message activity's 75 s start-to-close timeout, so that
 * timeout never retries a message that was applied.
 */
const READS_AFTER_ANSWER_BUDGET_MS = 15_000;

/** Builds the follow-up message activity. */
export function createMessageActivity(
  deps: SendDeps<SendAgentJobMessageInput> & { api: Pick<AgentApiClient, 'sendMessage' | 'getJob'> },
) {
  /**
   * The job read instead of a record the 2xx answer lacked (the turn started); it may still be the
   * previous turn's, which the workflow handles. When no read works, a final `UnreadableAnswer`.
   */
  async function readAfterAnswer(
    input: SendAgentJobMessageInput,
    answer: AgentApiError,
    cancelled: AbortSignal,
  ): Promise<AgentJobRecord> {
    deps.metrics.unreadableAnswer('sendMessage');
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
        // An abort ends the wait early; the loop reads the signal.
        if (read < READS_AFTER_ANSWER)
          await sleep(1_000 * read, undefined, { signal }).catch(() => undefined);
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

  return {
    /** Sends a follow-up prompt, which starts a new turn of the agent job. */
    sendAgentJobMessage: async (input: SendAgentJobMessageInput): Promise<AgentJobRecord> => {
      deps.mayResend('sendMessage', input);
      let quotaTaken: boolean;
      try {
        quotaTaken = await deps.takeQuota(input);
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
        deps.keys.answered(input.projectId);
      } catch (err) {
        if (!(err instanceof AgentApiError && err.verdict.appliedWithoutRecord))
          throw deps.toFailure(err, 'sendMessage', input.projectId, { quotaTaken });
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
