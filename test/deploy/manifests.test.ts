/**
 * Checks of docker-compose.yml and deploy/k8s against what they deploy: the settings the worker's
 * configuration loader reads, its health and metrics ports, its shutdown grace, the contract's
 * search attributes, the Kubernetes and KEDA schemas, and a real Compose validator.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  ScaledObject,
  TriggerAuthentication,
  type IScaledObject,
  type ITriggerAuthentication,
} from '@kubernetes-models/keda/keda.sh/v1alpha1';
import { SearchAttributeType, type Duration } from '@temporalio/common';
import { msToNumber } from '@temporalio/common/lib/time.js';
import { Deployment } from 'kubernetes-models/apps/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { parse, parseAllDocuments } from 'yaml';
import { CODEC_SERVER_SETTINGS, loadCodecServerConfig } from '../../src/config/codec-server.js';
import { loadWorkerConfig, WORKER_SETTINGS } from '../../src/config/worker.js';
import { findOnPath } from '../../dev/temporal-cli.js';
import { ALL_SEARCH_ATTRIBUTES, DEFAULT_TASK_QUEUE } from '../../src/contract.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'deploy-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
/** A payload key ring standing in for the mounted Secret's, which exists only in a pod. */
const RING_FILE = join(scratch, 'payload-keys');
writeFileSync(RING_FILE, `k1 ${randomBytes(32).toString('base64')}\n`);

/**
 * What @temporalio/envconfig reads from the environment (node_modules/@temporalio/envconfig/lib),
 * listed by name so that a misspelled TLS variable is caught rather than silently ignored.
 */
const ENVCONFIG_SETTINGS = [
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_API_KEY',
  'TEMPORAL_PROFILE',
  'TEMPORAL_CONFIG_FILE',
  'TEMPORAL_TLS',
  'TEMPORAL_TLS_CLIENT_CERT_PATH',
  'TEMPORAL_TLS_CLIENT_CERT_DATA',
  'TEMPORAL_TLS_CLIENT_KEY_PATH',
  'TEMPORAL_TLS_CLIENT_KEY_DATA',
  'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
  'TEMPORAL_TLS_SERVER_CA_CERT_DATA',
  'TEMPORAL_TLS_SERVER_NAME',
  'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION',
];

const WORKER_ENV = new Set<string>([...WORKER_SETTINGS, ...ENVCONFIG_SETTINGS, 'NODE_ENV']);

function assertWorkerSettings(names: Iterable<string>, where: string): void {
  const unknown = [...names].filter((name) => !WORKER_ENV.has(name));
  assert.deepEqual(unknown, [], `${where} sets variables the worker never reads`);
}

/** Defaults of the configuration loader, the reference for ports and grace. */
const defaults = loadWorkerConfig({
  AGENT_API_BASE_URL: 'https://simulator.invalid',
  AGENT_API_KEY: 'placeholder',
});

function portOf(address: string): number {
  const port = Number(/:(\d+)$/.exec(address)?.[1]);
  assert.ok(Number.isInteger(port), `${address} is not host:port`);
  return port;
}

const METRICS_PORT = portOf(defaults.METRICS_ADDRESS ?? '');

function record(value: unknown, what: string): Record<string, unknown> {
  assert.ok(
    value !== null && typeof value === 'object' && !Array.isArray(value),
    `${what} must be a mapping`,
  );
  return value as Record<string, unknown>;
}

function stringRecord(value: unknown, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, v] of Object.entries(record(value, what))) out[key] = String(v);
  return out;
}

/** The search attributes of the contract as NAME=Type, the form the Temporal CLI takes. */
function contractAttributes(): string[] {
  return ALL_SEARCH_ATTRIBUTES.map((key) => `${key.name}=${key.type}`).sort();
}

/** `AgentJobId=Keyword` → `AgentJobId=KEYWORD`: CLI type names are the SDK's without the underscore. */
function normalizeAttribute(pair: string): string {
  const [name, type = ''] = pair.split('=', 2);
  const sdkType = Object.values(SearchAttributeType).find((t) => t.replace('_', '') === type.toUpperCase());
  return `${name}=${sdkType ?? `unknown type ${type}`}`;
}

/** The parts of a Compose service that these checks read. */
interface ComposeService {
  image?: string;
  build?: { context?: string; dockerfile?: string; target?: string };
  environment?: Record<string, string | number | boolean>;
  command?: string[];
  volumes?: string[];
  ports?: string[];
  deploy?: { replicas?: number };
  depends_on?: Record<string, { condition?: string }>;
  container_name?: string;
  stop_grace_period?: string;
}

/** Compose's `${VAR:-default}`, `${VAR-default}` and `${VAR}` with an empty environment. */
function interpolate(value: string): string {
  return value.replace(
    /\$\{(\w+)(?::?-([^}]*))?\}/g,
    (_, _name: string, fallback?: string) => fallback ?? '',
  );
}

