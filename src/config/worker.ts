/**
 * The one typed configuration loader. Entry points call it at start; nothing reads the
 * environment at import time. Every bad setting becomes a {@link ConfigError} that names it.
 *
 * The Temporal connection itself is read by @temporalio/envconfig (TEMPORAL_ADDRESS,
 * TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE), so
 * a local server, a self-hosted cluster and Temporal Cloud are configured the standard way. Two
 * settings are this project's own: TEMPORAL_API_KEY_FILE, a key file re-read when it changes, and
 * TEMPORAL_PAYLOAD_KEYS_FILE, the payload codec's key ring (src/payload-codec/).
 */
import { loadClientConnectConfig, type ClientConnectConfig } from '@temporalio/envconfig';
import type { WorkerOptions } from '@temporalio/worker';
import type { AmbiguousCreatePolicy } from '../activities/index.js';
import { DEFAULT_NOTIFY_RETRY_FOR_MS } from '../notify/delivery-policy.js';
import { ApiKeyFileError, FileApiKey } from '../agent-api/api-key.js';
import { checkProxyEnv, isLoopbackHost } from '../agent-api/dispatcher.js';
import { DEFAULT_TASK_QUEUE } from '../contract.js';
import { durationMs } from '../duration.js';
import { AgentJobError, ErrorName } from '../errors.js';
import {
  cgroupMemoryLimit,
  parseMemoryQuantity,
  sizeForMemory,
  type MemoryLimit,
  type MemorySizing,
} from './memory.js';
import {
  FileKeyRing,
  PayloadKeyFileError,
  type AccessTokenPolicy,
  type CodecServerSettings,
} from '../payload-codec/index.js';
import {
  parseProjectQuotaSettings,
  QuotaSettingError,
  type ProjectQuotaSettings,
} from '../quota/settings.js';
import { DEFAULT_DEPLOYMENT_NAME, type VersioningSettings } from './version.js';
import type { TracingSettings } from '../observability/tracing.js';
import {
  FileNotifyTargets,
  NotifyTargetsError,
  parseNotifyTargets,
  type NotifyTargets,
} from '../notify/targets.js';

/** Cached workflows when no memory limit is known (no container limit, no WORKER_MEMORY_LIMIT). */
export const DEFAULT_MAX_CACHED_WORKFLOWS = 2_000;

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
  /**
   * TEMPORAL_PAYLOAD_KEYS_FILE: the payload codec's key ring, checked at load and re-read by the
   * codec when it changes. Null: the codec is off and payloads are stored in plain text.
   */
  payloadKeysFile: string | null;
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
  /** The memory limit and what the worker sizes from it (src/config/memory.ts). */
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
  /** Job-end notification targets (docs/notifications.md); null when none are configured. */
  notify: NotifySettings | null;
}

/**
 * Job-end notification targets: from AGENT_NOTIFY_TARGETS_FILE (re-read when it changes) or
 * AGENT_NOTIFY_TARGETS, and how long a notice is tried. Never logged: URLs and secrets.
 */
export interface NotifySettings {
  /** The file to re-read, or null when the targets came from AGENT_NOTIFY_TARGETS. */
  file: string | null;
  /** The targets at start. */
  targets: NotifyTargets;
  /** AGENT_NOTIFY_RETRY_FOR: how long a notice is tried, default 24 h. */
  retryForMs: number;
}

