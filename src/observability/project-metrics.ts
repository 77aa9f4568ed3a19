/**
 * Prometheus metrics per project, through the SDK's metric meter (served with the SDK's own at
 * METRICS_ADDRESS): outcomes, time to the pull request, API uses against the quota's budget, 429s,
 * the quota queue and its wait. Workflows report through the `projectMetrics` sink
 * (`ProjectMetricsSinks`, src/workflows/sinks.ts), activities call this directly. The `project` label is
 * bounded per process by {@link ProjectLabels}. deploy/grafana/ has the dashboard.
 */
import type { MetricMeter } from '@temporalio/common';
import type { InjectedSinks } from '@temporalio/worker';
import type { QuotaUseKind } from '../quota/messages.js';
import type { ProjectMetricsSinks } from '../workflows/sinks.js';
import { utf8Prefix } from '../ids.js';

/**
 * How long a workflow counts as waiting for a key after its last report: a waiting workflow reports
 * at every refusal, at most the longest backoff (2 minutes) apart, so one silent for 10 minutes has
 * ended (cancelled, terminated) or moved to another worker.
 */
export const KEY_WAIT_STALE_MS = 10 * 60_000;

/** The label of every project past the first {@link ProjectLabels} keeps. */
export const OTHER_PROJECTS = '_other';

/** Longest project label, in UTF-8 bytes: long project IDs are cut (a label is for reading). */
const MAX_LABEL_BYTES = 64;

/**
 * The `project` label of a project ID: the ID itself for the first `maxProjects` projects this
 * process sees, `_other` for the rest, so that a flood of project IDs cannot grow the series without
 * bound. Pure: no Temporal, no clock.
 */
export class ProjectLabels {
  readonly #known = new Map<string, string>();

  constructor(readonly maxProjects: number) {}

  label(projectId: string): string {
    const known = this.#known.get(projectId);
    if (known !== undefined) return known;
    if (this.#known.size >= this.maxProjects) return OTHER_PROJECTS;
    const label = utf8Prefix(projectId, MAX_LABEL_BYTES);
    this.#known.set(projectId, label);
    return label;
  }
}

/** Every metric this module writes, by the name the meter is given (Prometheus adds `_total` to counters). */
export const PROJECT_METRICS = {
  jobsEnded: 'agent_project_jobs_ended',
  jobSeconds: 'agent_project_job_seconds',
  timeToPrSeconds: 'agent_project_time_to_pr_seconds',
  apiUses: 'agent_project_api_uses',
  rateLimited: 'agent_project_rate_limited',
  quotaBudget: 'agent_project_quota_budget_uses',
  quotaUsed: 'agent_project_quota_used_uses',
  quotaQueued: 'agent_project_quota_queued_jobs',
  quotaWaitSeconds: 'agent_project_quota_wait_seconds',
  keyWaiting: 'agent_project_workflows_waiting_for_key',
} as const;

/**
 * Bucket boundaries of the histograms, in seconds, for the runtime's Prometheus exporter
 * (`histogramBucketOverrides`): its default boundaries are for milliseconds (0 to 10,000), which
 * would put every job, minutes to hours long, in the last bucket.
 */
export const PROJECT_HISTOGRAM_BUCKETS: Record<string, number[]> = {
  [PROJECT_METRICS.jobSeconds]: [10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14_400, 21_600],
  [PROJECT_METRICS.timeToPrSeconds]: [10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14_400, 21_600],
  [PROJECT_METRICS.quotaWaitSeconds]: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600],
};

/** The per-project metrics of one worker process. */
export class ProjectMetrics {
  readonly #labels: ProjectLabels;
  readonly #jobsEnded;
  readonly #jobSeconds;
  readonly #timeToPr;
  readonly #apiUses;
  readonly #rateLimited;
  readonly #quotaBudget;
  readonly #quotaUsed;
  readonly #quotaQueued;
  readonly #quotaWait;
  readonly #keyWaiting;
  /** The workflows waiting for a working key, by workflow ID: their project and when they said so. */
  readonly #keyWaits = new Map<string, { projectId: string; sinceMs: number }>();