describe('docker-compose.yml', () => {
  // Merge keys (<<) are YAML 1.1, which Compose reads.
  const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, ComposeService>;
  };
  const services = compose.services;

  function service(name: string): ComposeService {
    const found = services[name];
    assert.ok(found, `docker-compose.yml has no service ${name}`);
    return found;
  }

  function environment(name: string): Record<string, string> {
    return Object.fromEntries(
      Object.entries(service(name).environment ?? {}).map(([key, value]) => [
        key,
        interpolate(String(value)),
      ]),
    );
  }

  test('is accepted by docker-compose (a real validator that needs no Docker engine)', () => {
    const binary = findOnPath('docker-compose');
    assert.ok(
      binary,
      'docker-compose is not installed, so the compose file cannot be validated. ' +
        "Install Debian's package: apt-get update && apt-get install -y docker-compose",
    );
    const result = spawnSync(binary, ['-f', 'docker-compose.yml', 'config', '-q'], {
      cwd: ROOT,
      encoding: 'utf8',
      // Only what the file's defaults give: a developer's own AGENT_API_* must not change the result.
      env: { PATH: process.env.PATH ?? '', HOME: scratch },
    });
    assert.equal(result.status, 0, `docker-compose config -q failed:\n${result.stderr}${result.stdout}`);
  });

  test('pins every image to a version', () => {
    for (const [name, { image }] of Object.entries(services)) {
      if (image === undefined) continue;
      assert.match(image, /^[\w./-]+:v?\d[\w.-]*$/, `service ${name} uses ${image}`);
    }
  });

  test('builds from contexts, Dockerfiles and targets that exist', () => {
    for (const [name, { build }] of Object.entries(services)) {
      if (build === undefined) continue;
      const dockerfile = join(ROOT, build.context ?? '.', build.dockerfile ?? 'Dockerfile');
      assert.ok(existsSync(dockerfile), `service ${name}: ${dockerfile} does not exist`);
      if (build.target === undefined) continue;
      const stages = [...readFileSync(dockerfile, 'utf8').matchAll(/^FROM\s+\S+\s+AS\s+(\S+)/gim)].map(
        (m) => m[1],
      );
      assert.ok(stages.includes(build.target), `service ${name}: no stage ${build.target} in the Dockerfile`);
    }
  });

  test('mounts host files that exist', () => {
    for (const [name, { volumes = [] }] of Object.entries(services)) {
      for (const volume of volumes) {
        const host = volume.split(':')[0] ?? '';
        if (!host.startsWith('.')) continue;
        assert.ok(existsSync(join(ROOT, host)), `service ${name} mounts ${host}, which does not exist`);
      }
    }
  });

  test('registers exactly the search attributes of the contract, in the namespace the workers use', () => {
    const command = service('temporal-init').command ?? [];
    assert.deepEqual(command.map(normalizeAttribute).sort(), contractAttributes());
    assert.equal(environment('temporal-init').TEMPORAL_NAMESPACE, environment('worker').TEMPORAL_NAMESPACE);
  });

  test('starts workers only after the namespace and search attributes exist', () => {
    const dependsOn = service('worker').depends_on ?? {};
    assert.deepEqual(dependsOn['temporal-init'], { condition: 'service_completed_successfully' });
    assert.deepEqual(dependsOn.simulator, { condition: 'service_healthy' });
  });

  test('runs three worker replicas that can coexist (no container_name, no host ports)', () => {
    const worker = service('worker');
    assert.equal(worker.deploy?.replicas, 3);
    assert.equal(worker.container_name, undefined);
    assert.equal(worker.ports, undefined);
    assert.equal(worker.build?.target, 'worker');
  });

  test('gives the worker only settings its configuration loader reads, with values it accepts', () => {
    const env = environment('worker');
    assertWorkerSettings(Object.keys(env), 'the compose worker service');
    const config = loadWorkerConfig(env);
    assert.equal(
      config.HEALTH_ADDRESS.port,
      defaults.HEALTH_ADDRESS.port,
      'the image health check probes the default port',
    );
    assert.equal(portOf(config.METRICS_ADDRESS ?? ''), METRICS_PORT);
    assert.equal(config.temporal.taskQueue, DEFAULT_TASK_QUEUE, 'the starter uses the default task queue');
  });

  test('points the worker at services of this file', () => {
    const env = environment('worker');
    const simulator = environment('simulator');
    const api = new URL(env.AGENT_API_BASE_URL ?? '');
    assert.equal(api.hostname, 'simulator');
    assert.equal(api.port, simulator.SIMULATOR_PORT);
    assert.equal(simulator.SIMULATOR_HOST, '0.0.0.0', 'the simulator must listen beyond its own container');
    assert.ok((simulator.SIMULATOR_API_KEYS ?? '').split(',').includes(env.AGENT_API_KEY ?? ''));
    const published = (service('temporal').ports ?? []).map((p) => p.split(':').at(-1));
    assert.ok(
      published.includes(env.TEMPORAL_ADDRESS?.replace(/^temporal:/, '')),
      'the worker uses the server port',
    );
    assert.match(env.TEMPORAL_ADDRESS ?? '', /^temporal:/);
  });

  /** The mount of a service whose container path is `target`: its host path, from the root. */
  function hostPathOf(service: ComposeService | undefined, target: string): string {
    const volume = (service?.volumes ?? []).find((v) => v.split(':')[1] === target);
    assert.ok(volume, `no volume mounted at ${target}`);
    return join(ROOT, volume.split(':')[0] ?? '');
  }

  test('Prometheus scrapes every worker replica at its metrics port, from files promtool accepts', () => {
    const promtool = findOnPath('promtool') ?? '';
    assert.ok(promtool, 'promtool is not installed (Debian: apt-get install -y prometheus)');
    const override = parse(readFileSync(join(ROOT, 'deploy/compose/versioned.yaml'), 'utf8'), {
      merge: true,
    }) as { services: Record<string, ComposeService> };
    const metricsPort = portOf(environment('worker').METRICS_ADDRESS ?? '');
    const stacks = [
      { prometheus: services.prometheus, workers: ['worker'] },
      {
        prometheus: override.services.prometheus,
        workers: Object.keys(override.services).filter((name) => name.startsWith('worker-')),
      },
    ];
    for (const { prometheus, workers } of stacks) {
      const file = hostPathOf(prometheus, '/etc/prometheus/prometheus.yml');
      const checked = spawnSync(promtool, ['check', 'config', file], { encoding: 'utf8' });
      assert.equal(checked.status, 0, `promtool check config ${file}:\n${checked.stderr}${checked.stdout}`);
      const config = parse(readFileSync(file, 'utf8')) as {
        scrape_configs: { dns_sd_configs?: { names: string[]; port: number }[] }[];
      };
      const discovered = config.scrape_configs.flatMap((job) => job.dns_sd_configs ?? []);
      assert.deepEqual(discovered.flatMap((sd) => sd.names).sort(), workers.sort(), file);
      for (const sd of discovered) assert.equal(sd.port, metricsPort, file);
    }
  });

  test('Grafana provisions the Prometheus data source and the dashboard that uses it', () => {
    const grafana = service('grafana');
    const datasources = parse(
      readFileSync(
        join(hostPathOf(grafana, '/etc/grafana/provisioning/datasources'), 'prometheus.yaml'),
        'utf8',
      ),
    ) as { datasources: { uid: string; type: string; url: string }[] };
    const providers = parse(
      readFileSync(
        join(hostPathOf(grafana, '/etc/grafana/provisioning/dashboards'), 'agent-jobs.yaml'),
        'utf8',
      ),
    ) as { providers: { options: { path: string } }[] };
    const [source] = datasources.datasources;
    assert.equal(source?.type, 'prometheus');
    assert.equal(source?.url, `http://prometheus:${(service('prometheus').ports ?? [])[0]?.split(':')[1]}`);
    const dashboardPath = environment('grafana').GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH ?? '';
    assert.equal(
      dashboardPath.slice(0, dashboardPath.lastIndexOf('/')),
      providers.providers[0]?.options.path,
    );
    const dashboard = JSON.parse(readFileSync(hostPathOf(grafana, dashboardPath), 'utf8')) as {
      panels: { datasource?: { uid: string } }[];
    };
    for (const panel of dashboard.panels.filter((p) => p.datasource)) {
      assert.equal(panel.datasource?.uid, source?.uid);
    }
  });

  test('lets the worker drain, forced end included, before Docker kills it', () => {
    const drainMs = Number(loadWorkerConfig(environment('worker')).workerOptions.shutdownForceTime);
    const stopMs = msToNumber(service('worker').stop_grace_period as Duration);
    assert.ok(
      stopMs > drainMs,
      `stop_grace_period (${stopMs} ms) must exceed the longest drain, WORKER_SHUTDOWN_GRACE + 10 s (${drainMs} ms)`,
    );
  });
});

