/**
 * The one typed configuration loader. Entry points call it at start; nothing reads the
 * environment at import time. Every bad setting becomes a {@link ConfigError} that names it.
 *
 * The Temporal connection itself is read by @temporalio/envconfig (TEMPORAL_ADDRESS,
 * TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE), so
 * a local server, a self-hosted cluster and Temporal Cloud are configured the standard way. One
 * setting is this project's own: TEMPORAL_API_KEY_FILE, a key file re-read when it changes.
 */
import { readFileSync } from 'node:fs';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { ClientConnectConfig } from '@temporalio/envconfig';
import type { WorkerOptions } from '@temporalio/worker';
import type { AmbiguousCreatePolicy } from './activities/index.js';
import { ApiKeyFileError, FileApiKey } from './agent-api/api-key.js';
import { checkProxyEnv, isLoopbackHost } from './agent-api/dispatcher.js';
import { DEFAULT_TASK_QUEUE } from './contract.js';
import { durationMs } from './duration.js';
import { AgentJobError, ErrorName } from './errors.js';
import {
  cgroupMemoryLimit,
  parseMemoryQuantity,
  sizeForMemory,
  type MemoryLimit,
  type MemorySizing,
} from './worker/memory.js';

/** Cached workflows when no memory limit is known (no container limit, no WORKER_MEMORY_LIMIT). */
export const DEFAULT_MAX_CACHED_WORKFLOWS = 2_000;
import { parseProjectQuotaSettings, QuotaSettingError, type ProjectQuotaSettings } from './quota/settings.js';
import { DEFAULT_DEPLOYMENT_NAME, type VersioningSettings } from './worker/version.js';
import type { TracingSettings } from './observability/tracing.js';

/** A setting is missing or invalid. The message is the one line a person needs. */
export class ConfigError extends AgentJobError {
  constructor(
    readonly setting: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorName.Config, `${setting}: ${message}`, options);
  }
}

type Env = Record<string, string | undefined>;

/** How to reach Temporal, from envconfig, plus the task queue. */
export interface TemporalSettings {
  connect: ClientConnectConfig;
  namespace: string;
  /** Address without secrets, for logs and UI links. */
  address: string;
  taskQueue: string;
  /** Base URL of the Temporal UI, for links printed by the starter. */
  uiUrl: string | null;
  /**
   * TEMPORAL_API_KEY_FILE: the key in `connect` is the file's at start, and the entry points keep
   * their connections on the file's current key (src/temporal-api-key.ts). Null without one.
   */
  apiKeyFile: string | null;
}

/** How to reach the Agent Job API. The key is kept out of logs and errors. */
export interface AgentApiSettings {
  baseUrl: string;
  /** The key at start (from AGENT_API_KEY, or read from the file). */
  apiKey: string;
  /** AGENT_API_KEY_FILE: the worker re-reads it when it changes, so a rotated key needs no restart. */
  apiKeyFile: string | null;
  ambiguousCreatePolicy: AmbiguousCreatePolicy;
}

/** Everything the worker process needs. */
export interface WorkerConfig {
  temporal: TemporalSettings;
  agentApi: AgentApiSettings;
  maxConcurrentActivities: number;
  maxConcurrentWorkflowTasks: number;
  maxCachedWorkflows: number;
  /** The memory limit and what the worker sizes from it (src/worker/memory.ts). */
  memory: MemorySizing;
  /** Server-side cap on activities started per second across all workers of the task queue. */
  activitiesPerSecond: number | undefined;
  shutdownGraceMs: number;
  /** `host:port` of the health endpoint (liveness and readiness). */
  healthAddress: { host: string; port: number };
  /** `host:port` where the SDK serves Prometheus metrics; null disables them. */
  metricsBindAddress: string | null;
  /** Distinct `project` labels per process; further projects are `_other` (src/observability/project-metrics.ts). */
  metricsMaxProjects: number;
  logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  /** The per-project API budget every worker shares; `defaultLimit` null when it is off. */
  projectQuota: ProjectQuotaSettings;
  /** Worker Deployment Versioning (docs/versioning.md). */
  versioning: VersioningSettings;
  /** OpenTelemetry tracing from the standard OTEL_* variables (docs/tracing.md). */
  tracing: TracingSettings;
}