/** The environment variables the worker reads besides the standard TEMPORAL_* ones (docs/configuration.md). */
export const WORKER_SETTINGS = [
  'TEMPORAL_TASK_QUEUE',
  'TEMPORAL_UI_URL',
  'TEMPORAL_WORKER_VERSIONING',
  'TEMPORAL_DEPLOYMENT_NAME',
  'TEMPORAL_WORKER_BUILD_ID',
  'WORKER_UPGRADE_CHECK',
  'TEMPORAL_API_KEY_FILE',
  'TEMPORAL_PAYLOAD_KEYS_FILE',
  'AGENT_API_BASE_URL',
  'AGENT_API_ALLOW_INSECURE_HTTP',
  'AGENT_API_KEY',
  'AGENT_API_KEY_FILE',
  'AGENT_API_AMBIGUOUS_CREATE',
  'AGENT_API_PROJECT_QUOTA',
  'AGENT_API_PROJECT_QUOTA_OVERRIDES',
  'AGENT_API_PROJECT_QUOTA_LEASE',
  'AGENT_NOTIFY_TARGETS',
  'AGENT_NOTIFY_TARGETS_FILE',
  'AGENT_NOTIFY_RETRY_FOR',
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
  const overrideEnvVars = Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  if (apiKeyFile !== null && text(env, 'TEMPORAL_API_KEY') !== undefined)
    throw new ConfigError('TEMPORAL_API_KEY_FILE', 'set TEMPORAL_API_KEY or TEMPORAL_API_KEY_FILE, not both');
  if (apiKeyFile !== null)
    overrideEnvVars.TEMPORAL_API_KEY = keyFromFile('TEMPORAL_API_KEY_FILE', apiKeyFile);
  let connect: ClientConnectConfig;
  try {
    connect = loadClientConnectConfig({ overrideEnvVars });
  } catch (err) {
    const why = `cannot load the Temporal connection settings: ${(err as Error).message}`;
    throw new ConfigError('TEMPORAL_*', why, { cause: err });
  }
  const address = connect.connectionOptions.address ?? 'localhost:7233';
  connect.connectionOptions.address = address;
  const namespace = connect.namespace ?? 'default';
  const taskQueue = text(env, 'TEMPORAL_TASK_QUEUE') ?? DEFAULT_TASK_QUEUE;
  const uiUrl = url(env, 'TEMPORAL_UI_URL') ?? defaultUiUrl(address);
  const payloadKeysFile = text(env, 'TEMPORAL_PAYLOAD_KEYS_FILE') ?? null;
  if (payloadKeysFile !== null) checkKeyRingFile(payloadKeysFile);
  return {
    connect: { ...connect, namespace },
    namespace,
    address,
    taskQueue,
    uiUrl,
    apiKeyFile,
    payloadKeysFile,
  };
}

/**
 * Fails the load when the payload key file holds no usable ring now, so that a process meant to
 * seal never starts writing plain text. The error names the file and why, never a key.
 */
function checkKeyRingFile(path: string): void {
  try {
    new FileKeyRing(path);
  } catch (err) {
    if (err instanceof PayloadKeyFileError)
      throw new ConfigError('TEMPORAL_PAYLOAD_KEYS_FILE', err.message, { cause: err });
    throw err;
  }
}

/**
 * The key in a key file now (TEMPORAL_API_KEY_FILE, AGENT_API_KEY_FILE), by the rules the worker
 * re-reads it with (visible ASCII, trimmed). The error names the file and why, never the content.
 */
function keyFromFile(setting: string, path: string): string {
  try {
    return new FileApiKey(path).current();
  } catch (err) {
    if (err instanceof ApiKeyFileError) throw new ConfigError(setting, err.message, { cause: err });
    throw err;
  }
}

/** The dev server serves its UI on the gRPC port + 1000; other servers need TEMPORAL_UI_URL. */
function defaultUiUrl(address: string): string | null {
  const match = /^(localhost|127\.0\.0\.1):(\d+)$/.exec(address);
  return match ? `http://${match[1]}:${Number(match[2]) + 1000}` : null;
}

