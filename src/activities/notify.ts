/**
 * The notification activities: whether a target name is one this worker knows, and one delivery of
 * a job-end notice, retried by the server as the failure policy's delivery column says, up to its
 * schedule-to-close timeout. The target's URL and secret are read here at each attempt (a rotated
 * Secret applies to the next one), and never leave: not in a failure, a log line or a metric.
 */
import { activityInfo, cancellationSignal, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Dispatcher } from 'undici';
import { FailureType } from '../contract.js';
import { quoted } from '../escape.js';
import { nextDeliveryDelayMs, type Backoff } from '../failure-policy/backoff.js';
import type { JobEndNotice } from '../notify/notice.js';
import { sendNotice } from '../notify/sender.js';
import type { NotifyTargetSource } from '../notify/targets.js';
import type { ActivityMetrics } from './metrics.js';

/** The notification settings the worker wires (AGENT_NOTIFY_TARGETS[_FILE], AGENT_NOTIFY_RETRY_FOR). */
export interface NotifyDeps {
  targets: NotifyTargetSource;
  /** How long a notice is tried: its delivery's schedule-to-close timeout. */
  retryForMs: number;
  /** The wait between attempts; the delivery policy's by default (tests shorten it). */
  backoff?: Backoff;
  /** A test's HTTP dispatcher; the worker's shared one by default. */
  dispatcher?: Dispatcher;
}

/** What the agent-job workflow and the notification learn of a known target: the delivery's bound. */
export interface NotifyTargetInfo {
  retryForMs: number;
}

/** Input of `deliverJobEndNotice`: the target's name (never its URL) and the notice. */
export interface DeliverJobEndNoticeInput {
  target: string;
  notice: JobEndNotice;
}

/** Builds the notification activities; `deps` absent: no targets, every name is unknown. */
export function createNotifyActivities(
  deps: NotifyDeps | undefined,
  metrics: Pick<ActivityMetrics, 'notification'>,
) {
  /** `UnknownNotifyTarget` for `name`; `before` says what it stopped (nothing created, or the delivery). */
  function unknownTarget(name: string, before: 'check' | 'delivery'): ApplicationFailure {
    metrics.notification(null, 'unknown-target');
    const configured =
      deps === undefined ? 'this worker has no notification targets' : 'this worker knows no such target';
    return ApplicationFailure.create({
      type: FailureType.UnknownNotifyTarget,
      message:
        `Notification target ${quoted(name)} is unknown: ${configured} (AGENT_NOTIFY_TARGETS_FILE, docs/notifications.md). ` +
        (before === 'check'
          ? 'No agent job was created.'
          : 'The target was removed after the job started; the notice is not sent.'),
      nonRetryable: true,
      details: [{ target: name }],
    });
  }

  return {
    /**
     * The bound of deliveries to `name`; `UnknownNotifyTarget` (final) when the worker knows no
     * such target. `asker`: the agent-job workflow before anything is created (`check`), or the
     * notification before it delivers (`delivery`), for the message.
     */
    notifyTarget: (name: string, asker: 'check' | 'delivery' = 'check'): Promise<NotifyTargetInfo> => {
      if (deps === undefined || !deps.targets.current().has(name))
        return Promise.reject(unknownTarget(name, asker));
      return Promise.resolve({ retryForMs: deps.retryForMs });
    },

    /**
     * One attempt to deliver the notice; a failure is `NoticeUndelivered`, retryable with the
     * policy's wait as `nextRetryDelay` or final as the policy says.
     */
    deliverJobEndNotice: async ({
      target: name,
      notice,
    }: DeliverJobEndNoticeInput): Promise<{ status: number }> => {
      const target = deps?.targets.current().get(name);
      if (deps === undefined || target === undefined) throw unknownTarget(name, 'delivery');
      const { attempt } = activityInfo();
      const sent = await sendNotice(target, notice, {
        nowMs: Date.now(),
        signal: cancellationSignal(),
        dispatcher: deps.dispatcher,
      });
      const facts = { target: name, deliveryId: notice.deliveryId, attempt };
      if (sent.delivered) {
        metrics.notification(name, 'delivered');
        log.info('job-end notice delivered', { ...facts, status: sent.status });
        return { status: sent.status };
      }
      const delayMs = nextDeliveryDelayMs({
        kind: sent.kind,
        attempt,
        retryAfterMs: sent.retryAfterMs,
        backoff: deps.backoff,
        random: Math.random,
      });
      metrics.notification(name, delayMs === null ? 'refused' : 'retrying');
      log.warn('job-end notice not delivered', { ...facts, problem: sent.what, retryInMs: delayMs });
      throw ApplicationFailure.create({
        type: FailureType.NoticeUndelivered,
        message:
          delayMs === null
            ? `Notification target ${quoted(name)} refused the notice: ${sent.what}. It is not sent again.`
            : `Notification target ${quoted(name)} did not take the notice: ${sent.what} (attempt ${attempt}); trying again.`,
        nonRetryable: delayMs === null,
        nextRetryDelay: delayMs ?? undefined,
        details: [{ target: name, status: sent.status, kind: sent.kind, attempt }],
      });
    },
  };
}