/** The environment variables the worker reads besides the standard TEMPORAL_* ones (docs/configuration.md). */
export const WORKER_SETTINGS = [
  'TEMPORAL_TASK_QUEUE',
  'TEMPORAL_UI_URL',
  'TEMPORAL_WORKER_VERSIONING',
  'TEMPORAL_DEPLOYMENT_NAME',
  'TEMPORAL_WORKER_BUILD_ID',
  'TEMPORAL_API_KEY_FILE',
  'AGENT_API_BASE_URL',
  'AGENT_API_ALLOW_INSECURE_HTTP',
  'AGENT_API_KEY',
  'AGENT_API_KEY_FILE',
  'AGENT_API_AMBIGUOUS_CREATE',
  'AGENT_API_PROJECT_QUOTA',
  'AGENT_API_PROJECT_QUOTA_OVERRIDES',
  'AGENT_API_PROJECT_QUOTA_LEASE',
  'WORKER_MAX_CONCURRENT_ACTIVITIES',
  'WORKER_MAX_CONCURRENT_WORKFLOW_TASKS',
  'WORKER_MAX_CACHED_WORKFLOWS',
  'WORKER_MEMORY_LIMIT',
  'WORKER_ACTIVITIES_PER_SECOND',
  'WORKER_SHUTDOWN_GRACE',
  'HEALTH_ADDRESS',
  'METRICS_ADDRESS',
  'METRICS_MAX_PROJECTS',
  'LOG_LEVEL',
] as const;

/**
 * How long after `WORKER_SHUTDOWN_GRACE` a drain may still take before the worker gives up on it
 * and exits: 10 s for activities cancelled at the end of the grace to answer (an HTTP call aborts at
 * once; a create lets its request finish) and for the connection to close. So the drain always ends
 * within grace + 10 s, which the manifests' termination grace periods must exceed.
 */
export const SHUTDOWN_FORCE_AFTER_GRACE_MS = 10_000;

/**
 * The worker's settings as Temporal `WorkerOptions`, shared by the worker and the benchmark's
 * baseline worker so both run with the same tuning.
 */
export function workerOptionsFrom(config: WorkerConfig) {
  return {
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
    maxConcurrentActivityTaskExecutions: config.maxConcurrentActivities,
    // Local activities: the polls of 1.0 and of the benchmark's baseline (c); this build runs none.
    maxConcurrentLocalActivityExecutions: config.maxConcurrentActivities,
    maxConcurrentWorkflowTaskExecutions: config.maxConcurrentWorkflowTasks,
    maxCachedWorkflows: config.maxCachedWorkflows,
    maxTaskQueueActivitiesPerSecond: config.activitiesPerSecond,
    shutdownGraceTime: config.shutdownGraceMs,
    shutdownForceTime: config.shutdownGraceMs + SHUTDOWN_FORCE_AFTER_GRACE_MS,
  } satisfies Partial<WorkerOptions>;
}

/**
 * Loads the Temporal connection settings (shared by the worker and the starter). A key file's key
 * goes to envconfig as TEMPORAL_API_KEY would, so it replaces a profile's `api_key` and turns TLS
 * on alike.
 */