  constructor(meter: MetricMeter, maxProjects: number) {
    this.#labels = new ProjectLabels(maxProjects);
    const m = PROJECT_METRICS;
    this.#jobsEnded = meter.createCounter(m.jobsEnded, 'jobs', 'Agent-job workflows ended, by outcome');
    this.#jobSeconds = meter.createHistogram(
      m.jobSeconds,
      'float',
      's',
      'From a job workflow start to its end',
    );
    this.#timeToPr = meter.createHistogram(
      m.timeToPrSeconds,
      'float',
      's',
      'From a job workflow start to its prLink',
    );
    this.#apiUses = meter.createCounter(m.apiUses, 'uses', 'Creates and follow-up messages the API accepted');
    this.#rateLimited = meter.createCounter(m.rateLimited, 'answers', 'API answers 429 Too Many Requests');
    this.#quotaBudget = meter.createGauge(
      m.quotaBudget,
      'int',
      'uses',
      "The quota's budget per window, as learnt",
    );
    this.#quotaUsed = meter.createGauge(
      m.quotaUsed,
      'int',
      'uses',
      'Uses in the current window, grants out included',
    );
    this.#quotaQueued = meter.createGauge(
      m.quotaQueued,
      'int',
      'jobs',
      'Creates and messages waiting for the budget',
    );
    this.#quotaWait = meter.createHistogram(
      m.quotaWaitSeconds,
      'float',
      's',
      'Wait for a use of the quota: 0 when taken at once, else the time in the queue until a grant',
    );
    this.#keyWaiting = meter.createGauge(
      m.keyWaiting,
      'int',
      'workflows',
      'Workflows waiting for a working Agent Job API key after a 401 or 403 (alert on it)',
    );
  }

  /**
   * A workflow started or stopped waiting for a working key. Counted per workflow ID, so a
   * workflow's repeated reports count once; one that ends, or moves to another worker, without
   * saying so is dropped after {@link KEY_WAIT_STALE_MS}.
   */
  keyWait(workflowId: string, projectId: string, waiting: boolean, nowMs = Date.now()): void {
    if (waiting) this.#keyWaits.set(workflowId, { projectId, sinceMs: nowMs });
    else this.#keyWaits.delete(workflowId);
    const counts = new Map<string, number>([[projectId, 0]]);
    for (const [id, wait] of this.#keyWaits) {
      if (nowMs - wait.sinceMs > KEY_WAIT_STALE_MS) {
        this.#keyWaits.delete(id);
        counts.set(wait.projectId, counts.get(wait.projectId) ?? 0);
        continue;
      }
      counts.set(wait.projectId, (counts.get(wait.projectId) ?? 0) + 1);
    }
    for (const [project, count] of counts) this.#keyWaiting.set(count, this.#tags(project));
  }

  #tags(projectId: string, extra: Record<string, string> = {}) {
    return { project: this.#labels.label(projectId), ...extra };
  }

  /** A create or message the API accepted. */
  used(projectId: string, kind: QuotaUseKind): void {
    this.#apiUses.add(1, this.#tags(projectId, { kind }));
  }

  /** An answer 429. */
  rateLimited(projectId: string, operation: string): void {
    this.#rateLimited.add(1, this.#tags(projectId, { operation }));
  }

  /** A create or message that waited `seconds` for its use of the quota (0: taken at once). */
  quotaWaited(projectId: string, seconds: number): void {
    this.#quotaWait.record(seconds, this.#tags(projectId));
  }

  /** The sink the workflows report through; register it on every worker that runs them. */
  sinks(): InjectedSinks<ProjectMetricsSinks> {
    return {
      projectMetrics: {
        jobEnded: {
          fn: (_info, projectId, outcome, seconds, hasPrLink) => {
            const tags = this.#tags(projectId);
            this.#jobsEnded.add(1, { ...tags, outcome });
            this.#jobSeconds.record(seconds, tags);
            if (hasPrLink) this.#timeToPr.record(seconds, tags);
          },
        },
        quotaWaited: {
          fn: (_info, projectId, seconds) => this.quotaWaited(projectId, seconds),
        },
        keyWait: {
          fn: (info, projectId, waiting) => this.keyWait(info.workflowId, projectId, waiting),
        },
        quotaState: {
          fn: (_info, projectId, usage) => {
            const tags = this.#tags(projectId);
            this.#quotaBudget.set(usage.budgetUses, tags);
            this.#quotaUsed.set(usage.usesInWindow, tags);
            this.#quotaQueued.set(usage.queued, tags);
          },
        },
      },
    };
  }
}
