/** The configuration loader: defaults, the standard Temporal settings, key files, and clear errors. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ConfigError } from '../../src/config/settings.js';
import { loadTemporalSettings } from '../../src/config/temporal.js';
import { loadTracingSettings } from '../../src/config/tracing.js';
import { loadWorkerConfig, WORKER_SETTINGS } from '../../src/config/worker.js';
import { formatQuotaLimit, quotaLimitFor } from '../../src/quota/settings.js';

const dir = mkdtempSync(join(tmpdir(), 'config-test-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const base = {
  AGENT_API_BASE_URL: 'http://127.0.0.1:8787/',
  AGENT_API_KEY: 'k-123',
  TEMPORAL_CONFIG_FILE: join(dir, 'none.toml'),
};

test('defaults: local Temporal, task queue agent-jobs, health 8080 and metrics 9464 on loopback, retry policy', () => {
  const config = loadWorkerConfig(base);
  assert.equal(config.temporal.address, 'localhost:7233');
  assert.equal(config.temporal.namespace, 'default');
  assert.equal(config.temporal.taskQueue, 'agent-jobs');
  assert.equal(config.temporal.uiUrl, 'http://localhost:8233');
  assert.equal(config.agentApi.AGENT_API_BASE_URL, 'http://127.0.0.1:8787');
  assert.equal(config.agentApi.AGENT_API_AMBIGUOUS_CREATE, 'retry');
  assert.deepEqual(config.HEALTH_ADDRESS, { host: '127.0.0.1', port: 8080 });
  assert.equal(config.METRICS_ADDRESS, '127.0.0.1:9464');
  assert.equal(config.workerOptions.shutdownGraceTime, 30_000);
});

test('the standard TEMPORAL_* settings reach the connection through envconfig', () => {
  const settings = loadTemporalSettings({
    ...base,
    TEMPORAL_ADDRESS: 'my-ns.acct.tmprl.cloud:7233',
    TEMPORAL_NAMESPACE: 'my-ns.acct',
    TEMPORAL_API_KEY: 'cloud-key',
    TEMPORAL_TASK_QUEUE: 'docs-jobs',
  });
  assert.equal(settings.address, 'my-ns.acct.tmprl.cloud:7233');
  assert.equal(settings.namespace, 'my-ns.acct');
  assert.equal(settings.connect.connectionOptions.apiKey, 'cloud-key');
  assert.equal(settings.taskQueue, 'docs-jobs');
  assert.equal(settings.uiUrl, null, 'no guessed UI link for a remote server');
});

test('health and metrics bind elsewhere only when HEALTH_ADDRESS and METRICS_ADDRESS say so', () => {
  const config = loadWorkerConfig({
    ...base,
    HEALTH_ADDRESS: '0.0.0.0:8080',
    METRICS_ADDRESS: '0.0.0.0:9464',
  });
  assert.deepEqual(config.HEALTH_ADDRESS, { host: '0.0.0.0', port: 8080 });
  assert.equal(config.METRICS_ADDRESS, '0.0.0.0:9464');
});

test('an http base URL to another host than loopback is refused unless AGENT_API_ALLOW_INSECURE_HTTP=true', () => {
  for (const url of [
    'http://api.mintlify.com',
    'http://simulator:8787',
    'http://10.0.0.7:8787',
    'http://[fd00::1]:80',
  ]) {
    assert.throws(
      () => loadWorkerConfig({ ...base, AGENT_API_BASE_URL: url }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.setting === 'AGENT_API_BASE_URL' &&
        /cleartext/.test(err.message) &&
        /AGENT_API_ALLOW_INSECURE_HTTP=true/.test(err.message),
      url,
    );
    const allowed = loadWorkerConfig({
      ...base,
      AGENT_API_BASE_URL: url,
      AGENT_API_ALLOW_INSECURE_HTTP: 'true',
    });
    assert.equal(allowed.agentApi.AGENT_API_BASE_URL, url);
  }
  for (const url of [
    'http://127.0.0.1:8787',
    'http://localhost:8787',
    'http://[::1]:8787',
    'http://127.0.0.2',
    'https://api.mintlify.com',
  ]) {
    assert.equal(loadWorkerConfig({ ...base, AGENT_API_BASE_URL: url }).agentApi.AGENT_API_BASE_URL, url);
  }
  assert.throws(
    () => loadWorkerConfig({ ...base, AGENT_API_ALLOW_INSECURE_HTTP: 'yes' }),
    (err: unknown) => err instanceof ConfigError && err.setting === 'AGENT_API_ALLOW_INSECURE_HTTP',
  );
});

test('AGENT_API_KEY_FILE reads a mounted secret, trimmed', () => {
  const file = join(dir, 'key');
  writeFileSync(file, 'mint_from_file\n');
  const config = loadWorkerConfig({ ...base, AGENT_API_KEY: undefined, AGENT_API_KEY_FILE: file });
  assert.equal(config.agentApi.AGENT_API_KEY, 'mint_from_file');
});

test('AGENT_API_KEY_FILE is read by the rules the worker re-reads it with: an empty or malformed file is refused, naming it', () => {
  const empty = join(dir, 'agent-empty-key');
  writeFileSync(empty, ' \n');
  const malformed = join(dir, 'agent-malformed-key');
  writeFileSync(malformed, 'secret_one secret_two');
  for (const [file, pattern] of [
    [empty, /agent-empty-key: it is empty$/],
    [malformed, /agent-malformed-key: the key must be visible ASCII/],
  ] as const) {
    assert.throws(
      () => loadWorkerConfig({ ...base, AGENT_API_KEY: undefined, AGENT_API_KEY_FILE: file }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.setting === 'AGENT_API_KEY_FILE' &&
        pattern.test(err.message) &&
        !err.message.includes('secret_'),
      file,
    );
  }
});

test('TEMPORAL_API_KEY_FILE gives the connection the file\u2019s key, as TEMPORAL_API_KEY would (TLS on)', () => {
  const file = join(dir, 'temporal-key');
  writeFileSync(file, 'temporal_from_file\n');
  const fromFile = loadTemporalSettings({ ...base, TEMPORAL_API_KEY_FILE: file });
  const fromEnv = loadTemporalSettings({ ...base, TEMPORAL_API_KEY: 'temporal_from_file' });
  assert.equal(fromFile.connect.connectionOptions.apiKey, 'temporal_from_file');
  assert.deepEqual(fromFile.connect, fromEnv.connect);
  assert.equal(fromFile.apiKeyFile, file);
  assert.equal(fromEnv.apiKeyFile, null);
  // A profile's api_key gives way to the file, as it does to TEMPORAL_API_KEY.
  const profile = join(dir, 'profile.toml');
  writeFileSync(profile, '[profile.default]\naddress = "x.tmprl.cloud:7233"\napi_key = "from_profile"\n');
  const over = loadTemporalSettings({ ...base, TEMPORAL_CONFIG_FILE: profile, TEMPORAL_API_KEY_FILE: file });
  assert.equal(over.address, 'x.tmprl.cloud:7233', 'the profile was read');
  assert.equal(over.connect.connectionOptions.apiKey, 'temporal_from_file');
  assert.equal(loadWorkerConfig({ ...base, TEMPORAL_API_KEY_FILE: file }).temporal.apiKeyFile, file);
});

test('TEMPORAL_API_KEY_FILE: both keys, a missing, empty or malformed file are ConfigErrors naming the file, never the key', () => {
  const file = join(dir, 'temporal-key-2');
  writeFileSync(file, 'secret_in_the_file');
  const refused = (env: Record<string, string>, pattern: RegExp) =>
    assert.throws(
      () => loadTemporalSettings({ ...base, ...env }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError, String(err));
        assert.equal(err.setting, 'TEMPORAL_API_KEY_FILE');
        assert.match(err.message, pattern);
        assert.ok(!err.message.includes('secret_'), err.message);
        return true;
      },
    );
  refused(
    { TEMPORAL_API_KEY: 'secret_in_env', TEMPORAL_API_KEY_FILE: file },
    /^TEMPORAL_API_KEY_FILE: set TEMPORAL_API_KEY or TEMPORAL_API_KEY_FILE, not both$/,
  );
  const missing = join(dir, 'no-such-key');
  refused(
    { TEMPORAL_API_KEY_FILE: missing },
    /^TEMPORAL_API_KEY_FILE: \/.*\/no-such-key: cannot read it: ENOENT$/,
  );
  const empty = join(dir, 'empty-key');
  writeFileSync(empty, ' \n');
  refused({ TEMPORAL_API_KEY_FILE: empty }, /empty-key: it is empty$/);
  const malformed = join(dir, 'malformed-key');
  writeFileSync(malformed, 'secret_one secret_two');
  refused({ TEMPORAL_API_KEY_FILE: malformed }, /malformed-key: the key must be visible ASCII/);
  // The worker stops on it like on any setting (exit code 2).
  assert.throws(
    () => loadWorkerConfig({ ...base, TEMPORAL_API_KEY_FILE: missing }),
    (err: unknown) => err instanceof ConfigError && err.setting === 'TEMPORAL_API_KEY_FILE',
  );
});

test('each bad setting is a ConfigError naming it, and never echoes the key', () => {
  const cases: Array<[Record<string, string | undefined>, string]> = [
    [{ AGENT_API_BASE_URL: undefined }, 'AGENT_API_BASE_URL'],
    [{ AGENT_API_BASE_URL: 'https://user:pw@example.com' }, 'AGENT_API_BASE_URL'],
    [{ AGENT_API_KEY: 'has space' }, 'AGENT_API_KEY'],
    [{ AGENT_API_KEY_FILE: join(dir, 'key') }, 'AGENT_API_KEY'],
    [{ WORKER_SHUTDOWN_GRACE: 'later' }, 'WORKER_SHUTDOWN_GRACE'],
    [{ HEALTH_ADDRESS: '8080' }, 'HEALTH_ADDRESS'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ WORKER_ACTIVITIES_PER_SECOND: '-1' }, 'WORKER_ACTIVITIES_PER_SECOND'],
    [{ AGENT_API_PROJECT_QUOTA: '100 per hour' }, 'AGENT_API_PROJECT_QUOTA'],
    [{ AGENT_API_PROJECT_QUOTA: '0/1h' }, 'AGENT_API_PROJECT_QUOTA'],
    [{ AGENT_API_PROJECT_QUOTA: '3/500ms' }, 'AGENT_API_PROJECT_QUOTA'],
    [{ AGENT_API_PROJECT_QUOTA_OVERRIDES: 'docs-a=10/1h' }, 'AGENT_API_PROJECT_QUOTA_OVERRIDES'],
    [{ AGENT_API_PROJECT_QUOTA_OVERRIDES: '{"docs-a": 10}' }, 'AGENT_API_PROJECT_QUOTA_OVERRIDES'],
    [{ AGENT_API_PROJECT_QUOTA_LEASE: 'soon' }, 'AGENT_API_PROJECT_QUOTA_LEASE'],
  ];
  for (const [overrides, setting] of cases) {
    assert.throws(
      () => loadWorkerConfig({ ...base, ...overrides }),
      (err: unknown) =>
        err instanceof ConfigError && err.setting === setting && !err.message.includes('has space'),
      setting,
    );
  }
});

test('an error names the setting and never quotes its value (a key file is named by its path)', () => {
  const marker = 'value-never-shown';
  const refused: string[] = [];
  for (const setting of WORKER_SETTINGS.filter((name) => !name.endsWith('_FILE'))) {
    try {
      loadWorkerConfig({ ...base, [setting]: `${marker} :/x` }, () => null);
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      assert.equal(err.setting, setting);
      assert.ok(!err.message.includes(marker), err.message);
      assert.equal(err.message.split('\n').length, 1, err.message);
      refused.push(setting);
    }
  }
  // Every setting refuses it but the task queue, a free-form name.
  assert.deepEqual(
    WORKER_SETTINGS.filter((name) => !name.endsWith('_FILE') && !refused.includes(name)),
    ['TEMPORAL_TASK_QUEUE'],
  );
});

test('AGENT_API_PROJECT_QUOTA: 100/1h by default, <uses>/<window>, off, per-project overrides and the lease', () => {
  const defaults = loadWorkerConfig(base).projectQuota;
  assert.deepEqual(defaults, {
    defaultLimit: { uses: 100, windowMs: 3_600_000 },
    overrides: {},
    leaseMs: 120_000,
    followsRollouts: false,
  });
  // A versioned worker's quota workflows follow rollouts (AUTO_UPGRADE, docs/versioning.md).
  assert.equal(
    loadWorkerConfig({ ...base, TEMPORAL_WORKER_VERSIONING: 'on' }).projectQuota.followsRollouts,
    true,
  );
  const set = loadWorkerConfig({
    ...base,
    AGENT_API_PROJECT_QUOTA: ' 3/20s ',
    AGENT_API_PROJECT_QUOTA_OVERRIDES: '{"docs-big": "500/1h", "docs-own-key": "off"}',
    AGENT_API_PROJECT_QUOTA_LEASE: '45s',
  }).projectQuota;
  assert.deepEqual(set.defaultLimit, { uses: 3, windowMs: 20_000 });
  assert.deepEqual(set.overrides, { 'docs-big': { uses: 500, windowMs: 3_600_000 }, 'docs-own-key': null });
  assert.equal(set.leaseMs, 45_000);
  assert.equal(quotaLimitFor(set, 'docs-big')?.uses, 500);
  assert.equal(quotaLimitFor(set, 'docs-own-key'), null, 'an override can turn the quota off');
  assert.deepEqual(quotaLimitFor(set, 'docs-other'), { uses: 3, windowMs: 20_000 });
  assert.equal(loadWorkerConfig({ ...base, AGENT_API_PROJECT_QUOTA: 'off' }).projectQuota.defaultLimit, null);
  assert.equal(formatQuotaLimit({ uses: 100, windowMs: 3_600_000 }), '100/1h');
  assert.equal(formatQuotaLimit({ uses: 3, windowMs: 20_000 }), '3/20s');
  assert.equal(formatQuotaLimit(null), 'off');
});

test('tracing follows the standard OTEL_* variables: on with an OTLP endpoint, off without one or when disabled', () => {
  const endpoint = 'https://collector.example.com:4318';
  assert.deepEqual(loadTracingSettings({}), { exporter: null, endpoint: null });
  assert.deepEqual(loadTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }), {
    exporter: 'otlp',
    endpoint,
  });
  assert.deepEqual(
    loadTracingSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${endpoint}/v1/traces?token=secret` }),
    { exporter: 'otlp', endpoint },
    'only the origin is kept for the log line',
  );
  for (const off of [{ OTEL_SDK_DISABLED: 'true' }, { OTEL_TRACES_EXPORTER: 'none' }]) {
    assert.equal(loadTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, ...off }).exporter, null);
  }
  assert.equal(loadTracingSettings({ OTEL_TRACES_EXPORTER: 'console' }).exporter, 'console');
  assert.equal(loadWorkerConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }).tracing.exporter, 'otlp');
  const refused: Array<[Record<string, string>, RegExp]> = [
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, /^OTEL_TRACES_EXPORTER: must be "otlp", "console" or "none"/],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      /^OTEL_EXPORTER_OTLP_ENDPOINT: must be an http\(s\) URL/,
    ],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      /^OTEL_EXPORTER_OTLP_PROTOCOL: .*"http\/json".*OTLP\/HTTP port/,
    ],
  ];
  for (const [vars, message] of refused) {
    assert.throws(
      () => loadTracingSettings(vars),
      (err: unknown) => err instanceof ConfigError && message.test(err.message),
    );
  }
});

test('a proxy variable that is not an http(s) URL is refused at start, naming it but not its value', () => {
  const secret = 'p4ss-word-not-shown';
  for (const [name, value] of [
    ['HTTPS_PROXY', `socks5://user:${secret}@proxy:1080`],
    ['http_proxy', `ftp://user:${secret}@proxy:21`],
  ] as const) {
    assert.throws(
      () => loadWorkerConfig({ ...base, [name]: value }),
      (err: unknown) =>
        err instanceof ConfigError && err.message.includes(name) && !err.message.includes(secret),
      name,
    );
  }
  // A proxy given as host:port alone is taken as http://, as curl takes it.
  assert.doesNotThrow(() => loadWorkerConfig({ ...base, HTTPS_PROXY: 'proxy.internal:3128' }));
});

test('TEMPORAL_PAYLOAD_KEYS_FILE: off by default; a usable ring is kept by path; a bad one is a ConfigError naming the file, never a key', () => {
  assert.equal(loadTemporalSettings(base).payloadKeysFile, null);
  const file = join(dir, 'payload-keys');
  const key = Buffer.alloc(32, 7).toString('base64');
  writeFileSync(file, `k1 ${key}\n`);
  assert.equal(
    loadWorkerConfig({ ...base, TEMPORAL_PAYLOAD_KEYS_FILE: file }).temporal.payloadKeysFile,
    file,
  );
  const short = join(dir, 'payload-keys-short');
  writeFileSync(short, `k1 ${key.slice(0, 20)}\n`);
  assert.throws(
    () => loadTemporalSettings({ ...base, TEMPORAL_PAYLOAD_KEYS_FILE: short }),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      assert.equal(err.setting, 'TEMPORAL_PAYLOAD_KEYS_FILE');
      assert.match(err.message, /payload-keys-short: key k1 is 15 bytes, not 32$/);
      assert.ok(!err.message.includes(key.slice(0, 20)), err.message);
      return true;
    },
  );
});