export function loadTemporalSettings(env: Env = process.env): TemporalSettings {
  const apiKeyFile = text(env, 'TEMPORAL_API_KEY_FILE') ?? null;
  const overrideEnvVars = definedOnly(env);
  if (apiKeyFile !== null) {
    if (text(env, 'TEMPORAL_API_KEY') !== undefined) {
      throw new ConfigError(
        'TEMPORAL_API_KEY_FILE',
        'set TEMPORAL_API_KEY or TEMPORAL_API_KEY_FILE, not both',
      );
    }
    overrideEnvVars.TEMPORAL_API_KEY = temporalKeyFromFile(apiKeyFile);
  }
  let connect: ClientConnectConfig;
  try {
    connect = loadClientConnectConfig({ overrideEnvVars });
  } catch (err) {
    throw new ConfigError(
      'TEMPORAL_*',
      `cannot load the Temporal connection settings: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  const address = connect.connectionOptions.address ?? 'localhost:7233';
  connect.connectionOptions.address = address;
  const namespace = connect.namespace ?? 'default';
  const taskQueue = text(env, 'TEMPORAL_TASK_QUEUE') ?? DEFAULT_TASK_QUEUE;
  const uiUrl = url(env, 'TEMPORAL_UI_URL') ?? defaultUiUrl(address);
  return { connect: { ...connect, namespace }, namespace, address, taskQueue, uiUrl, apiKeyFile };
}

/**
 * The key in TEMPORAL_API_KEY_FILE now, by the rules the worker re-reads it with (visible ASCII,
 * trimmed). The error names the file and why, never the content.
 */
function temporalKeyFromFile(path: string): string {
  try {
    return new FileApiKey(path).current();
  } catch (err) {
    if (err instanceof ApiKeyFileError) {
      throw new ConfigError('TEMPORAL_API_KEY_FILE', err.message, { cause: err });
    }
    throw err;
  }
}

/** The dev server serves its UI on the gRPC port + 1000; other servers need TEMPORAL_UI_URL. */
function defaultUiUrl(address: string): string | null {
  const match = /^(localhost|127\.0\.0\.1):(\d+)$/.exec(address);
  if (!match) return null;
  return `http://${match[1]}:${Number(match[2]) + 1000}`;
}

/** Loads the Agent Job API settings. */
export function loadAgentApiSettings(env: Env = process.env): AgentApiSettings {
  const baseUrl = url(env, 'AGENT_API_BASE_URL');
  if (!baseUrl) {
    throw new ConfigError(
      'AGENT_API_BASE_URL',
      'is required (the live service is https://api.mintlify.com; `npm run simulator` serves http://127.0.0.1:8787)',
    );
  }
  refuseCleartextKey(env, baseUrl);
  try {
    checkProxyEnv(env);
  } catch (err) {
    // The message names the variable; its value may hold credentials and is never shown.
    throw new ConfigError('HTTPS_PROXY/HTTP_PROXY', (err as Error).message, { cause: err });
  }
  const direct = env.AGENT_API_KEY;
  const file = text(env, 'AGENT_API_KEY_FILE');
  if (direct && file)
    throw new ConfigError('AGENT_API_KEY', 'set AGENT_API_KEY or AGENT_API_KEY_FILE, not both');
  let apiKey: string;
  if (file) {
    try {
      apiKey = readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new ConfigError(
        'AGENT_API_KEY_FILE',
        `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
        {
          cause: err,
        },
      );
    }
    if (!apiKey) throw new ConfigError('AGENT_API_KEY_FILE', `${file} is empty`);
  } else {
    apiKey = (direct ?? '').trim();
    if (!apiKey)
      throw new ConfigError('AGENT_API_KEY', 'is required (or AGENT_API_KEY_FILE for a mounted secret)');
  }
  if (/\s/.test(apiKey))
    throw new ConfigError(file ? 'AGENT_API_KEY_FILE' : 'AGENT_API_KEY', 'must not contain white space');
  const policy = text(env, 'AGENT_API_AMBIGUOUS_CREATE') ?? 'retry';
  if (policy !== 'retry' && policy !== 'fail') {
    throw new ConfigError('AGENT_API_AMBIGUOUS_CREATE', `must be "retry" or "fail", not "${policy}"`);
  }
  return { baseUrl, apiKey, apiKeyFile: file ?? null, ambiguousCreatePolicy: policy };
}

/**
 * Loads everything the worker needs, or throws a {@link ConfigError} naming the first bad setting.
 * `containerLimit` reads the cgroup memory limit (replaceable in tests).
 */
export function loadWorkerConfig(
  env: Env = process.env,
  containerLimit: () => MemoryLimit | null = () => cgroupMemoryLimit(),
): WorkerConfig {
  const agentApi = loadAgentApiSettings(env);
  const temporal = loadTemporalSettings(env);
  const logLevel = (text(env, 'LOG_LEVEL') ?? 'INFO').toUpperCase();
  if (!['DEBUG', 'INFO', 'WARN', 'ERROR'].includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be DEBUG, INFO, WARN or ERROR, not "${logLevel}"`);
  }
  // Loopback by default: health and metrics have no auth. Deployments whose probes or scrapers
  // come from outside the process's host set 0.0.0.0 (deploy/k8s, docker-compose.yml).
  const metrics = text(env, 'METRICS_ADDRESS') ?? '127.0.0.1:9464';
  const explicitCache = text(env, 'WORKER_MAX_CACHED_WORKFLOWS');
  const memory = sizeForMemory({
    limit: memoryLimit(env) ?? containerLimit(),
    explicitCache:
      explicitCache === undefined
        ? undefined
        : int(env, 'WORKER_MAX_CACHED_WORKFLOWS', DEFAULT_MAX_CACHED_WORKFLOWS, 0),
    fallbackCache: DEFAULT_MAX_CACHED_WORKFLOWS,
  });
  const versioning = loadVersioningSettings(env);
  return {
    temporal,
    agentApi,
    maxConcurrentActivities: int(env, 'WORKER_MAX_CONCURRENT_ACTIVITIES', 200, 1),
    maxConcurrentWorkflowTasks: int(env, 'WORKER_MAX_CONCURRENT_WORKFLOW_TASKS', 100, 2),
    maxCachedWorkflows: memory.maxCachedWorkflows,
    memory,
    activitiesPerSecond: optionalNumber(env, 'WORKER_ACTIVITIES_PER_SECOND'),
    shutdownGraceMs: duration(env, 'WORKER_SHUTDOWN_GRACE', 30_000),
    healthAddress: hostPort(env, 'HEALTH_ADDRESS', '127.0.0.1:8080'),
    metricsBindAddress: metrics === 'off' ? null : (hostPort(env, 'METRICS_ADDRESS', metrics), metrics),
    metricsMaxProjects: int(env, 'METRICS_MAX_PROJECTS', 100, 1),
    logLevel: logLevel as WorkerConfig['logLevel'],
    // A versioned worker's quota workflows follow the current version (src/workflows/project-quota/workflow.ts).
    projectQuota: { ...loadProjectQuotaSettings(env), followsRollouts: versioning.enabled },
    versioning,
    tracing: loadTracingSettings(env),
  };
}

/**
 * Tracing from the standard OTEL_* variables: on when an OTLP endpoint is set (or
 * OTEL_TRACES_EXPORTER=console), off when none is, or OTEL_SDK_DISABLED=true, or
 * OTEL_TRACES_EXPORTER=none. The exporter reads the rest (headers, timeout, batching) itself.
 */
export function loadTracingSettings(env: Env = process.env): TracingSettings {
  const off: TracingSettings = { exporter: null, endpoint: null };
  if (text(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return off;
  const exporter = (text(env, 'OTEL_TRACES_EXPORTER') ?? 'otlp').toLowerCase();
  if (exporter === 'none') return off;
  if (exporter === 'console') return { exporter: 'console', endpoint: null };
  if (exporter !== 'otlp') {
    throw new ConfigError('OTEL_TRACES_EXPORTER', `must be "otlp", "console" or "none", not "${exporter}"`);
  }
  const endpointName = text(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')
    ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
    : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const endpoint = url(env, endpointName);
  if (endpoint === undefined) return off;
  const protocolName = text(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL')
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = text(env, protocolName) ?? 'http/json';
  if (protocol !== 'http/json') {
    throw new ConfigError(
      protocolName,
      `the worker exports OTLP over HTTP with JSON bodies ("http/json"), not "${protocol}"; point ${endpointName} at the collector's OTLP/HTTP port (4318 by default)`,
    );
  }
  // Only the origin is ever logged: a collector URL may carry credentials.
  return { exporter: 'otlp', endpoint: new URL(endpoint).origin };
}

/**
 * Longest deployment name or build ID: the server builds an internal workflow ID from both, and
 * with `limit.maxIDLength: 255` (deploy/compose/dynamicconfig.yaml) it takes (255 - 39) / 2 each.
 */
const MAX_VERSION_FIELD_LENGTH = 108;

/**
 * Loads TEMPORAL_WORKER_VERSIONING, TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID, with the
 * server's own rules for the names (a deployment name without `.` or `:`, neither starting `__`).
 */
export function loadVersioningSettings(env: Env = process.env): VersioningSettings {
  // Off unless asked for: a versioned worker gets no workflow until an operator makes its version
  // current (docs/versioning.md), so `npm run worker`, the demo, the tests and the unversioned
  // compose stack and k8s base would sit idle against a fresh server. The versioned layouts
  // (deploy/k8s-versioned, deploy/compose/versioned.yaml) turn it on.
  const mode = (text(env, 'TEMPORAL_WORKER_VERSIONING') ?? 'off').toLowerCase();
  if (mode !== 'on' && mode !== 'off') {
    throw new ConfigError('TEMPORAL_WORKER_VERSIONING', `must be "on" or "off", not "${mode}"`);
  }
  const deploymentName = versionField(env, 'TEMPORAL_DEPLOYMENT_NAME') ?? DEFAULT_DEPLOYMENT_NAME;
  if (/[.:]/.test(deploymentName)) {
    throw new ConfigError(
      'TEMPORAL_DEPLOYMENT_NAME',
      `must not contain "." or ":" (the server joins name and build ID with them), not "${deploymentName}"`,
    );
  }
  return {
    enabled: mode === 'on',
    deploymentName,
    buildIdOverride: versionField(env, 'TEMPORAL_WORKER_BUILD_ID') ?? null,
  };
}

function versionField(env: Env, name: string): string | undefined {
  const value = text(env, name);
  if (value === undefined) return undefined;
  if (value.startsWith('__')) throw new ConfigError(name, `must not start with "__", not "${value}"`);
  if (value.length > MAX_VERSION_FIELD_LENGTH || /\s/.test(value)) {
    throw new ConfigError(
      name,
      `must be at most ${MAX_VERSION_FIELD_LENGTH} characters without white space, not "${value}"`,
    );
  }
  return value;
}

/** WORKER_MEMORY_LIMIT, a quantity such as `1Gi`, for a limit the cgroup does not show. */
function memoryLimit(env: Env): MemoryLimit | null {
  const value = text(env, 'WORKER_MEMORY_LIMIT');
  if (value === undefined) return null;
  const bytes = parseMemoryQuantity(value);
  if (bytes === null) {
    throw new ConfigError(
      'WORKER_MEMORY_LIMIT',
      `must be a memory size such as 1Gi or 1536Mi, not "${value}"`,
    );
  }
  return { bytes, source: 'WORKER_MEMORY_LIMIT' };
}

/** Loads AGENT_API_PROJECT_QUOTA (default 100/1h), its per-project overrides and the grant lease. */
export function loadProjectQuotaSettings(env: Env = process.env): ProjectQuotaSettings {
  try {
    return parseProjectQuotaSettings(
      {
        quota: text(env, 'AGENT_API_PROJECT_QUOTA'),
        overrides: text(env, 'AGENT_API_PROJECT_QUOTA_OVERRIDES'),
        lease: text(env, 'AGENT_API_PROJECT_QUOTA_LEASE'),
      },
      {
        quota: 'AGENT_API_PROJECT_QUOTA',
        overrides: 'AGENT_API_PROJECT_QUOTA_OVERRIDES',
        lease: 'AGENT_API_PROJECT_QUOTA_LEASE',
      },
    );
  } catch (err) {
    if (err instanceof QuotaSettingError) throw new ConfigError(err.setting, err.message, { cause: err });
    throw err;
  }
}

function definedOnly(env: Env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) if (value !== undefined) out[key] = value;
  return out;
}

function text(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

function url(env: Env, name: string): string | undefined {
  const value = text(env, name);
  if (value === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch (err) {
    throw new ConfigError(name, `"${value}" is not a URL`, { cause: err });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConfigError(name, `must be an http(s) URL, not ${parsed.protocol}`);
  }
  if (parsed.username || parsed.password) throw new ConfigError(name, 'must not carry credentials');
  return value.replace(/\/+$/, '');
}

/**
 * Refuses an `http:` base URL to a host other than loopback: the admin API key travels in every
 * request's Authorization header, and over plain HTTP anyone on the path reads it. Loopback (the
 * simulator on the same machine) never leaves the host. AGENT_API_ALLOW_INSECURE_HTTP=true allows
 * it on purpose, for a simulator on a trusted network (docker-compose.yml).
 */
function refuseCleartextKey(env: Env, baseUrl: string): void {
  const allow = (text(env, 'AGENT_API_ALLOW_INSECURE_HTTP') ?? 'false').toLowerCase();
  if (allow !== 'true' && allow !== 'false') {
    throw new ConfigError('AGENT_API_ALLOW_INSECURE_HTTP', `must be "true" or "false", not "${allow}"`);
  }
  const url = new URL(baseUrl);
  if (url.protocol !== 'http:' || allow === 'true' || isLoopbackHost(url.hostname)) return;
  throw new ConfigError(
    'AGENT_API_BASE_URL',
    `${baseUrl} would send the admin API key in cleartext to ${url.hostname}: use https, or set AGENT_API_ALLOW_INSECURE_HTTP=true for a server on a network you trust (a simulator)`,
  );
}

function int(env: Env, name: string, fallback: number, min: number): number {
  const value = text(env, name);
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < min)
    throw new ConfigError(name, `must be a whole number of at least ${min}, not "${value}"`);
  return parsed;
}

function optionalNumber(env: Env, name: string): number | undefined {
  const value = text(env, name);
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (!Number.isFinite(parsed) || parsed <= 0)
    throw new ConfigError(name, `must be a positive number, not "${value}"`);
  return parsed;
}

function duration(env: Env, name: string, fallback: number): number {
  const value = text(env, name);
  if (value === undefined) return fallback;
  const ms = durationMs(/^\d+$/.test(value) ? Number(value) : value);
  if (ms === undefined || ms < 0) throw new ConfigError(name, `"${value}" is not a duration such as "30s"`);
  return ms;
}

function hostPort(env: Env, name: string, fallback: string): { host: string; port: number } {
  const value = text(env, name) ?? fallback;
  const match = /^(.*):(\d+)$/.exec(value);
  const port = match ? Number(match[2]) : NaN;
  if (!match || !match[1] || port > 65_535) throw new ConfigError(name, `must be host:port, not "${value}"`);
  return { host: match[1], port };
}
