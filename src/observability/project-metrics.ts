/**
 * Prometheus metrics per project (the `agent_project_*` of ./metrics.ts), through the SDK's metric
 * meter. Workflows report through the `projectMetrics` sink (src/workflows/sinks.ts), activities
 * call this directly. deploy/grafana/ has the dashboard.
 */
import type { MetricMeter } from '@temporalio/common';
import type { InjectedSinks } from '@temporalio/worker';
import type { QuotaUseKind } from '../quota/messages.js';
import type { ProjectMetricsSinks } from '../workflows/sinks.js';
import { utf8Prefix } from '../ids.js';
import { instrument, METRICS, type MetricName } from './metrics.js';

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
 * process sees, `_other` for the rest, so that a flood of project IDs cannot grow the series.
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

/** The per-project metrics of one worker process (./metrics.ts defines them). */
export class ProjectMetrics {
  readonly #labels: ProjectLabels;
  readonly #metric: <N extends MetricName>(name: N) => ReturnType<(typeof METRICS)[N]>;
  /** The workflows waiting for a working key, by workflow ID: their project and when they said so. */
  readonly #keyWaits = new Map<string, { projectId: string; sinceMs: number }>();

  constructor(meter: MetricMeter, maxProjects: number) {
    this.#labels = new ProjectLabels(maxProjects);
    const made = new Map(
      Object.keys(METRICS)
        .filter((name) => name.startsWith('agent_project_'))
        .map((name) => [name, instrument(meter, name as MetricName)]),
    );
    this.#metric = (name) => made.get(name) as ReturnType<(typeof METRICS)[typeof name]>;
  }

  /**
   * A workflow started or stopped waiting for a working key, counted per workflow ID; one that ends,
   * or moves to another worker, without saying so is dropped after {@link KEY_WAIT_STALE_MS}.
   */
  keyWait(workflowId: string, projectId: string, waiting: boolean, nowMs = Date.now()): void {
    if (waiting) this.#keyWaits.set(workflowId, { projectId, sinceMs: nowMs });
    else this.#keyWaits.delete(workflowId);
    const counts = new Map<string, number>([[projectId, 0]]);
    for (const [id, wait] of this.#keyWaits) {
      // A stale wait still sets its project's gauge: to what is left without it.
      const stale = nowMs - wait.sinceMs > KEY_WAIT_STALE_MS;
      if (stale) this.#keyWaits.delete(id);
      counts.set(wait.projectId, (counts.get(wait.projectId) ?? 0) + (stale ? 0 : 1));
    }
    for (const [project, count] of counts)
      this.#metric('agent_project_workflows_waiting_for_key').set(count, this.#tags(project));
  }

  #tags(projectId: string, extra: Record<string, string> = {}) {
    return { project: this.#labels.label(projectId), ...extra };
  }

  /** A create or message the API accepted. */
  used(projectId: string, kind: QuotaUseKind): void {
    this.#metric('agent_project_api_uses').add(1, this.#tags(projectId, { kind }));
  }

  /** An answer 429. */
  rateLimited(projectId: string, operation: string): void {
    this.#metric('agent_project_rate_limited').add(1, this.#tags(projectId, { operation }));
  }

  /** A create or message that waited `seconds` for its use of the quota (0: taken at once). */
  quotaWaited(projectId: string, seconds: number): void {
    this.#metric('agent_project_quota_wait_seconds').record(seconds, this.#tags(projectId));
  }

  /** The sink the workflows report through; register it on every worker that runs them. */
  sinks(): InjectedSinks<ProjectMetricsSinks> {
    return {
      projectMetrics: {
        jobEnded: {
          fn: (_info, projectId, outcome, seconds, hasPrLink) => {
            const tags = this.#tags(projectId);
            this.#metric('agent_project_jobs_ended').add(1, { ...tags, outcome });
            this.#metric('agent_project_job_seconds').record(seconds, tags);
            if (hasPrLink) this.#metric('agent_project_time_to_pr_seconds').record(seconds, tags);
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
            this.#metric('agent_project_quota_budget_uses').set(usage.budgetUses, tags);
            this.#metric('agent_project_quota_used_uses').set(usage.usesInWindow, tags);
            this.#metric('agent_project_quota_queued_jobs').set(usage.queued, tags);
          },
        },
      },
    };
  }
}
