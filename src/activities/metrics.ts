/**
 * What the activities count, given as dependencies (src/observability/ in the worker, none in a
 * test) so that activity code imports nothing from the layers above it.
 */
import type { AgentApiError, ApiOperation } from '../agent-api/index.js';
import type { AgentJobRecord } from '../contract.js';

/** The activities' own metrics, tagged by the SDK with namespace, task queue and activity type. */
export interface ActivityMetrics {
  /** An agent job created. */
  created(): void;
  /** A poll that returned a record. */
  polled(record: AgentJobRecord): void;
  /** An API error, by its failure type and the call that met it. */
  apiError(type: AgentApiError['type'], operation: ApiOperation): void;
  /** A create or message sent again after an attempt of unknown outcome. */
  ambiguous(operation: ApiOperation): void;
  /** A create or message answered 2xx with a body that is not a record. */
  unreadableAnswer(operation: ApiOperation): void;
  /**
   * A job-end notice's attempt, by target name (null for a name no target has: callers choose
   * those, so they are not labels) and outcome.
   */
  notification(target: string | null, outcome: NotificationOutcome): void;
}

/** What one delivery attempt of a job-end notice did, or a name refused. */
export type NotificationOutcome = 'delivered' | 'retrying' | 'refused' | 'expired' | 'unknown-target';

/** The per-project metrics the activities feed: uses the API accepted, 429s, waits for the quota. */
export interface ProjectUseMetrics {
  used(projectId: string, kind: 'create' | 'message'): void;
  rateLimited(projectId: string, operation: string): void;
  quotaWaited(projectId: string, seconds: number): void;
}

/** Counts nothing: for activities built without metrics. */
export const NO_METRICS: ActivityMetrics = {
  created: () => undefined,
  polled: () => undefined,
  apiError: () => undefined,
  ambiguous: () => undefined,
  unreadableAnswer: () => undefined,
  notification: () => undefined,
};