describe('deploy/k8s', () => {
  const dir = join(ROOT, 'deploy/k8s');
  const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
  const documents = files.flatMap((file) =>
    parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((doc) => {
      assert.deepEqual(doc.errors, [], `${file} is not valid YAML`);
      return { file, body: record(doc.toJS(), file) };
    }),
  );

  function only(kind: string): Record<string, unknown> {
    const found = documents.filter((d) => d.body.kind === kind);
    assert.equal(found.length, 1, `expected one ${kind}`);
    return found[0]!.body;
  }

  function path(value: unknown, ...keys: (string | number)[]): unknown {
    let current = value;
    for (const key of keys) current = (current as Record<string | number, unknown> | undefined)?.[key];
    return current;
  }

  function named(kind: string, name: string): Record<string, unknown> {
    const found = documents.find((d) => d.body.kind === kind && path(d.body, 'metadata', 'name') === name);
    assert.ok(found, `no ${kind} ${name}`);
    return found.body;
  }

  const deployment = named('Deployment', 'agent-job-worker');
  const configMap = only('ConfigMap');
  const podSpec = record(path(deployment, 'spec', 'template', 'spec'), 'pod spec');
  const containers = podSpec.containers as Record<string, unknown>[];
  const container = containers[0]!;
  const containerEnv = (container.env as { name: string; value?: string; valueFrom?: unknown }[]) ?? [];
  const literalEnv = Object.fromEntries(
    containerEnv.filter((e) => e.value !== undefined).map((e) => [e.name, e.value ?? '']),
  );
  const configData = stringRecord(configMap.data, 'ConfigMap data');

  test('every manifest validates against the Kubernetes and KEDA schemas', () => {
    // The parsed YAML is untyped input: validate() is the check, the casts only reach it.
    const models: Record<string, (body: Record<string, unknown>) => { validate(): void }> = {
      'v1/ConfigMap': (b) => new ConfigMap(b),
      'v1/Secret': (b) => new Secret(b),
      'v1/Service': (b) => new Service(b),
      'apps/v1/Deployment': (b) => new Deployment(b),
      'policy/v1/PodDisruptionBudget': (b) => new PodDisruptionBudget(b),
      'keda.sh/v1alpha1/ScaledObject': (b) => new ScaledObject(b as unknown as IScaledObject),
      'keda.sh/v1alpha1/TriggerAuthentication': (b) =>
        new TriggerAuthentication(b as unknown as ITriggerAuthentication),
    };
    for (const { file, body } of documents) {
      if (body.kind === 'Kustomization') continue;
      const model = models[`${String(body.apiVersion)}/${String(body.kind)}`];
      assert.ok(model, `${file}: no schema for ${String(body.apiVersion)} ${String(body.kind)}`);
      assert.doesNotThrow(() => model(body).validate(), `${file}: ${String(body.kind)} is invalid`);
    }
  });

  test('the schema validation rejects a broken Deployment (the check above can fail)', () => {
    const broken = structuredClone(deployment);
    (
      path(broken, 'spec', 'template', 'spec', 'containers', 0, 'ports', 0) as Record<string, unknown>
    ).containerPort = 'http';
    assert.throws(() => new Deployment(broken).validate(), /containerPort/);
  });

  test('kustomization.yaml lists every manifest except the Secret example, and sets the worker image', () => {
    const kustomization = only('Kustomization');
    const resources = (kustomization.resources as string[]).slice().sort();
    const expected = files.filter((f) => f !== 'kustomization.yaml' && f !== 'secret.example.yaml').sort();
    assert.deepEqual(resources, expected);
    const images = kustomization.images as { name: string }[];
    assert.deepEqual(
      images.map((i) => i.name),
      [container.image],
    );
  });

  test('the worker gets only settings its configuration loader reads', () => {
    assertWorkerSettings(Object.keys(configData), 'the ConfigMap');
    assertWorkerSettings(
      containerEnv.map((e) => e.name),
      'the Deployment',
    );
    assert.deepEqual(container.envFrom, [{ configMapRef: { name: path(configMap, 'metadata', 'name') } }]);
  });

  test('the configuration loader accepts the settings, with the API key read from the mounted file', () => {
    const keyFile = join(scratch, 'api-key');
    writeFileSync(keyFile, 'placeholder-key\n');
    const config = loadWorkerConfig({
      ...configData,
      ...literalEnv,
      AGENT_API_KEY_FILE: keyFile,
      TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE,
    });
    assert.equal(config.agentApi.AGENT_API_KEY, 'placeholder-key');
    assert.equal(config.temporal.taskQueue, configData.TEMPORAL_TASK_QUEUE);
  });

  test('the API key file is a mounted Secret, and TEMPORAL_API_KEY an optional Secret', () => {
    const { secretName, key } = mountedSecret(podSpec, literalEnv.AGENT_API_KEY_FILE ?? '');
    const example = documents.find(
      (d) => d.body.kind === 'Secret' && path(d.body, 'metadata', 'name') === secretName,
    );
    assert.ok(example, `secret.example.yaml must show the Secret ${secretName}`);
    assert.ok(key in record(example.body.stringData, 'stringData'));
    assert.ok(
      !('AGENT_API_KEY' in literalEnv) && !containerEnv.some((e) => e.name === 'AGENT_API_KEY'),
      'the key must not be an env var',
    );

    const temporalKey = containerEnv.find((e) => e.name === 'TEMPORAL_API_KEY');
    assert.equal(path(temporalKey, 'valueFrom', 'secretKeyRef', 'optional'), true);
  });

  /** The Secret and its key mounted at `file` in a pod spec, or a failed assertion. */
  function mountedSecret(spec: Record<string, unknown>, file: string): { secretName: string; key: string } {
    const target = (spec.containers as Record<string, unknown>[])[0]!;
    const mounts = target.volumeMounts as { name: string; mountPath: string }[];
    const mount = mounts.find((m) => file.startsWith(`${m.mountPath}/`));
    assert.ok(mount, `${file} is not under a volume mount`);
    const volume = (
      spec.volumes as {
        name: string;
        secret?: { secretName: string; items?: { key: string; path: string }[] };
      }[]
    ).find((v) => v.name === mount.name);
    assert.ok(volume?.secret, `${mount.name} must be a Secret volume`);
    const item = volume.secret.items?.find((i) => `${mount.mountPath}/${i.path}` === file);
    assert.ok(item, `no item of ${volume.secret.secretName} is mounted at ${file}`);
    return { secretName: volume.secret.secretName, key: item.key };
  }

  const codecServer = named('Deployment', 'agent-job-codec-server');
  const codecPodSpec = record(path(codecServer, 'spec', 'template', 'spec'), 'codec server pod spec');
  const codecContainer = (codecPodSpec.containers as Record<string, unknown>[])[0]!;
  const codecEnv = Object.fromEntries(
    (codecContainer.env as { name: string; value: string }[]).map((e) => [e.name, e.value]),
  );

  test('the worker and the codec server mount the same payload key ring Secret, shown in the Secret example', () => {
    const workerRing = mountedSecret(podSpec, literalEnv.TEMPORAL_PAYLOAD_KEYS_FILE ?? '');
    const codecRing = mountedSecret(codecPodSpec, codecEnv.TEMPORAL_PAYLOAD_KEYS_FILE ?? '');
    assert.deepEqual(codecRing, workerRing);
    const example = documents.find(
      (d) => d.body.kind === 'Secret' && path(d.body, 'metadata', 'name') === workerRing.secretName,
    );
    assert.ok(example, `secret.example.yaml must show the Secret ${workerRing.secretName}`);
    assert.ok(workerRing.key in record(example.body.stringData, 'stringData'));
  });

  test("the codec server runs the worker's image with lib/codec-server.js and settings its loader reads and accepts", () => {
    assert.equal(codecContainer.image, container.image, 'the same image, so kustomize sets both');
    assert.deepEqual(codecContainer.args, ['node', '--max-old-space-size=64', 'lib/codec-server.js']);
    const known = new Set<string>(CODEC_SERVER_SETTINGS);
    assert.deepEqual(
      Object.keys(codecEnv).filter((name) => !known.has(name)),
      [],
      'the codec server never reads these',
    );
    const config = loadCodecServerConfig({ ...codecEnv, TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE });
    assert.equal(config.server.host, '0.0.0.0', 'reachable from the ingress');
    assert.ok(config.server.accessToken, 'beyond loopback, access tokens are required');
    assert.ok(config.server.allowedOrigins.length > 0, "the UI's origin is allowed");
    assert.throws(
      () =>
        loadCodecServerConfig({
          ...codecEnv,
          TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE,
          CODEC_SERVER_OIDC_ISSUER: '',
          CODEC_SERVER_OIDC_AUDIENCE: '',
        }),
      /not loopback/,
      'the same manifest without OIDC would not start',
    );
  });

  test('the codec server Service targets its port, which its probes check at /healthz', () => {
    const service = named('Service', 'agent-job-codec-server');
    const labels = record(path(codecServer, 'spec', 'template', 'metadata', 'labels'), 'labels');
    for (const [key, value] of Object.entries(record(path(service, 'spec', 'selector'), 'selector')))
      assert.equal(labels[key], value, `the Service selects ${key}=${String(value)}`);
    const port = (codecContainer.ports as { name: string; containerPort: number }[])[0]!;
    assert.equal(port.containerPort, portOf(codecEnv.CODEC_SERVER_ADDRESS ?? ''));
    assert.equal(path(service, 'spec', 'ports', 0, 'targetPort'), port.name);
    for (const probe of ['readinessProbe', 'livenessProbe'])
      assert.deepEqual(path(codecContainer, probe, 'httpGet'), { path: '/healthz', port: port.name });
  });

  test('the Secret example holds placeholders only', () => {
    for (const { file, body } of documents.filter((d) => d.body.kind === 'Secret')) {
      assert.equal(body.data, undefined, `${file}: use stringData placeholders, never encoded data`);
      for (const [key, value] of Object.entries(stringRecord(body.stringData, 'stringData'))) {
        assert.match(value, /^REPLACE_WITH_[A-Z_]+$/, `${file}: ${key} must be a placeholder`);
      }
    }
  });

  test('probes and ports match the health and metrics settings', () => {
    const ports = container.ports as { name: string; containerPort: number }[];
    const portNumber = (ref: unknown) =>
      typeof ref === 'number' ? ref : ports.find((p) => p.name === ref)?.containerPort;
    const healthPort = portOf(literalEnv.HEALTH_ADDRESS ?? '');
    const metricsPort = portOf(literalEnv.METRICS_ADDRESS ?? '');
    assert.equal(healthPort, defaults.HEALTH_ADDRESS.port);
    assert.equal(metricsPort, METRICS_PORT);
    const probes = {
      readinessProbe: '/readyz',
      livenessProbe: '/healthz',
      startupProbe: '/healthz',
    } as const;
    for (const [probe, expected] of Object.entries(probes)) {
      const httpGet = record(path(container, probe, 'httpGet'), probe);
      assert.equal(httpGet.path, expected, probe);
      assert.equal(portNumber(httpGet.port), healthPort, `${probe} port`);
    }
    const annotations = stringRecord(
      path(deployment, 'spec', 'template', 'metadata', 'annotations'),
      'annotations',
    );
    assert.equal(annotations['prometheus.io/scrape'], 'true');
    assert.equal(Number(annotations['prometheus.io/port']), metricsPort);
    assert.equal(portNumber('metrics'), metricsPort);
    assert.equal(annotations['prometheus.io/path'], '/metrics');
  });

  test('terminationGracePeriodSeconds leaves time for the drain, forced end included', () => {
    const config = loadWorkerConfig({
      ...configData,
      ...literalEnv,
      AGENT_API_KEY: 'x',
      AGENT_API_KEY_FILE: '',
      TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE,
    });
    const drainMs = Number(config.workerOptions.shutdownForceTime);
    const termination = Number(podSpec.terminationGracePeriodSeconds) * 1000;
    assert.ok(
      termination > drainMs,
      `terminationGracePeriodSeconds (${termination} ms) must exceed the longest drain, WORKER_SHUTDOWN_GRACE + 10 s (${drainMs} ms)`,
    );
  });

  test('rolls out without losing a poller and leaves the replica count to the autoscaler', () => {
    assert.equal(path(deployment, 'spec', 'strategy', 'rollingUpdate', 'maxUnavailable'), 0);
    assert.equal(path(deployment, 'spec', 'replicas'), undefined);
  });

  test('runs non-root on a read-only root file system with resource requests and limits', () => {
    assert.equal(path(podSpec, 'securityContext', 'runAsNonRoot'), true);
    assert.notEqual(path(podSpec, 'securityContext', 'runAsUser'), 0);
    assert.equal(path(container, 'securityContext', 'readOnlyRootFilesystem'), true);
    assert.equal(path(container, 'securityContext', 'allowPrivilegeEscalation'), false);
    for (const kind of ['requests', 'limits']) {
      const resources = record(path(container, 'resources', kind), kind);
      assert.ok(resources.cpu && resources.memory, `${kind} must set cpu and memory`);
    }
  });

  test('the PodDisruptionBudget selects the worker pods', () => {
    const pdb = only('PodDisruptionBudget');
    assert.deepEqual(path(pdb, 'spec', 'selector'), path(deployment, 'spec', 'selector'));
  });

  test('the KEDA trigger scales the Deployment on the queue it polls, with documented temporal scaler fields', () => {
    // The temporal scaler's parameters in KEDA 2.17 (keda.sh/docs/2.17/scalers/temporal); the CRD
    // schema types trigger metadata as a plain string map, so only this list catches a typo.
    const documented = new Set([
      'endpoint',
      'namespace',
      'taskQueue',
      'targetQueueSize',
      'activationTargetQueueSize',
      'queueTypes',
      'buildId',
      'selectAllActive',
      'selectUnversioned',
      'minConnectTimeout',
      'unsafeSsl',
      'apiKey',
    ]);
    const scaledObject = only('ScaledObject');
    assert.equal(path(scaledObject, 'spec', 'scaleTargetRef', 'name'), path(deployment, 'metadata', 'name'));
    const triggers = path(scaledObject, 'spec', 'triggers') as {
      type: string;
      metadata: Record<string, string>;
      authenticationRef?: { name: string };
    }[];
    assert.equal(triggers.length, 1);
    const trigger = triggers[0]!;
    assert.equal(trigger.type, 'temporal');
    const containerSettings = { ...configData, ...literalEnv };
    for (const [key, value] of Object.entries(trigger.metadata)) {
      const base = key.replace(/FromEnv$/, '');
      assert.ok(documented.has(base), `${key} is not a parameter of KEDA's temporal scaler`);
      if (key.endsWith('FromEnv'))
        assert.ok(value in containerSettings, `${key}: the worker container has no ${value}`);
    }
    for (const required of ['endpoint', 'taskQueue']) {
      assert.ok(
        required in trigger.metadata || `${required}FromEnv` in trigger.metadata,
        `${required} is required`,
      );
    }
    assert.deepEqual(
      trigger.metadata.queueTypes?.split(',').sort(),
      ['activity', 'workflow'],
      'the worker runs both workflows and activities',
    );

    const auth = only('TriggerAuthentication');
    assert.equal(trigger.authenticationRef?.name, path(auth, 'metadata', 'name'));
    const refs = path(auth, 'spec', 'secretTargetRef') as { parameter: string; name: string; key: string }[];
    const temporalKey = path(
      containerEnv.find((e) => e.name === 'TEMPORAL_API_KEY'),
      'valueFrom',
      'secretKeyRef',
    ) as { name: string; key: string };
    assert.deepEqual(refs, [{ parameter: 'apiKey', name: temporalKey.name, key: temporalKey.key }]);
  });
});

