/**
 * The activities: the only place where the workflow touches the Agent Job API. One factory per
 * file, given the API client and the policies, so the worker, the tests and the benchmark wire
 * their own.
 */
import type { AgentApiClient } from '../agent-api/index.js';
import type { ProjectQuotaSettings } from '../quota/settings.js';
import { NO_METRICS, type ActivityMetrics, type ProjectUseMetrics } from './metrics.js';
import { takeProjectQuotaUse, type QuotaTakeInput } from './project-quota.js';
import { createCreateActivity } from './create.js';
import { createResendGate, createToFailure, KeyAnswers, type AmbiguousCreatePolicy } from './failures.js';
import { createMessageActivity } from './message.js';
import { createPollActivities } from './poll.js';
import { createNotifyActivities, type NotifyDeps } from './notify.js';

export type { AmbiguousCreatePolicy } from './failures.js';
export type { ActivityMetrics, NotificationOutcome, ProjectUseMetrics } from './metrics.js';
export type { DeliverJobEndNoticeInput, NotifyDeps, NotifyTargetInfo } from './notify.js';
export type { CreateAgentJobInput } from './create.js';
export type { SendAgentJobMessageInput } from './message.js';
export type { GetAgentJobInput, PollAgentJobInput, PolledRecord } from './poll.js';

/** What the activities need. */
export interface ActivityDeps {
  api: Pick<AgentApiClient, 'createJob' | 'getJob' | 'sendMessage'>;
  /**
   * What an attempt after one that may have reached the API does (`createResendGate` in
   * ./failures.ts): `retry` (default) sends again, logged and counted; `fail` sends nothing.
   */
  ambiguousCreatePolicy?: AmbiguousCreatePolicy;
  /** The per-project API quota (AGENT_API_PROJECT_QUOTA); absent or null: off. */
  projectQuota?: ProjectQuotaSettings | null;
  /** The activities' own metrics (src/observability/metrics.ts in the worker); absent: not counted. */
  metrics?: ActivityMetrics;
  /** Per-project metrics (uses accepted, 429s); absent: not counted. */
  projectMetrics?: ProjectUseMetrics;
  /** Job-end notifications (AGENT_NOTIFY_TARGETS_FILE); absent: no targets, every `notify` name is refused. */
  notify?: NotifyDeps;
}

/** Builds the activities around an API client. Their names are in histories: they never change. */
export function createActivities(deps: ActivityDeps) {
  const policy = deps.ambiguousCreatePolicy ?? 'retry';
  const keys = new KeyAnswers();
  const metrics = deps.metrics ?? NO_METRICS;
  const toFailure = createToFailure({ policy, keys, metrics, projectMetrics: deps.projectMetrics });
  const mayResend = createResendGate(policy, metrics);

  /** A create or message takes its use of the project quota now: true when it did, false when off. */
  async function takeQuota(kind: 'create' | 'message', input: QuotaTakeInput): Promise<boolean> {
    const taken = await takeProjectQuotaUse(deps.projectQuota, kind, input);
    // A use taken at once waited 0 s for the quota: the wait histogram covers every use, not
    // only the ones that queued (the workflow records those).
    if (taken === 'at-once') deps.projectMetrics?.quotaWaited(input.projectId, 0);
    return taken !== 'off';
  }

  const sends = { api: deps.api, mayResend, toFailure, keys, metrics, projectMetrics: deps.projectMetrics };
  return {
    ...createCreateActivity({ ...sends, takeQuota: (input) => takeQuota('create', input) }),
    ...createPollActivities({ api: deps.api, toFailure, keys, metrics }),
    ...createMessageActivity({ ...sends, takeQuota: (input) => takeQuota('message', input) }),
    ...createNotifyActivities(deps.notify, metrics),
  };
}

/** The activities' type, for `proxyActivities` in workflow code. */
export type AgentJobActivities = ReturnType<typeof createActivities>;
