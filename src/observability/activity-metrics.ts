/**
 * The metrics the activities emit, through the activity context's meter (`metricMeter` of
 * @temporalio/activity), which the SDK tags with the namespace, task queue and activity type, and
 * serves with its own at METRICS_ADDRESS: agent jobs created, polls, API errors, sends after an
 * attempt whose outcome is unknown, and 2xx answers that were not a record. The per-project ones
 * are in ./project-metrics.ts. The worker passes them to the activities (`ActivityMetrics` in
 * src/activities/metrics.ts); they work inside an activity only.
 */
import { activityInfo, metricMeter } from '@temporalio/activity';
import type { MetricCounter } from '@temporalio/common';
import type { AgentApiError, ApiOperation } from '../agent-api/index.js';
import type { ActivityMetrics, NotificationOutcome } from '../activities/metrics.js';
import { isTerminalStatus, type AgentJobRecord } from '../contract.js';

/** An agent job created (`agent_jobs_created`). */
function countCreated(): void {
  metricMeter.createCounter('agent_jobs_created', 'jobs', 'Agent jobs created').add(1);
}

/** An API error, by its failure type and the call that met it (`agent_job_api_errors`). */
function countApiError(type: AgentApiError['type'], operation: ApiOperation): void {
  metricMeter.createCounter('agent_job_api_errors', 'errors', 'Agent Job API errors by type').add(1, {
    type,
    operation,
  });
}

/** A create or message sent again after an attempt of unknown outcome (`agent_job_ambiguous_creates`). */
function countAmbiguous(operation: ApiOperation): void {
  metricMeter
    .createCounter(
      'agent_job_ambiguous_creates',
      'calls',
      'Creates and messages sent again after an attempt whose outcome is unknown',
    )
    .add(1, { operation });
}

/** A create or message answered 2xx with a body that is not a record (`agent_job_unreadable_answers`). */
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
 * A job-end notice's attempt by target name and outcome (`agent_job_notifications`): the name
 * only, never the URL; a name no target has is `_unknown`, as callers choose those.
 */
function countNotification(target: string | null, outcome: NotificationOutcome): void {
  metricMeter
    .createCounter('agent_job_notifications', 'attempts', 'Job-end notice attempts by target and outcome')
    .add(1, { target: target ?? '_unknown', outcome });
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

/** The activities' metrics, for `createActivities({ metrics })`: one poll counter per worker. */
export function createActivityMetrics(): ActivityMetrics {
  return {
    created: countCreated,
    polled: pollCounter(),
    apiError: countApiError,
    ambiguous: countAmbiguous,
    unreadableAnswer: countUnreadableAnswer,
    notification: countNotification,
  };
}