/** Loads the Agent Job API settings. */
export function loadAgentApiSettings(env: Env = process.env): AgentApiSettings {
  const baseUrl = url(env, 'AGENT_API_BASE_URL');
  const where =
    'the live service is https://api.mintlify.com; `npm run simulator` serves http://127.0.0.1:8787';
  if (!baseUrl) throw new ConfigError('AGENT_API_BASE_URL', `is required (${where})`);
  refuseCleartextKey(env, baseUrl);
  try {
    checkProxyEnv(env);
  } catch (err) {
    // The message names the variable; its value may hold credentials and is never shown.
    throw new ConfigError('HTTPS_PROXY/HTTP_PROXY', (err as Error).message, { cause: err });
  }
  const direct = env.AGENT_API_KEY;
  const file = text(env, 'AGENT_API_KEY_FILE') ?? null;
  if (direct && file)
    throw new ConfigError('AGENT_API_KEY', 'set AGENT_API_KEY or AGENT_API_KEY_FILE, not both');
  const apiKey = file === null ? (direct ?? '').trim() : keyFromFile('AGENT_API_KEY_FILE', file);
  if (!apiKey)
    throw new ConfigError('AGENT_API_KEY', 'is required (or AGENT_API_KEY_FILE for a mounted secret)');
  if (/\s/.test(apiKey)) throw new ConfigError('AGENT_API_KEY', 'must not contain white space');
  const ambiguousCreatePolicy = setting(env, 'AGENT_API_AMBIGUOUS_CREATE', 'retry', oneOf('retry', 'fail'));
  return { baseUrl, apiKey, apiKeyFile: file, ambiguousCreatePolicy };
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
  const memory = sizeForMemory({
    limit: setting(env, 'WORKER_MEMORY_LIMIT', null, MEMORY_LIMIT) ?? containerLimit(),
    explicitCache: setting(env, 'WORKER_MAX_CACHED_WORKFLOWS', undefined, wholeNumber(0)),
    fallbackCache: DEFAULT_MAX_CACHED_WORKFLOWS,
  });
  const versioning = loadVersioningSettings(env);
  return {
    temporal,
    agentApi,
    maxConcurrentActivities: setting(env, 'WORKER_MAX_CONCURRENT_ACTIVITIES', 200, wholeNumber(1)),
    maxConcurrentWorkflowTasks: setting(env, 'WORKER_MAX_CONCURRENT_WORKFLOW_TASKS', 100, wholeNumber(2)),
    maxCachedWorkflows: memory.maxCachedWorkflows,
    memory,
    activitiesPerSecond: setting(env, 'WORKER_ACTIVITIES_PER_SECOND', undefined, POSITIVE),
    shutdownGraceMs: setting(env, 'WORKER_SHUTDOWN_GRACE', 30_000, DURATION),
    // Loopback by default: health and metrics have no auth. Deployments whose probes or scrapers
    // come from outside the process's host set 0.0.0.0 (deploy/k8s, docker-compose.yml).
    healthAddress: setting(env, 'HEALTH_ADDRESS', { host: '127.0.0.1', port: 8080 }, HOST_PORT),
    metricsBindAddress: setting(env, 'METRICS_ADDRESS', '127.0.0.1:9464', {
      parse: (value) => (value === 'off' ? null : HOST_PORT.parse(value) && value),
      mustBe: 'host:port or off',
    }),
    metricsMaxProjects: setting(env, 'METRICS_MAX_PROJECTS', 100, wholeNumber(1)),
    logLevel: setting(env, 'LOG_LEVEL', 'INFO', oneOf('DEBUG', 'INFO', 'WARN', 'ERROR')),
    // A versioned worker's quota workflows follow the current version (src/workflows/project-quota/workflow.ts).
    projectQuota: { ...loadProjectQuotaSettings(env), followsRollouts: versioning.enabled },
    versioning,
    tracing: loadTracingSettings(env),
    notify: loadNotifySettings(env),
  };
}

/** Everything the codec server needs (`npm run codec-server`, docs/payload-codec.md). */
export interface CodecServerConfig {
  /** TEMPORAL_PAYLOAD_KEYS_FILE: the same ring the worker seals with, re-read when it changes. */
  payloadKeysFile: string;
  server: CodecServerSettings;
  logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
}

/** The environment variables the codec server reads (docs/configuration.md). */
export const CODEC_SERVER_SETTINGS = [
  'TEMPORAL_PAYLOAD_KEYS_FILE',
  'CODEC_SERVER_ADDRESS',
  'CODEC_SERVER_ALLOWED_ORIGINS',
  'CODEC_SERVER_ALLOW_CREDENTIALS',
  'CODEC_SERVER_OIDC_ISSUER',
  'CODEC_SERVER_OIDC_AUDIENCE',
  'CODEC_SERVER_OIDC_JWKS_URL',
  'CODEC_SERVER_OIDC_REQUIRED_CLAIM',
  'LOG_LEVEL',
] as const;

