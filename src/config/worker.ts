/** The worker's settings as zod schemas, a group per concern (docs/configuration.md), read at start. */
import type { WorkerOptions } from '@temporalio/worker';
import * as z from 'zod/mini';
import { isLoopbackHost, proxySettings } from '../agent-api/dispatcher.js';
import { DEFAULT_NOTIFY_RETRY_FOR_MS } from '../failure-policy/streak.js';
import { FileNotifyTargets, parseNotifyTargets } from '../notify/targets.js';
import {
  DEFAULT_PROJECT_QUOTA,
  DEFAULT_QUOTA_LEASE_MS,
  quotaLimit,
  type ProjectQuotaSettings,
} from '../quota/settings.js';
import { cacheSizeFor, cgroupMemoryLimit, parseMemoryQuantity, workflowHeapFor } from './memory.js';
import {
  ConfigError,
  duration,
  fileSetting,
  hostPort,
  httpUrl,
  keyFile,
  logLevel,
  notBoth,
  oneOf,
  readSettings,
  trueFalse,
  wholeNumber,
  type Env,
} from './settings.js';
import { loadTemporalSettings, TemporalEnv } from './temporal.js';
import { loadTracingSettings } from './tracing.js';
import { VersioningEnv } from './version.js';

/** Cached workflows when no memory limit is known (no container limit, no WORKER_MEMORY_LIMIT). */
export const DEFAULT_MAX_CACHED_WORKFLOWS = 2_000;

const AgentApiEnv = z.object({
  AGENT_API_BASE_URL: z.pipe(
    z.string({
      error:
        'is required (the live service is https://api.mintlify.com; `npm run simulator` serves http://127.0.0.1:8787)',
    }),
    httpUrl,
  ),
  AGENT_API_ALLOW_INSECURE_HTTP: z._default(trueFalse, false),
  AGENT_API_KEY: z.optional(z.string().check(z.regex(/^\S+$/, 'must not contain white space'))),
  AGENT_API_KEY_FILE: z.optional(keyFile),
  AGENT_API_AMBIGUOUS_CREATE: z._default(oneOf('retry', 'fail'), 'retry'),
});

const ProjectQuotaEnv = z.object({
  AGENT_API_PROJECT_QUOTA: z.prefault(quotaLimit, DEFAULT_PROJECT_QUOTA),
  // One JSON object from project ID to a quota; an error names the project, never its quota.
  AGENT_API_PROJECT_QUOTA_OVERRIDES: z._default(
    z.pipe(
      z.transform((text: string) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          // Not JSON: the record refuses it, with the one message.
          return undefined;
        }
      }),
      z.record(z.string(), quotaLimit, { error: 'must be a JSON object such as {"docs-a":"10/1h"}' }),
    ),
    {},
  ),
  AGENT_API_PROJECT_QUOTA_LEASE: z._default(duration(1_000), DEFAULT_QUOTA_LEASE_MS),
});

/** Targets that cannot be used stop the start, as a bad API key file does. */
const NotifyEnv = z.object({
  AGENT_NOTIFY_TARGETS_FILE: z.optional(
    fileSetting((path) => ({ file: path, targets: new FileNotifyTargets(path).current() })),
  ),
  AGENT_NOTIFY_TARGETS: z.optional(
    z.pipe(
      z.string(),
      z.transform((text, ctx) => {
        const parsed = parseNotifyTargets(text);
        if ('value' in parsed) return { file: null, targets: parsed.value };
        ctx.issues.push({ code: 'custom', message: parsed.reason, input: text });
        return z.NEVER;
      }),
    ),
  ),
  AGENT_NOTIFY_RETRY_FOR: z._default(duration(1_000), DEFAULT_NOTIFY_RETRY_FOR_MS),
});

const TuningEnv = z.object({
  WORKER_MAX_CONCURRENT_ACTIVITIES: z._default(wholeNumber(1), 200),
  WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: z._default(wholeNumber(2), 100),
  WORKER_MAX_CACHED_WORKFLOWS: z.optional(wholeNumber(0)),
  WORKER_MEMORY_LIMIT: z.optional(
    z.pipe(
      z.transform(parseMemoryQuantity),
      z.number({ error: 'must be a memory size such as 1Gi or 1536Mi' }),
    ),
  ),
  WORKER_ACTIVITIES_PER_SECOND: z.optional(
    z.coerce.number({ error: 'must be a positive number' }).check(z.positive('must be a positive number')),
  ),
  WORKER_SHUTDOWN_GRACE: z._default(duration(), 30_000),
  // Loopback by default: health and metrics have no auth. Deployments whose probes or scrapers
  // come from outside the process's host set 0.0.0.0 (deploy/k8s, docker-compose.yml).
  HEALTH_ADDRESS: z.prefault(hostPort, '127.0.0.1:8080'),
  // As the runtime's bind address; null: off.
  METRICS_ADDRESS: z.prefault(
    z.pipe(
      z.union([z.literal('off'), hostPort], { error: 'must be host:port or off' }),
      z.transform((address) => (address === 'off' ? null : `${address.host}:${address.port}`)),
    ),
    '127.0.0.1:9464',
  ),
  METRICS_MAX_PROJECTS: z._default(wholeNumber(1), 100),
  LOG_LEVEL: logLevel,
});

/** The environment variables the worker reads besides the standard TEMPORAL_* ones (docs/configuration.md). */
export const WORKER_SETTINGS = [
  TemporalEnv,
  AgentApiEnv,
  ProjectQuotaEnv,
  NotifyEnv,
  VersioningEnv,
  TuningEnv,
].flatMap((schema) => Object.keys(schema.shape));

