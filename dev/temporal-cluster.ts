/**
 * The production topology of docker-compose.yml without Docker: a private PostgreSQL instance, the
 * Temporal Server of the compose image's version built from source, the schema steps of
 * deploy/compose/temporal-schema.sh, the dynamic config of deploy/compose/dynamicconfig.yaml and
 * the namespace and search attributes of deploy/compose/temporal-init.sh. The scripts run as they
 * are, with the environment docker-compose.yml gives their services (only hosts, ports and paths
 * differ), so a mistake in them fails `npm run test:cluster` before it fails a `docker compose up`.
 *
 * Temporal Server and its SQL tool are built once with `go install` and cached for every clone,
 * like the CLI (dev/temporal-cli.ts). PostgreSQL comes from the Debian package: `initdb` and
 * `pg_ctl` run it in a temporary directory on a free port, never as a system service.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import {
  accessSync,
  chmodSync,
  chownSync,
  constants,
  cpSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, dirname, join, posix } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { Connection } from '@temporalio/client';
import { parse } from 'yaml';
import { freePorts } from './dev-server.js';
import { resolveTemporalCli } from './temporal-cli.js';
import { GO_TOOLCHAIN, goBuildEnv, TEMPORAL_SERVER_VERSION } from './temporal-versions.js';

export { TEMPORAL_SERVER_VERSION };
const SERVER_MODULE = 'go.temporal.io/server';

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

/** The built server: its binaries and the PostgreSQL schema files of the same release. */
export interface TemporalServerBuild {
  server: string;
  sqlTool: string;
  /** `schema/postgresql/v12` of the release, the directory the admin-tools image ships. */
  postgresSchemaDir: string;
}

/** The cache directory of the server build, shared by every clone on the machine. */
export function serverCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'agent-job-orchestrator', `temporal-server-${TEMPORAL_SERVER_VERSION}`);
}

function buildIn(dir: string): TemporalServerBuild {
  return {
    server: join(dir, 'temporal-server'),
    sqlTool: join(dir, 'temporal-sql-tool'),
    postgresSchemaDir: join(dir, 'schema', 'postgresql', 'v12'),
  };
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function findOnPath(name: string, env: NodeJS.ProcessEnv = process.env): string | null {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return null;
}

/**
 * The cached server build, or a fresh `go install` of the server command and the SQL tool (a few
 * minutes the first time). The build goes to a private directory, with the schema files copied
 * from the module cache, and is renamed into place whole, so a concurrent clone never sees half.
 */
export async function resolveTemporalServer(
  env: NodeJS.ProcessEnv = process.env,
  log: Log = defaultLog,
): Promise<TemporalServerBuild> {
  const target = serverCacheDir(env);
  const cached = buildIn(target);
  if (isExecutable(cached.server) && isExecutable(cached.sqlTool) && existsSync(cached.postgresSchemaDir)) {
    log(`using cached Temporal Server v${TEMPORAL_SERVER_VERSION}: ${target}`);
    return cached;
  }
  const go = findOnPath('go', env);
  if (!go) {
    throw new ClusterUnavailableError(
      `no Go toolchain on PATH to build Temporal Server v${TEMPORAL_SERVER_VERSION}: install Go 1.21+ (the build runs ${GO_TOOLCHAIN}, which the go command fetches from the module proxy)`,
    );
  }
  const parent = join(target, '..');
  mkdirSync(parent, { recursive: true });
  const scratch = mkdtempSync(join(parent, '.build-server-'));
  log(
    `building Temporal Server v${TEMPORAL_SERVER_VERSION} and its SQL tool with ${go} and ${GO_TOOLCHAIN} (first time only)`,
  );
  const started = Date.now();
  const ticker = setInterval(
    () => log(`still building Temporal Server (${Math.round((Date.now() - started) / 1000)}s)`),
    30_000,
  );
  try {
    const bin = join(scratch, 'bin');
    const version = `@v${TEMPORAL_SERVER_VERSION}`;
    const code = await exitCode(
      spawn(
        go,
        ['install', `${SERVER_MODULE}/cmd/server${version}`, `${SERVER_MODULE}/cmd/tools/sql${version}`],
        {
          env: goBuildEnv(env, bin),
          stdio: ['ignore', 'inherit', 'inherit'],
        },
      ),
    );
    if (code !== 0)
      throw new ClusterUnavailableError(`go install ${SERVER_MODULE}${version} exited with ${code}`);
    const built = buildIn(join(scratch, 'out'));
    mkdirSync(join(scratch, 'out'));
    renameSync(join(bin, 'server'), built.server);
    renameSync(join(bin, 'sql'), built.sqlTool);
    // The module cache holds the release's schema files: the ones the admin-tools image ships.
    const modCache = spawnSync(go, ['env', 'GOMODCACHE'], {
      encoding: 'utf8',
      env: goBuildEnv(env, bin),
    }).stdout.trim();
    const schemaSource = join(
      modCache,
      `${SERVER_MODULE}@v${TEMPORAL_SERVER_VERSION}`,
      'schema',
      'postgresql',
      'v12',
    );
    cpSync(schemaSource, built.postgresSchemaDir, { recursive: true });
    // Module cache files are read-only; the copy must stay removable with the cache.
    makeWritable(join(scratch, 'out', 'schema'));
    try {
      renameSync(join(scratch, 'out'), target);
    } catch (err) {
      // Another clone finished first; its build is the same release.
      if (!existsSync(cached.server)) throw err;
    }
    log(`built Temporal Server in ${Math.round((Date.now() - started) / 1000)}s: ${target}`);
    return cached;
  } finally {
    clearInterval(ticker);
    makeWritable(scratch);
    rmSync(scratch, { recursive: true, force: true });
  }
}

function makeWritable(path: string): void {
  if (!existsSync(path)) return;
  chmodSync(path, 0o755);
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const child = join(path, entry.name);
    if (entry.isDirectory()) makeWritable(child);
    else chmodSync(child, 0o644 | (isExecutable(child) ? 0o111 : 0));
  }
}

function exitCode(child: ChildProcess): Promise<number | string> {
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
}

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
  const build = await resolveTemporalServer(process.env, log);
  const cli = await resolveTemporalCli(process.env, log);
  if (!cli.path)
    throw new ClusterUnavailableError('temporal-init.sh needs the Temporal CLI binary: install Go 1.24+');
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

/**
 * The server's own check of a dynamic config file. The server logs an unknown key or a value of
 * the wrong type as a warning and runs on without it, so any warning fails here instead.
 */
function validateDynamicConfig(server: string, file: string): void {
  const result = spawnSync(server, ['validate-dynamic-config', file], { encoding: 'utf8' });
  const output = `${result.stdout}${result.stderr}`;
  if (result.status !== 0 || /warning|error/i.test(output)) {
    throw new ClusterUnavailableError(
      `${file.slice(ROOT.length)} does not pass the server's validation:\n${output}`,
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

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  resolveTemporalServer()
    .then((build) => process.stdout.write(`${build.server}\n`))
    .catch((err: unknown) => {
      process.stderr.write(`[cluster] ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    });
}