/**
 * deploy/k8s-versioned and deploy/compose/versioned.yaml: the worker as one Deployment (or Compose
 * service) per build ID, with Worker Deployment Versioning on (docs/versioning.md). Each version is
 * the unversioned worker plus TEMPORAL_WORKER_VERSIONING=on, its build ID in its names and image
 * tag, and a KEDA scaler of its own version's backlog.
 */
describe('versioned deployments', () => {
  const k8s = join(ROOT, 'deploy/k8s');
  const dir = join(ROOT, 'deploy/k8s-versioned');
  const docs = (file: string) =>
    parseAllDocuments(readFileSync(file, 'utf8')).map((doc) => {
      assert.deepEqual(doc.errors, [], `${file} is not valid YAML`);
      return record(doc.toJS(), file);
    });
  const baseDocs = readdirSync(k8s)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => docs(join(k8s, f)));
  const baseOf = (kind: string) => {
    const found = baseDocs.filter((d) => d.kind === kind);
    assert.equal(found.length, 1, `deploy/k8s has one ${kind}`);
    return found[0]!;
  };
  const baseDeployment = baseDocs.find(
    (d) => d.kind === 'Deployment' && (d.metadata as { name: string }).name === 'agent-job-worker',
  )!;
  const baseScaledObject = baseOf('ScaledObject');
  const baseConfigMap = stringRecord(baseOf('ConfigMap').data, 'ConfigMap data');
  const versionFiles = readdirSync(dir).filter((f) => /^worker-.+\.yaml$/.test(f));
  const kustomization = docs(join(dir, 'kustomization.yaml'))[0]!;

  /** The parts of a Deployment these checks read. */
  type Env = { name: string; value?: string }[];
  interface PodSpec {
    containers: { image: string; env: Env }[];
  }
  const podSpecOf = (deployment: Record<string, unknown>) =>
    structuredClone((record(deployment.spec, 'spec').template as { spec: PodSpec }).spec);
  /** The loader's reading of a Deployment's settings (the base ConfigMap and its literal env). */
  const configOf = (deployment: Record<string, unknown>) => {
    const literal = Object.fromEntries(
      podSpecOf(deployment)
        .containers[0]!.env.filter((e) => e.value !== undefined)
        .map((e) => [e.name, e.value ?? '']),
    );
    return loadWorkerConfig({
      ...baseConfigMap,
      ...literal,
      AGENT_API_KEY: 'x',
      AGENT_API_KEY_FILE: '',
      TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE,
    });
  };

  test('kustomization.yaml builds on deploy/k8s, lists every version and replaces the unversioned worker', () => {
    assert.deepEqual(kustomization.resources, ['../k8s', ...versionFiles.sort()]);
    const deleted = (kustomization.patches as { patch: string }[]).map((p) =>
      record(parse(p.patch), 'patch'),
    );
    assert.deepEqual(
      deleted.map((p) => [p.$patch, p.kind, (p.metadata as { name: string }).name]).sort(),
      [
        ['delete', 'Deployment', (baseDeployment.metadata as { name: string }).name],
        ['delete', 'ScaledObject', (baseScaledObject.metadata as { name: string }).name],
      ].sort(),
    );
    // The registry only, so that each version keeps its own tag.
    const images = kustomization.images as { name: string; newTag?: string }[];
    assert.deepEqual(
      images.map((i) => i.name),
      [podSpecOf(baseDeployment).containers[0]!.image],
    );
    assert.ok(
      images.every((i) => i.newTag === undefined),
      'no newTag: it would give every version one image',
    );
  });

  test('at least two versions side by side, each with its own image', () => {
    assert.ok(versionFiles.length >= 2, 'the example shows a draining and a current version');
    const images = versionFiles.map((file) => podSpecOf(docs(join(dir, file))[0]!).containers[0]!.image);
    assert.equal(new Set(images).size, images.length, 'one image cannot hold two builds');
  });

  for (const file of versionFiles) {
    const buildId = /^worker-(.+)\.yaml$/.exec(file)![1]!;
    const [deployment, scaledObject, ...rest] = docs(join(dir, file));

    describe(file, () => {
      test('a Deployment and a ScaledObject that validate against the Kubernetes and KEDA schemas', () => {
        assert.equal(rest.length, 0);
        assert.equal(deployment?.kind, 'Deployment');
        assert.equal(scaledObject?.kind, 'ScaledObject');
        assert.doesNotThrow(() => new Deployment(deployment).validate());
        assert.doesNotThrow(() => new ScaledObject(scaledObject as unknown as IScaledObject).validate());
      });

      test(`names and selects by its build ID ${buildId}`, () => {
        const name = `${(baseDeployment.metadata as { name: string }).name}-${buildId}`;
        const spec = record(deployment!.spec, 'spec');
        assert.equal((deployment!.metadata as { name: string }).name, name);
        const version = { 'app.kubernetes.io/version': buildId };
        // Its own pods only, so that each version scales and drains alone.
        assert.deepEqual((spec.selector as { matchLabels: object }).matchLabels, {
          ...(record(baseDeployment.spec, 'spec').selector as { matchLabels: object }).matchLabels,
          ...version,
        });
        const podLabels = (spec.template as { metadata: { labels: Record<string, string> } }).metadata.labels;
        assert.equal(podLabels['app.kubernetes.io/version'], buildId);
        // An image of its own, by tag: the kustomization sets the registry only.
        const image = podSpecOf(deployment!).containers[0]!.image;
        assert.match(image, new RegExp(`^${podSpecOf(baseDeployment).containers[0]!.image}:[\\w][\\w.-]*$`));
        assert.equal(record(record(scaledObject!.spec, 'spec').scaleTargetRef, 'scaleTargetRef').name, name);
      });

      test('its pod spec is the unversioned one plus TEMPORAL_WORKER_VERSIONING=on', () => {
        const versioned = podSpecOf(deployment!);
        const container = versioned.containers[0]!;
        const versioning = container.env.filter((e) => e.name === 'TEMPORAL_WORKER_VERSIONING');
        assert.deepEqual(versioning, [{ name: 'TEMPORAL_WORKER_VERSIONING', value: 'on' }]);
        container.env = container.env.filter((e) => e.name !== 'TEMPORAL_WORKER_VERSIONING');
        container.image = podSpecOf(baseDeployment).containers[0]!.image;
        assert.deepEqual(
          versioned,
          podSpecOf(baseDeployment),
          'keep it in step with deploy/k8s/worker-deployment.yaml',
        );
        const config = configOf(deployment!);
        assert.equal(config.versioning.TEMPORAL_WORKER_VERSIONING, true);
        assert.equal(
          config.versioning.TEMPORAL_WORKER_BUILD_ID,
          undefined,
          "the build ID is the image's own, never set by hand",
        );
      });

      test("its scaler is the unversioned one, on this version's backlog", () => {
        const trigger = (
          record(scaledObject!.spec, 'spec').triggers as { metadata: Record<string, string> }[]
        )[0]!;
        const config = configOf(deployment!);
        // KEDA 2.21's parameters for a Worker Deployment Version (keda.sh/docs/2.21/scalers/temporal).
        assert.equal(trigger.metadata.workerDeploymentName, config.versioning.TEMPORAL_DEPLOYMENT_NAME);
        assert.equal(trigger.metadata.workerDeploymentBuildId, buildId);
        const unversioned = structuredClone(scaledObject!);
        const spec = record(unversioned.spec, 'spec');
        const metadata = (spec.triggers as { metadata: Record<string, string> }[])[0]!.metadata;
        delete metadata.workerDeploymentName;
        delete metadata.workerDeploymentBuildId;
        spec.scaleTargetRef = record(baseScaledObject.spec, 'spec').scaleTargetRef;
        assert.deepEqual(
          spec,
          baseScaledObject.spec,
          'keep it in step with deploy/k8s/keda-scaledobject.yaml',
        );
      });
    });
  }

  test("the PodDisruptionBudget of deploy/k8s covers every version's pods", () => {
    const selector = (
      record(baseOf('PodDisruptionBudget').spec, 'spec').selector as { matchLabels: Record<string, string> }
    ).matchLabels;
    for (const file of versionFiles) {
      const labels = (
        record(docs(join(dir, file))[0]!.spec, 'spec').template as {
          metadata: { labels: Record<string, string> };
        }
      ).metadata.labels;
      for (const [key, value] of Object.entries(selector))
        assert.equal(labels[key], value, `${file}: ${key}`);
    }
  });

  describe('deploy/compose/versioned.yaml', () => {
    const override = join(ROOT, 'deploy/compose/versioned.yaml');
    const compose = (file: string) =>
      (parse(readFileSync(file, 'utf8'), { merge: true }) as { services: Record<string, ComposeService> })
        .services;
    const base = compose(join(ROOT, 'docker-compose.yml'));
    const slots = compose(override);
    const env = (service: ComposeService | undefined) =>
      Object.fromEntries(Object.entries(service?.environment ?? {}).map(([k, v]) => [k, String(v)]));
    const run = (extra: Record<string, string>) =>
      spawnSync(
        findOnPath('docker-compose') ?? 'docker-compose',
        ['-f', 'docker-compose.yml', '-f', override, 'config', '-q'],
        {
          cwd: ROOT,
          encoding: 'utf8',
          env: { PATH: process.env.PATH ?? '', HOME: scratch, ...extra },
        },
      );

    test('is accepted by docker-compose with both build IDs given, and refused without one', () => {
      assert.ok(
        findOnPath('docker-compose'),
        'docker-compose is not installed (apt-get install -y docker-compose)',
      );
      const ok = run({ BLUE_BUILD_ID: '3f9c2a7d1e4b', GREEN_BUILD_ID: '8b6e0d5c9a21' });
      assert.equal(ok.status, 0, `docker-compose config -q failed:\n${ok.stderr}${ok.stdout}`);
      const missing = run({ BLUE_BUILD_ID: '3f9c2a7d1e4b' });
      assert.notEqual(missing.status, 0);
      assert.match(`${missing.stderr}${missing.stdout}`, /GREEN_BUILD_ID/);
    });

    test('the unversioned worker stops, and two slots run images tagged with a build ID', () => {
      assert.equal(slots.worker?.deploy?.replicas, 0);
      const names = Object.keys(slots).filter((name) => name.startsWith('worker-'));
      assert.equal(names.length, 2);
      for (const name of names) {
        assert.equal(slots[name]!.build, undefined, `${name} runs a built image, not this checkout`);
        assert.match(slots[name]!.image ?? '', /^agent-job-worker:\$\{[A-Z_]+_BUILD_ID:\?[^}]+\}$/);
      }
    });

    test("each slot gets the base worker's settings plus TEMPORAL_WORKER_VERSIONING=on", () => {
      for (const name of Object.keys(slots).filter((n) => n.startsWith('worker-'))) {
        assert.deepEqual(
          env(slots[name]),
          { ...env(base.worker), TEMPORAL_WORKER_VERSIONING: 'on' },
          `${name}: keep it in step with the worker of docker-compose.yml`,
        );
        assertWorkerSettings(Object.keys(env(slots[name])), name);
        assert.equal(slots[name]!.stop_grace_period, base.worker?.stop_grace_period);
      }
    });
  });
});