/**
 * How long after `WORKER_SHUTDOWN_GRACE` a drain may still take before the worker exits anyway: for
 * activities cancelled at the end of the grace to answer (a create lets its request finish) and the
 * connection to close. The manifests' termination grace periods must exceed grace + this.
 */
export const SHUTDOWN_FORCE_AFTER_GRACE_MS = 10_000;

/** Everything the worker process needs: the settings as their schemas give them, and what they derive. */
export type WorkerConfig = ReturnType<typeof loadWorkerConfig>;

/** Loads everything the worker needs, or throws a {@link ConfigError} naming the first bad setting. */
export function loadWorkerConfig(env: Env = process.env, containerLimit = () => cgroupMemoryLimit()) {
  const agentApi = loadAgentApiSettings(env);
  const temporal = loadTemporalSettings(env);
  const tuning = readSettings(TuningEnv, env);
  const quota = readSettings(ProjectQuotaEnv, env);
  const versioning = readSettings(VersioningEnv, env);
  const bytes = tuning.WORKER_MEMORY_LIMIT;
  const limit = bytes === undefined ? containerLimit() : { bytes, source: 'WORKER_MEMORY_LIMIT' as const };
  // An explicit cache size wins; without a limit, Node keeps its own heap size (./memory.ts).
  const maxCachedWorkflows =
    tuning.WORKER_MAX_CACHED_WORKFLOWS ??
    (limit === null ? DEFAULT_MAX_CACHED_WORKFLOWS : cacheSizeFor(limit.bytes));
  const workflowHeapMiB = limit === null ? null : workflowHeapFor(maxCachedWorkflows);
  const shutdownGraceMs = tuning.WORKER_SHUTDOWN_GRACE;
  return {
    ...tuning,
    temporal,
    agentApi,
    /** The tuning as `WorkerOptions`, shared with the benchmark's baseline worker (same tuning). */
    workerOptions: {
      namespace: temporal.namespace,
      taskQueue: temporal.taskQueue,
      maxConcurrentActivityTaskExecutions: tuning.WORKER_MAX_CONCURRENT_ACTIVITIES,
      // Local activities: the polls of 1.0 and of the benchmark's baseline (c); this build runs none.
      maxConcurrentLocalActivityExecutions: tuning.WORKER_MAX_CONCURRENT_ACTIVITIES,
      maxConcurrentWorkflowTaskExecutions: tuning.WORKER_MAX_CONCURRENT_WORKFLOW_TASKS,
      maxCachedWorkflows,
      maxTaskQueueActivitiesPerSecond: tuning.WORKER_ACTIVITIES_PER_SECOND,
      shutdownGraceTime: shutdownGraceMs,
      shutdownForceTime: shutdownGraceMs + SHUTDOWN_FORCE_AFTER_GRACE_MS,
    } satisfies Partial<WorkerOptions>,
    memory: { limit, maxCachedWorkflows, workflowHeapMiB },
    /** The per-project API budget every worker shares; `defaultLimit` null when it is off. */
    projectQuota: {
      defaultLimit: quota.AGENT_API_PROJECT_QUOTA,
      overrides: quota.AGENT_API_PROJECT_QUOTA_OVERRIDES,
      leaseMs: quota.AGENT_API_PROJECT_QUOTA_LEASE,
      // A versioned worker's quota workflows follow the current version (src/workflows/project-quota/workflow.ts).
      followsRollouts: versioning.TEMPORAL_WORKER_VERSIONING,
    } satisfies ProjectQuotaSettings,
    versioning,
    tracing: loadTracingSettings(env),
    /** Job-end notification targets (docs/notifications.md); null when none are configured. */
    notify: loadNotifySettings(env),
  };
}

/** How to reach the Agent Job API, AGENT_API_KEY the key at start (from AGENT_API_KEY_FILE when set). Never logged. */
function loadAgentApiSettings(env: Env) {
  notBoth(env, 'AGENT_API_KEY', 'AGENT_API_KEY_FILE', 'AGENT_API_KEY');
  const settings = readSettings(AgentApiEnv, env);
  const { protocol, hostname } = new URL(settings.AGENT_API_BASE_URL);
  // Over plain HTTP anyone on the path reads the admin API key; loopback never leaves the host.
  if (protocol === 'http:' && !settings.AGENT_API_ALLOW_INSECURE_HTTP && !isLoopbackHost(hostname))
    throw new ConfigError(
      'AGENT_API_BASE_URL',
      'an http URL to a host beyond loopback would send the admin API key in cleartext: use https, or set AGENT_API_ALLOW_INSECURE_HTTP=true for a server on a network you trust (a simulator)',
    );
  try {
    proxySettings(env);
  } catch (err) {
    // The message names the variable; its value may hold credentials and is never shown.
    throw new ConfigError('HTTPS_PROXY/HTTP_PROXY', (err as Error).message);
  }
  const apiKey = settings.AGENT_API_KEY_FILE?.key ?? settings.AGENT_API_KEY;
  if (apiKey === undefined)
    throw new ConfigError('AGENT_API_KEY', 'is required (or AGENT_API_KEY_FILE for a mounted secret)');
  return { ...settings, AGENT_API_KEY: apiKey };
}

/**
 * Job-end notification targets (`file` null: from AGENT_NOTIFY_TARGETS) and how long a notice is
 * tried; null without targets. Never logged: URLs and secrets.
 */
export function loadNotifySettings(env: Env = process.env) {
  notBoth(env, 'AGENT_NOTIFY_TARGETS', 'AGENT_NOTIFY_TARGETS_FILE');
  const settings = readSettings(NotifyEnv, env);
  const targets = settings.AGENT_NOTIFY_TARGETS_FILE ?? settings.AGENT_NOTIFY_TARGETS;
  return targets === undefined ? null : { ...targets, retryForMs: settings.AGENT_NOTIFY_RETRY_FOR };
}