/**
 * Loads the codec server's settings. Without CODEC_SERVER_OIDC_ISSUER it runs on the local-only
 * allowance, which only a loopback CODEC_SERVER_ADDRESS may use: anything else is refused here, so
 * an open codec server never starts.
 */
export function loadCodecServerConfig(env: Env = process.env): CodecServerConfig {
  const payloadKeysFile = text(env, 'TEMPORAL_PAYLOAD_KEYS_FILE');
  if (payloadKeysFile === undefined)
    throw new ConfigError(
      'TEMPORAL_PAYLOAD_KEYS_FILE',
      'is required: the codec server opens payloads with that ring',
    );
  checkKeyRingFile(payloadKeysFile);
  // Loopback by default: the local-only allowance, the dev stack's.
  const { host, port } = setting(env, 'CODEC_SERVER_ADDRESS', { host: '127.0.0.1', port: 8888 }, HOST_PORT);
  const listenHost = host.replace(/^\[(.*)\]$/, '$1');
  const accessToken = loadAccessTokenPolicy(env);
  if (
    accessToken === null &&
    !isLoopbackHost(host.includes(':') && !host.startsWith('[') ? `[${host}]` : host)
  )
    throw new ConfigError(
      'CODEC_SERVER_ADDRESS',
      `${host} is not loopback, and without CODEC_SERVER_OIDC_ISSUER the codec server has no authorization: set CODEC_SERVER_OIDC_ISSUER and CODEC_SERVER_OIDC_AUDIENCE, or bind to 127.0.0.1`,
    );
  return {
    payloadKeysFile,
    server: {
      host: listenHost,
      port,
      allowedOrigins: setting(env, 'CODEC_SERVER_ALLOWED_ORIGINS', [], ORIGINS),
      allowCredentials:
        setting(env, 'CODEC_SERVER_ALLOW_CREDENTIALS', 'false', oneOf('true', 'false')) === 'true',
      accessToken,
    },
    logLevel: setting(env, 'LOG_LEVEL', 'INFO', oneOf('DEBUG', 'INFO', 'WARN', 'ERROR')),
  };
}

/** The OIDC settings, all or none: an issuer without an audience would accept any of its tokens. */
function loadAccessTokenPolicy(env: Env): AccessTokenPolicy | null {
  const issuer = setting(env, 'CODEC_SERVER_OIDC_ISSUER', null, HTTPS_URL);
  const audience = text(env, 'CODEC_SERVER_OIDC_AUDIENCE') ?? null;
  const jwksUrl = setting(env, 'CODEC_SERVER_OIDC_JWKS_URL', null, HTTPS_URL);
  const requiredClaim = setting(env, 'CODEC_SERVER_OIDC_REQUIRED_CLAIM', null, CLAIM);
  if (issuer === null) {
    const stray = [
      'CODEC_SERVER_OIDC_AUDIENCE',
      'CODEC_SERVER_OIDC_JWKS_URL',
      'CODEC_SERVER_OIDC_REQUIRED_CLAIM',
    ].find((name) => text(env, name) !== undefined);
    if (stray) throw new ConfigError(stray, 'takes effect only with CODEC_SERVER_OIDC_ISSUER');
    return null;
  }
  if (audience === null)
    throw new ConfigError(
      'CODEC_SERVER_OIDC_AUDIENCE',
      'is required with CODEC_SERVER_OIDC_ISSUER (the aud the tokens must name)',
    );
  return { issuer, audience, jwksUrl, requiredClaim };
}

/**
 * An issuer or JWKS URL, kept exactly as written (an issuer's trailing slash is part of its `iss`).
 * https, or http to a loopback host (a local identity provider, the tests): keys fetched over
 * plain HTTP from elsewhere could be replaced on the way.
 */
const HTTPS_URL: Kind<string> = {
  parse: (value) => {
    if (!URL.canParse(value)) return undefined;
    const url = new URL(value);
    if (url.username || url.password) return undefined;
    return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname))
      ? value
      : undefined;
  },
  mustBe: 'an https URL (http only to a loopback host), without credentials',
};