/**
 * deploy/compose/codec.yaml: the local stack with the payload codec. The workers and the codec
 * server read one ring, a Compose secret from the host's TEMPORAL_PAYLOAD_KEYS_FILE; the codec
 * server uses the local-only allowance on the host's loopback; the UI's codec endpoint is it.
 */
describe('deploy/compose/codec.yaml', () => {
  const LOCAL_TOKEN = 'compose-local-token-0123';
  const override = join(ROOT, 'deploy/compose/codec.yaml');
  const read = (file: string) =>
    parse(readFileSync(file, 'utf8'), { merge: true }) as {
      services: Record<string, ComposeService & { secrets?: string[]; network_mode?: string }>;
      secrets?: Record<string, { file: string }>;
    };
  const base = read(join(ROOT, 'docker-compose.yml')).services;
  const codec = read(override);
  const env = (service: ComposeService | undefined) =>
    Object.fromEntries(
      Object.entries(service?.environment ?? {}).map(([k, v]) => [k, interpolate(String(v))]),
    );
  const run = (extra: Record<string, string>) =>
    spawnSync(
      findOnPath('docker-compose') ?? 'docker-compose',
      ['-f', 'docker-compose.yml', '-f', override, 'config', '-q'],
      { cwd: ROOT, encoding: 'utf8', env: { PATH: process.env.PATH ?? '', HOME: scratch, ...extra } },
    );
  const server = codec.services['codec-server'];

  test('is accepted by docker-compose with TEMPORAL_PAYLOAD_KEYS_FILE given, and refused without it', () => {
    assert.ok(
      findOnPath('docker-compose'),
      'docker-compose is not installed (apt-get install -y docker-compose)',
    );
    const ok = run({ TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE, CODEC_SERVER_LOCAL_TOKEN: LOCAL_TOKEN });
    assert.equal(ok.status, 0, `docker-compose config -q failed:\n${ok.stderr}${ok.stdout}`);
    const missing = run({ CODEC_SERVER_LOCAL_TOKEN: LOCAL_TOKEN });
    assert.notEqual(missing.status, 0);
    assert.match(`${missing.stderr}${missing.stdout}`, /TEMPORAL_PAYLOAD_KEYS_FILE/);
    const noToken = run({ TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE });
    assert.notEqual(noToken.status, 0);
    assert.match(`${noToken.stderr}${noToken.stdout}`, /CODEC_SERVER_LOCAL_TOKEN/);
  });

  test('the workers and the codec server read the one ring, and the worker accepts its settings', () => {
    const secret = Object.keys(codec.secrets ?? {});
    assert.equal(secret.length, 1);
    for (const service of [codec.services.worker, server]) {
      assert.deepEqual(service?.secrets, secret);
      assert.equal(env(service).TEMPORAL_PAYLOAD_KEYS_FILE, `/run/secrets/${secret[0]}`);
    }
    const workerEnv = { ...env(base.worker), ...env(codec.services.worker) };
    assertWorkerSettings(Object.keys(workerEnv), 'the compose worker with the codec');
    const config = loadWorkerConfig({ ...workerEnv, TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE });
    assert.equal(config.temporal.payloadKeysFile, RING_FILE);
  });

  test("the codec server runs on the host's loopback without tokens, for the UI's origin, and the UI points at it", () => {
    assert.equal(server?.network_mode, 'host', "a loopback peer is the host's own browser");
    assert.deepEqual(server?.command, ['node', 'lib/codec-server.js']);
    assert.equal(server?.build?.target, base.worker?.build?.target, "the worker's image");
    const config = loadCodecServerConfig(
      { ...env(server), TEMPORAL_PAYLOAD_KEYS_FILE: RING_FILE, CODEC_SERVER_LOCAL_TOKEN: LOCAL_TOKEN },
      false,
    );
    assert.equal(config.server.accessToken, null);
    assert.equal(config.server.localToken, LOCAL_TOKEN);
    assert.equal(config.server.host, '127.0.0.1');
    const uiPort = (base['temporal-ui']?.ports ?? [])[0]?.split(':')[0];
    assert.ok(config.server.allowedOrigins.includes(`http://localhost:${uiPort}`));
    const endpoint = new URL(env(codec.services['temporal-ui']).TEMPORAL_CODEC_ENDPOINT ?? '');
    assert.equal(endpoint.hostname, 'localhost');
    assert.equal(Number(endpoint.port), config.server.port);
    assert.match(
      String(codec.services['temporal-ui']?.environment?.TEMPORAL_CODEC_ENDPOINT),
      /:8888\/\$\{CODEC_SERVER_LOCAL_TOKEN\}$/,
      "the UI's endpoint carries the local token",
    );
  });
});
