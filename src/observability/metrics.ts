/**
 * Every metric the worker writes besides the SDK's own, through the SDK's meter (served at
 * METRICS_ADDRESS). The names are an operator contract (dashboards and alerts read them): a metric
 * is added, never renamed. The per-project ones are fed by ./project-metrics.ts.
 */
import { activityInfo, metricMeter } from '@temporalio/activity';
import type { MetricCounter, MetricMeter, MetricTags } from '@temporalio/common';
import type { ActivityMetrics } from '../activities/metrics.js';
import { isTerminalStatus, type AgentJobRecord } from '../contract.js';

const counter = (unit: string, description: string) => (meter: MetricMeter, name: string) =>
  meter.createCounter(name, unit, description);
const gauge = (unit: string, description: string) => (meter: MetricMeter, name: string) =>
  meter.createGauge(name, 'int', unit, description);
/** In seconds, with its bucket boundaries in seconds. */
const histogram = (buckets: number[], description: string) => {
  const make = (meter: MetricMeter, name: string) => meter.createHistogram(name, 'float', 's', description);
  return Object.assign(make, { buckets });
};

/** A job's length: minutes to hours. */
const JOB_BUCKETS = [10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14_400, 21_600];

/** Every metric, by the name the meter is given. */
export const METRICS = {
  agent_jobs_created: counter('jobs', 'Agent jobs created'),
  agent_job_polls: counter('polls', 'Get-job polls that returned a record'),
  agent_job_api_errors: counter('errors', 'Agent Job API errors by type'),
  agent_job_ambiguous_creates: counter(
    'calls',
    'Creates and messages sent again after an attempt whose outcome is unknown',
  ),
  agent_job_unreadable_answers: counter(
    'calls',
    'Creates and messages answered 2xx with a body that is not a record',
  ),
  agent_job_notifications: counter('attempts', 'Job-end notice attempts by target and outcome'),
  agent_project_jobs_ended: counter('jobs', 'Agent-job workflows ended, by outcome'),
  agent_project_job_seconds: histogram(JOB_BUCKETS, 'From a job workflow start to its end'),
  agent_project_time_to_pr_seconds: histogram(JOB_BUCKETS, 'From a job workflow start to its prLink'),
  agent_project_api_uses: counter('uses', 'Creates and follow-up messages the API accepted'),
  agent_project_rate_limited: counter('answers', 'API answers 429 Too Many Requests'),
  agent_project_quota_budget_uses: gauge('uses', "The quota's budget per window, as learnt"),
  agent_project_quota_used_uses: gauge('uses', 'Uses in the current window, grants out included'),
  agent_project_quota_queued_jobs: gauge('jobs', 'Creates and messages waiting for the budget'),
  agent_project_quota_wait_seconds: histogram(
    [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
    'Wait for a use of the quota: 0 when taken at once, else the time in the queue until a grant',
  ),
  agent_project_workflows_waiting_for_key: gauge(
    'workflows',
    'Workflows waiting for a working Agent Job API key after a 401 or 403 (alert on it)',
  ),
};

/** The name of a metric of {@link METRICS}. */
export type MetricName = keyof typeof METRICS;

/** Metric `name` on `meter`: a counter, gauge or histogram as {@link METRICS} defines it. */
export function instrument<N extends MetricName>(
  meter: MetricMeter,
  name: N,
): ReturnType<(typeof METRICS)[N]> {
  return METRICS[name](meter, name) as ReturnType<(typeof METRICS)[N]>;
}

/**
 * Bucket boundaries of the histograms, for the runtime's Prometheus exporter
 * (`histogramBucketOverrides`): its default boundaries are for milliseconds (0 to 10,000), which
 * would put every job, minutes to hours long, in the last bucket.
 */
export const HISTOGRAM_BUCKETS: Record<string, number[]> = Object.fromEntries(
  Object.entries(METRICS).flatMap(([name, metric]) => ('buckets' in metric ? [[name, metric.buckets]] : [])),
);

/** Adds one to counter `name` on the activity context's meter (tagged by the SDK); inside an activity only. */
function count(name: MetricName, tags?: MetricTags): void {
  (instrument(metricMeter, name) as MetricCounter).add(1, tags);
}

/** How often the polls counted in the worker are added to the SDK's counter. */
const POLL_COUNT_FLUSH_MS = 1_000;

/**
 * Counts a poll that returned a record in `agent_job_polls` (tagged by whether it was terminal),
 * added to the SDK's counter once a second: each add is a call into the SDK's core, and polls run a
 * hundred times a second; a scrape sees them at most a second late. The counter is made in the
 * first activity of each namespace, task queue and type, so the SDK tags it with those.
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
      counts = { counter: instrument(metricMeter, 'agent_job_polls'), active: 0, terminal: 0 };
      pending.set(key, counts);
    }
    if (isTerminalStatus(record.status)) counts.terminal++;
    else counts.active++;
    // Unref'd: a worker that is done exits without waiting a second for it.
    flushing ??= setTimeout(flush, POLL_COUNT_FLUSH_MS).unref();
  };
}

/** The activities' metrics, for `createActivities({ metrics })`. */
export function createActivityMetrics(): ActivityMetrics {
  return {
    created: () => count('agent_jobs_created'),
    polled: pollCounter(),
    apiError: (type, operation) => count('agent_job_api_errors', { type, operation }),
    ambiguous: (operation) => count('agent_job_ambiguous_creates', { operation }),
    unreadableAnswer: (operation) => count('agent_job_unreadable_answers', { operation }),
    // The target's name only, never its URL; a name no target has is `_unknown`, as callers choose those.
    notification: (target, outcome) =>
      count('agent_job_notifications', { target: target ?? '_unknown', outcome }),
  };
}