/** Exact web origins, comma-separated: `scheme://host[:port]`, as a browser sends `Origin`. */
const ORIGINS: Kind<string[]> = {
  parse: (value) => {
    const origins = value
      .split(',')
      .map((origin) => origin.trim())
      .filter(Boolean);
    const exact = origins.every((origin) => URL.canParse(origin) && new URL(origin).origin === origin);
    return exact && origins.length > 0 ? origins : undefined;
  },
  mustBe:
    'comma-separated origins such as "https://temporal.example.com" (scheme, host and port only, no path or trailing slash)',
};

/** `name=value`: a claim the token must hold. */
const CLAIM: Kind<{ name: string; value: string }> = {
  parse: (value) => {
    const match = /^([^=\s]+)=(\S+)$/.exec(value);
    return match ? { name: match[1] as string, value: match[2] as string } : undefined;
  },
  mustBe: '"<claim>=<value>", such as "groups=temporal-codec" or "scope=codec:decode"',
};

/**
 * AGENT_NOTIFY_TARGETS_FILE or AGENT_NOTIFY_TARGETS (one JSON object, a target per name), and
 * AGENT_NOTIFY_RETRY_FOR. Targets that cannot be used stop the start, as a bad API key file does;
 * the error names the setting and the target's field, never a URL or secret.
 */
export function loadNotifySettings(env: Env = process.env): NotifySettings | null {
  const file = text(env, 'AGENT_NOTIFY_TARGETS_FILE') ?? null;
  const inline = text(env, 'AGENT_NOTIFY_TARGETS');
  const retryForMs = setting(env, 'AGENT_NOTIFY_RETRY_FOR', DEFAULT_NOTIFY_RETRY_FOR_MS, DURATION);
  if (file !== null && inline !== undefined)
    throw new ConfigError(
      'AGENT_NOTIFY_TARGETS_FILE',
      'set AGENT_NOTIFY_TARGETS or AGENT_NOTIFY_TARGETS_FILE, not both',
    );
  if (retryForMs < 1_000) throw new ConfigError('AGENT_NOTIFY_RETRY_FOR', 'must be at least 1s');
  if (file !== null) {
    try {
      return { file, targets: new FileNotifyTargets(file).current(), retryForMs };
    } catch (err) {
      if (err instanceof NotifyTargetsError)
        throw new ConfigError('AGENT_NOTIFY_TARGETS_FILE', err.message, { cause: err });
      throw err;
    }
  }
  if (inline === undefined) return null;
  const parsed = parseNotifyTargets(inline);
  // The reason names a target and a field, never the text: it holds URLs and secrets.
  if ('reason' in parsed) throw new ConfigError('AGENT_NOTIFY_TARGETS', parsed.reason);
  return { file: null, targets: parsed.value, retryForMs };
}

/**
 * Tracing from the standard OTEL_* variables: on when an OTLP endpoint is set (or
 * OTEL_TRACES_EXPORTER=console), off when none is, or OTEL_SDK_DISABLED=true, or
 * OTEL_TRACES_EXPORTER=none. The exporter reads the rest (headers, timeout, batching) itself.
 */
