/**
 * The production topology of docker-compose.yml without Docker: a private PostgreSQL instance, the
 * Temporal Server of the compose image's version built from source, the schema steps of
 * deploy/compose/temporal-schema.sh, the dynamic config of deploy/compose/dynamicconfig.yaml and
 * the namespace and search attributes of deploy/compose/temporal-init.sh. The scripts run as they
 * are, with the environment docker-compose.yml gives their services (only hosts, ports and paths
 * differ), so a mistake in them fails `npm run test:cluster` before it fails a `docker compose up`.
 *
 * Temporal Server and its SQL tool are built once with `go install` and cached for every clone
 * (dev/temporal-builds.ts), the same build the dev server runs. PostgreSQL comes from the Debian package: `initdb` and
 * `pg_ctl` run it in a temporary directory on a free port, never as a system service.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  chownSync,
  createWriteStream,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { Connection } from '@temporalio/client';
import { parse } from 'yaml';
import { freePorts } from './dev-server.js';
import { allSettledOrThrow, exitCode, findOnPath, isExecutable } from './go-install.js';
import { dynamicConfigProblems, resolveTemporalServer } from './temporal-builds.js';
import { resolveTemporalCli } from './temporal-cli.js';
import { TEMPORAL_SERVER_VERSION } from './temporal-versions.js';

export { TEMPORAL_SERVER_VERSION };

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const COMPOSE_FILE = join(ROOT, 'docker-compose.yml');
/** The temporalio/server image's working directory, against which its relative paths resolve. */
const IMAGE_WORKDIR = '/etc/temporal';
const READY_TIMEOUT_MS = 120_000;

/** Raised when a part of the cluster cannot be built or started; the message says what to do. */
export class ClusterUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ClusterUnavailableError';
  }
}

type Log = (line: string) => void;

/** The newest PostgreSQL server binaries on this machine (Debian's layout), or $PG_BIN_DIR. */
export function findPostgres(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.PG_BIN_DIR;
  if (explicit) {
    if (!isExecutable(join(explicit, 'initdb'))) {
      throw new ClusterUnavailableError(`PG_BIN_DIR=${explicit} has no initdb; fix or unset it`);
    }
    return explicit;
  }
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => isExecutable(join(base, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0] === undefined) {
    throw new ClusterUnavailableError(
      'PostgreSQL server binaries not found: install them (Debian: apt-get install postgresql) or set PG_BIN_DIR',
    );
  }
  return join(base, versions[0], 'bin');
}

/** A private PostgreSQL instance. `stop()` shuts it down and deletes its files. */
export interface PrivatePostgres {
  host: string;
  port: number;
  user: string;
  password: string;
  stop(): Promise<void>;
}

/**
 * Starts PostgreSQL in a new temporary directory on a free loopback port, with the user and
 * password docker-compose.yml gives the `postgresql` service. PostgreSQL refuses to run as root,
 * so under root its processes run as the `postgres` user that the Debian package creates.
 */
