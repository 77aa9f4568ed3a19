/**
 * The sinks workflows report through, declared here so that workflow code imports nothing from the
 * layers above it (decision 0016); src/observability/project-metrics.ts implements them.
 */
import type { Sinks } from '@temporalio/workflow';
import type { QuotaUsage } from './project-quota/state.js';

/** What workflows tell the worker for the per-project metrics: never during replay, so each event counts once. */
export interface ProjectMetricsSinks extends Sinks {
  projectMetrics: {
    /** A job's workflow ended: `outcome` is its end status or failure type; seconds since its start. */
    jobEnded(projectId: string, outcome: string, seconds: number, hasPrLink: boolean): void;
    /** A create or message waited this long in the project's quota queue before its grant. */
    quotaWaited(projectId: string, seconds: number): void;
    /** The quota's state after a pass: the budget, the uses in its window, the queue. */
    quotaState(projectId: string, usage: QuotaUsage): void;
    /** The workflow started (`true`) or stopped waiting for a working API key after a 401 or 403. */
    keyWait(projectId: string, waiting: boolean): void;
  };
}