export function loadTracingSettings(env: Env = process.env): TracingSettings {
  const off: TracingSettings = { exporter: null, endpoint: null };
  if (text(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return off;
  const exporter = setting(env, 'OTEL_TRACES_EXPORTER', 'otlp', oneOf('otlp', 'console', 'none'));
  if (exporter === 'none') return off;
  if (exporter === 'console') return { exporter: 'console', endpoint: null };
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
  const mode = setting(env, 'TEMPORAL_WORKER_VERSIONING', 'off', oneOf('on', 'off'));
  return {
    enabled: mode === 'on',
    deploymentName: setting(env, 'TEMPORAL_DEPLOYMENT_NAME', DEFAULT_DEPLOYMENT_NAME, DEPLOYMENT_NAME),
    buildIdOverride: setting(env, 'TEMPORAL_WORKER_BUILD_ID', null, VERSION_FIELD),
    // On unless a person decides otherwise: the override is for a run they know can never be
    // replayed and mean to end by hand (docs/versioning.md, "Upgrades").
    upgradeCheck: setting(env, 'WORKER_UPGRADE_CHECK', 'on', oneOf('on', 'off')) === 'on',
  };
}

/** A build ID or deployment name. */
const VERSION_FIELD: Kind<string> = {
  parse: (value) =>
    value.length <= MAX_VERSION_FIELD_LENGTH && /^(?!__)\S+$/.test(value) ? value : undefined,
  mustBe: `at most ${MAX_VERSION_FIELD_LENGTH} characters without white space, not starting with "__"`,
};

const DEPLOYMENT_NAME: Kind<string> = {
  parse: (value) => (/[.:]/.test(value) ? undefined : VERSION_FIELD.parse(value)),
  mustBe: `${VERSION_FIELD.mustBe}, without "." or ":" (the server joins name and build ID with them)`,
};

/** WORKER_MEMORY_LIMIT, a quantity such as `1Gi`, for a limit the cgroup does not show. */
const MEMORY_LIMIT: Kind<MemoryLimit> = {
  parse: (value) => {
    const bytes = parseMemoryQuantity(value);
    return bytes === null ? undefined : { bytes, source: 'WORKER_MEMORY_LIMIT' };
  },
  mustBe: 'a memory size such as 1Gi or 1536Mi',
};

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
  const allow = setting(env, 'AGENT_API_ALLOW_INSECURE_HTTP', 'false', oneOf('true', 'false'));
  const url = new URL(baseUrl);
  if (url.protocol !== 'http:' || allow === 'true' || isLoopbackHost(url.hostname)) return;
  throw new ConfigError(
    'AGENT_API_BASE_URL',
    `${baseUrl} would send the admin API key in cleartext to ${url.hostname}: use https, or set AGENT_API_ALLOW_INSECURE_HTTP=true for a server on a network you trust (a simulator)`,
  );
}

/** A kind of setting: how its text is read (undefined when it is not one), and what it must be. */
interface Kind<T> {
  parse(value: string): T | undefined;
  mustBe: string;
}

/**
 * The one way a setting is read: absent or blank, `fallback`; else what its `kind` makes of it, or a
 * {@link ConfigError} saying what it must be.
 */
function setting<T, F>(env: Env, name: string, fallback: F, kind: Kind<T>): T | F {
  const value = text(env, name);
  if (value === undefined) return fallback;
  const parsed = kind.parse(value);
  if (parsed === undefined) throw new ConfigError(name, `must be ${kind.mustBe}, not "${value}"`);
  return parsed;
}

/** One of `options`, in any case. */
function oneOf<const T extends string>(...options: T[]): Kind<T> {
  const quoted = options.map((option) => `"${option}"`);
  return {
    parse: (value) => options.find((option) => option.toLowerCase() === value.toLowerCase()),
    mustBe: `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`,
  };
}

/** A number that passes `ok`. */
function numeric(ok: (n: number) => boolean, mustBe: string): Kind<number> {
  return { parse: (value) => (ok(Number(value)) ? Number(value) : undefined), mustBe };
}

/** A whole number of at least `min`. */
const wholeNumber = (min: number) =>
  numeric((n) => Number.isInteger(n) && n >= min, `a whole number of at least ${min}`);

const POSITIVE = numeric((n) => Number.isFinite(n) && n > 0, 'a positive number');

/** Milliseconds, from a plain number of them or a duration such as `30s`. */
const DURATION: Kind<number> = {
  parse: (value) => {
    const ms = durationMs(/^\d+$/.test(value) ? Number(value) : value);
    return ms !== undefined && ms >= 0 ? ms : undefined;
  },
  mustBe: 'a duration such as "30s"',
};

const HOST_PORT: Kind<{ host: string; port: number }> = {
  parse: (value) => {
    const match = /^(.*):(\d+)$/.exec(value);
    const port = match ? Number(match[2]) : NaN;
    return match?.[1] && port <= 65_535 ? { host: match[1], port } : undefined;
  },
  mustBe: 'host:port',
};