export async function startPostgres(
  credentials: { user: string; password: string },
  log: Log = defaultLog,
): Promise<PrivatePostgres> {
  const bin = findPostgres();
  const dir = mkdtempSync(join(tmpdir(), 'agent-job-postgres-'));
  const owner = process.getuid?.() === 0 ? systemUser('postgres') : null;
  const data = join(dir, 'data');
  const passwordFile = join(dir, 'password');
  writeFileSync(passwordFile, credentials.password, { mode: 0o600 });
  if (owner) {
    chownSync(dir, owner.uid, owner.gid);
    chownSync(passwordFile, owner.uid, owner.gid);
  }
  const run = async (command: string, args: string[]) => {
    const child = spawn(join(bin, command), args, {
      cwd: dir,
      ...(owner ?? {}),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    const code = await exitCode(child);
    clearTimeout(timer);
    if (code !== 0) throw new ClusterUnavailableError(`${command} failed (${code}): ${output.slice(-4000)}`);
  };
  const [port] = (await freePorts(1)) as [number];
  try {
    await run('initdb', [
      '-D',
      data,
      '-U',
      credentials.user,
      `--pwfile=${passwordFile}`,
      '--auth-host=scram-sha-256',
      '--auth-local=peer',
      '-E',
      'UTF8',
      '--no-instructions',
    ]);
    // The socket stays in the private directory: /var/run/postgresql may not exist or be writable.
    const options = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir}`;
    await run('pg_ctl', [
      '-D',
      data,
      '-l',
      join(dir, 'postgres.log'),
      '-o',
      options,
      '-w',
      '-t',
      '60',
      'start',
    ]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  log(`started PostgreSQL (${bin}) on 127.0.0.1:${port}, data in ${data}`);
  return {
    host: '127.0.0.1',
    port,
    ...credentials,
    stop: async () => {
      try {
        await run('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
        log(`stopped PostgreSQL on port ${port}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

function systemUser(name: string): { uid: number; gid: number } {
  const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) {
    throw new ClusterUnavailableError(
      `PostgreSQL cannot run as root and there is no "${name}" user (the Debian postgresql package creates it)`,
    );
  }
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

interface ComposeService {
  environment?: Record<string, string | number>;
  volumes?: string[];
  command?: string[];
  entrypoint?: string[];
}

/** docker-compose.yml's services, with its `<<:` merge keys applied as Compose applies them. */
function composeServices(): Record<string, ComposeService> {
  const compose = parse(readFileSync(COMPOSE_FILE, 'utf8'), { merge: true }) as {
    services: Record<string, ComposeService>;
  };
  return compose.services;
}

function composeService(services: Record<string, ComposeService>, name: string): ComposeService {
  const service = services[name];
  if (!service) throw new ClusterUnavailableError(`docker-compose.yml has no "${name}" service`);
  return service;
}

function environmentOf(service: ComposeService): Record<string, string> {
  return Object.fromEntries(Object.entries(service.environment ?? {}).map(([k, v]) => [k, String(v)]));
}

/** The script a one-shot service's entrypoint runs, as a path in this repository. */
function scriptOf(service: ComposeService, name: string): string {
  const mounted = service.entrypoint?.at(-1);
  if (!mounted) throw new ClusterUnavailableError(`docker-compose.yml: ${name} has no entrypoint script`);
  return hostPathOf(service, mounted, name);
}

/** The repository file or directory that `service` mounts at `containerPath`. */
function hostPathOf(service: ComposeService, containerPath: string, name: string): string {
  for (const volume of service.volumes ?? []) {
    const [source, target] = volume.split(':');
    if (!source || !target) continue;
    if (containerPath === target) return join(ROOT, source);
    if (containerPath.startsWith(`${target}/`))
      return join(ROOT, source, containerPath.slice(target.length + 1));
  }
  throw new ClusterUnavailableError(`docker-compose.yml: ${name} mounts nothing at ${containerPath}`);
}

/** A running cluster. The server can be killed and restarted; `stop()` ends everything. */
export interface TemporalCluster {
  address: string;
  namespace: string;
  postgres: PrivatePostgres;
  /** PID of the current Temporal Server process. */
  serverPid(): number | null;
  /** SIGKILLs the Temporal Server process and waits until it is gone. */
  killServer(): Promise<void>;
  /** Starts the server again with the same settings and waits until it serves the namespace. */
  restartServer(): Promise<void>;
  stop(): Promise<void>;
}

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  log?: Log;
}

/**
 * Builds what is missing, then starts PostgreSQL, applies the schema, starts Temporal Server with
 * the compose dynamic config and runs the init script. Everything started is stopped on failure.
 */
export async function startCluster(options: ClusterOptions = {}): Promise<TemporalCluster> {
  const log = options.log ?? defaultLog;
  const services = composeServices();
  // Side by side on a fresh machine: the two builds overlap their downloads with compiling.
  // temporal-init.sh needs the CLI, as the admin-tools image has it.
  const [build, cli] = await allSettledOrThrow([
    resolveTemporalServer(process.env, log),
    resolveTemporalCli(process.env, log),
  ]);
  if (!findOnPath('nc')) {
    throw new ClusterUnavailableError(
      'temporal-schema.sh waits with `nc`, which is not installed (Debian: apt-get install netcat-openbsd)',
    );
  }
  const postgresService = environmentOf(composeService(services, 'postgresql'));
  const postgres = await startPostgres(
    { user: postgresService.POSTGRES_USER ?? 'temporal', password: postgresService.POSTGRES_PASSWORD ?? '' },
    log,
  );
  const stops: Array<() => Promise<void>> = [() => postgres.stop()];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop();
  };
  try {
    const dir = mkdtempSync(join(tmpdir(), 'agent-job-temporal-'));
    stops.push(() => Promise.resolve(rmSync(dir, { recursive: true, force: true })));
    const database = { POSTGRES_SEEDS: postgres.host, DB_PORT: String(postgres.port) };
    // The admin-tools image has temporal-sql-tool and the Temporal CLI on its PATH.
    const basePath = [dirname(build.sqlTool), dirname(cli.path), process.env.PATH ?? ''].join(delimiter);

    const schema = composeService(services, 'temporal-schema');
    await runScript(
      scriptOf(schema, 'temporal-schema'),
      [],
      { ...environmentOf(schema), ...database, TEMPORAL_SCHEMA_DIR: build.postgresSchemaDir, PATH: basePath },
      join(dir, 'schema.log'),
      log,
    );

    const server = composeService(services, 'temporal');
    const serverEnv = environmentOf(server);
    const dynamicConfigTarget = posix.resolve(IMAGE_WORKDIR, serverEnv.DYNAMIC_CONFIG_FILE_PATH ?? '');
    const ports = await freeLowPorts(10);
    const [grpcPort] = ports as [number];
    const portNames = [
      'FRONTEND_GRPC_PORT',
      'FRONTEND_HTTP_PORT',
      'FRONTEND_MEMBERSHIP_PORT',
      'INTERNAL_FRONTEND_HTTP_PORT',
      'HISTORY_GRPC_PORT',
      'HISTORY_MEMBERSHIP_PORT',
      'MATCHING_GRPC_PORT',
      'MATCHING_MEMBERSHIP_PORT',
      'WORKER_GRPC_PORT',
      'WORKER_MEMBERSHIP_PORT',
    ];
    const dynamicConfig = hostPathOf(server, dynamicConfigTarget, 'temporal');
    validateDynamicConfig(build.server, dynamicConfig);
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...serverEnv,
      ...database,
      // Loopback instead of the compose file's 0.0.0.0: this cluster serves this machine only.
      BIND_ON_IP: '127.0.0.1',
      DYNAMIC_CONFIG_FILE_PATH: dynamicConfig,
      LOG_LEVEL: 'warn',
      ...Object.fromEntries(portNames.map((name, i) => [name, String(ports[i])])),
    };
    const address = `127.0.0.1:${grpcPort}`;
    const init = composeService(services, 'temporal-init');
    const initEnv = environmentOf(init);
    const namespace = initEnv.TEMPORAL_NAMESPACE ?? 'default';

    let child = null as ChildProcess | null;
    let starts = 0;
    const serverLog = join(dir, 'temporal-server.log');
    const startServer = async () => {
      starts += 1;
      const out = createWriteStream(serverLog, { flags: 'a' });
      await once(out, 'open');
      // The image's entrypoint runs exactly `temporal-server start`: the embedded config template
      // rendered from the environment above.
      const started = spawn(build.server, ['start'], { cwd: dir, env, stdio: ['ignore', out, out] });
      started.once('exit', () => out.end());
      child = started;
      log(`started Temporal Server pid ${started.pid} on ${address} (start ${starts})`);
    };
    const stopServer = async (signal: NodeJS.Signals) => {
      const current = child;
      if (!current || current.exitCode !== null || current.signalCode !== null) return;
      const exited = exitCode(current);
      current.kill(signal);
      const timer = setTimeout(() => current.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    };
    await startServer();
    stops.push(async () => {
      await stopServer('SIGTERM');
      log('stopped Temporal Server');
    });
    await waitUntilServing(address, 'system', () => child, serverLog);

    await runScript(
      scriptOf(init, 'temporal-init'),
      init.command ?? [],
      { ...initEnv, TEMPORAL_ADDRESS: address, PATH: basePath, HOME: process.env.HOME },
      join(dir, 'init.log'),
      log,
    );
    await waitUntilServing(address, namespace, () => child, serverLog);
    log(`cluster ready: Temporal Server v${TEMPORAL_SERVER_VERSION} on ${address}, namespace ${namespace}`);

    return {
      address,
      namespace,
      postgres,
      serverPid: () => child?.pid ?? null,
      killServer: async () => {
        await stopServer('SIGKILL');
        log('killed Temporal Server with SIGKILL');
      },
      restartServer: async () => {
        await startServer();
        await waitUntilServing(address, namespace, () => child, serverLog);
      },
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/**
 * `count` distinct free loopback ports below 32768: the server stores membership ports in a
 * PostgreSQL `smallint`, and the kernel's ephemeral ports (what port 0 gives) start above it. All
 * are held open until every one is found, so none is handed out twice.
 */
async function freeLowPorts(count: number): Promise<number[]> {
  const held: Server[] = [];
  try {
    for (let attempt = 0; held.length < count && attempt < count * 50; attempt++) {
      const port = 20_000 + Math.floor(Math.random() * 12_000);
      const server = createServer();
      const listening = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(port, '127.0.0.1', () => resolve(true));
      });
      if (listening) held.push(server);
    }
    if (held.length < count)
      throw new ClusterUnavailableError(`found only ${held.length} free ports below 32768`);
    return held.map((server) => (server.address() as AddressInfo).port);
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

/** Fails when the server's own check finds a problem in a dynamic config file. */
function validateDynamicConfig(server: string, file: string): void {
  const problems = dynamicConfigProblems(server, file);
  if (problems) {
    throw new ClusterUnavailableError(
      `${file.slice(ROOT.length)} does not pass the server's validation:\n${problems}`,
    );
  }
}

/** Runs a compose script with `sh`, as the admin-tools entrypoint does; fails with its output. */
async function runScript(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  logFile: string,
  log: Log,
): Promise<void> {
  const started = Date.now();
  const child = spawn('sh', [script, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
  const code = await exitCode(child);
  clearTimeout(timer);
  writeFileSync(logFile, output);
  const name = script.slice(ROOT.length);
  if (code !== 0) throw new ClusterUnavailableError(`${name} exited with ${code}:\n${output.slice(-4000)}`);
  log(`${[name, ...args].join(' ')} succeeded in ${((Date.now() - started) / 1000).toFixed(1)}s`);
}

async function waitUntilServing(
  address: string,
  namespace: string,
  child: () => ChildProcess | null,
  serverLog: string,
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let lastError: unknown = null;
  while (Date.now() < deadline) {
    const current = child();
    if (current && (current.exitCode !== null || current.signalCode !== null)) {
      throw new ClusterUnavailableError(
        `Temporal Server exited (${current.exitCode ?? current.signalCode}):\n${tail(serverLog)}`,
      );
    }
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        if (namespace === 'system') {
          await connection.workflowService.getSystemInfo({});
        } else {
          await connection.workflowService.describeNamespace({ namespace });
        }
        return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      lastError = err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  throw new ClusterUnavailableError(
    `Temporal Server on ${address} did not serve ${namespace} within ${READY_TIMEOUT_MS / 1000}s:\n${tail(serverLog)}`,
    { cause: lastError },
  );
}

function tail(file: string): string {
  return existsSync(file) ? readFileSync(file, 'utf8').slice(-4000) : '(no log)';
}

function defaultLog(line: string): void {
  process.stderr.write(`[cluster] ${line}\n`);
}
