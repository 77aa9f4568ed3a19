/**
 * Starts a real Temporal server for the tests, the demo and the benchmark: Temporal Server of the
 * release the compose file deploys (dev/temporal-versions.ts), built from source once per machine
 * (dev/temporal-builds.ts), in one process with every service on in-memory SQLite, with the
 * `default` namespace, the project's search attributes and the dev server's dynamic config
 * (dev/dynamicconfig.yaml). With `ui: true` it also serves the Temporal UI of the compose file's
 * release, from the UI server built the same way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes.js';
import { msToTs } from '@temporalio/common/lib/time.js';
import { parse, stringify } from 'yaml';
import { ALL_SEARCH_ATTRIBUTES } from '../src/contract.js';
import { dynamicConfigProblems, resolveTemporalServer, resolveTemporalUi } from './temporal-builds.js';
import { allSettledOrThrow, versionOf } from './go-install.js';

/** A running dev server. `stop()` ends it (and its UI) and waits for the processes to exit. */
export interface DevServer {
  address: string;
  namespace: string;
  /** The release the server reports (`getSystemInfo`), e.g. 1.32.2. */
  version: string;
  /** The Temporal UI, when started with `ui: true`. */
  uiUrl: string | null;
  /** What the UI server says of its version, when started with `ui: true`. */
  uiVersion: string | null;
  pid: number | null;
  stop(): Promise<void>;
}

/** Options of {@link startDevServer}. */
export interface DevServerOptions {
  /** Serve the Temporal UI too. Default false. */
  ui?: boolean;
  /**
   * The UI's codec endpoint (a codec server's URL, as the browser reaches it): the UI then shows
   * payloads decoded through it. None by default.
   */
  uiCodecEndpoint?: string;
  /** gRPC port; a free one by default. */
  port?: number;
  /** Dynamic config values on top of dev/dynamicconfig.yaml, e.g. `frontend.rps: 10000` for the benchmark. */
  dynamicConfig?: Record<string, string | number | boolean>;
  log?: (line: string) => void;
}

const NAMESPACE = 'default';
/** How long closed workflows are kept: the least the server accepts, as the CLI's dev server keeps them. */
const RETENTION = '1 day';
const READY_TIMEOUT_MS = 60_000;
const DYNAMIC_CONFIG = fileURLToPath(new URL('dynamicconfig.yaml', import.meta.url));

/**
 * Asks the kernel for `count` distinct free TCP ports on loopback. All are held open until every
 * one is known, so two of them can never be the same port.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer().listen(0, '127.0.0.1'));
  try {
    await Promise.all(servers.map((server) => once(server, 'listening')));
    return servers.map((server) => {
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('could not read a free port');
      return address.port;
    });
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

/** One free TCP port on loopback. */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port as number;
}

/**
 * How many times a server that exits before it serves is started again. The server's ports (gRPC,
 * HTTP, and each service's membership and internal ports) are picked free just before it starts;
 * with many servers and tests starting at once on one machine, another process can take one of
 * them in between, and the server then ends with "address already in use". A fresh start picks
 * fresh ports.
 */
const START_ATTEMPTS = 3;

/**
 * Builds what is missing (the server, and the UI server with `ui: true`, side by side), starts the
 * server, and resolves once it serves the namespace with the search attributes registered.
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const log = options.log ?? ((line: string) => process.stderr.write(`[dev-server] ${line}\n`));
  const [build, uiServer] = await allSettledOrThrow([
    resolveTemporalServer(process.env, log),
    options.ui ? resolveTemporalUi(process.env, log) : Promise.resolve(null),
  ]);
  const attempts = options.port === undefined ? START_ATTEMPTS : 1;
  let server: StartedServer;
  for (let attempt = 1; ; attempt++) {
    try {
      server = await startServer(build.server, options);
      break;
    } catch (err) {
      if (!(err instanceof ExitedBeforeServing) || attempt >= attempts) throw err;
      log(
        `the server exited before serving (attempt ${attempt} of ${attempts}), starting it again: ${err.summary}`,
      );
    }
  }
  let ui: StartedUi | null = null;
  try {
    if (uiServer) ui = await startUi(uiServer, server.address, options.uiCodecEndpoint ?? null, log);
  } catch (err) {
    await server.stop();
    throw err;
  }
  log(
    `started Temporal Server ${server.version} pid ${server.pid} on ${server.address}` +
      (ui ? ` with Temporal UI ${ui.version} on ${ui.url}` : ''),
  );
  return {
    address: server.address,
    namespace: NAMESPACE,
    version: server.version,
    uiUrl: ui?.url ?? null,
    uiVersion: ui?.version ?? null,
    pid: server.pid,
    stop: async () => {
      await ui?.stop();
      await server.stop();
      log(`stopped Temporal Server pid ${server.pid}`);
    },
  };
}

/** The server process ended before it answered; `summary` is the line of its output that says why. */
class ExitedBeforeServing extends Error {
  constructor(
    readonly code: number | string,
    readonly summary = '',
    output = '',
  ) {
    super(
      `Temporal dev server did not start: it exited with code ${code}${summary && `: ${summary}`}\n${output}`,
    );
    this.name = 'ExitedBeforeServing';
  }
}

/** The first line that reads like the reason a Go server stopped, or the output's last line. */
function reasonIn(output: string): string {
  const lines = output.split('\n').map((line) => line.trim());
  const reason = lines.find((line) => /^(panic|fatal|error)\b|address already in use/i.test(line));
  return (reason ?? lines.filter(Boolean).at(-1) ?? '(no output)').slice(0, 500);
}

interface StartedServer {
  address: string;
  version: string;
  pid: number | null;
  stop(): Promise<void>;
}

/** The gRPC and HTTP ports of the frontend, then each service's own, as the config template names them. */
const PORT_NAMES = [
  'FRONTEND_GRPC_PORT',
  'FRONTEND_HTTP_PORT',
  'FRONTEND_MEMBERSHIP_PORT',
  'HISTORY_GRPC_PORT',
  'HISTORY_MEMBERSHIP_PORT',
  'MATCHING_GRPC_PORT',
  'MATCHING_MEMBERSHIP_PORT',
  'WORKER_GRPC_PORT',
  'WORKER_MEMBERSHIP_PORT',
] as const;

/**
 * The dynamic config file of one start: dev/dynamicconfig.yaml, the Nexus callback address of this
 * start's HTTP port, and the caller's values, checked by the server itself.
 */
function writeDynamicConfig(
  server: string,
  dir: string,
  httpAddress: string,
  extra: Record<string, string | number | boolean>,
): string {
  const config = parse(readFileSync(DYNAMIC_CONFIG, 'utf8')) as Record<string, unknown>;
  const set = (key: string, value: unknown) => (config[key] = [{ value, constraints: {} }]);
  // A Nexus operation's completion comes back to the caller's namespace over the frontend's HTTP
  // API: the server needs the address to put in the operation's callback, and must accept it (plain
  // HTTP, on loopback). The CLI's dev server sets the same; Server 1.32 reads the first two keys in
  // its two implementations of Nexus operations, and the third for every callback.
  const callback = `http://${httpAddress}/namespaces/{{.NamespaceName}}/nexus/callback`;
  set('component.nexusoperations.callback.endpoint.template', callback);
  set('nexusoperation.callback.endpoint.template', callback);
  set('callback.allowedAddresses', [{ Pattern: httpAddress, AllowInsecure: true }]);
  for (const [key, value] of Object.entries(extra)) set(key, value);
  const file = join(dir, 'dynamicconfig.yaml');
  writeFileSync(file, stringify(config));
  const problems = dynamicConfigProblems(server, file);
  if (problems)
    throw new Error(`the dev server's dynamic config does not pass the server's check:\n${problems}`);
  return file;
}

async function startServer(server: string, options: DevServerOptions): Promise<StartedServer> {
  const ports = await freePorts(PORT_NAMES.length);
  if (options.port !== undefined) ports[0] = options.port;
  const [grpcPort, httpPort] = ports as [number, number];
  const dir = mkdtempSync(join(tmpdir(), 'agent-job-temporal-dev-'));
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  let dynamicConfig: string;
  try {
    dynamicConfig = writeDynamicConfig(server, dir, `127.0.0.1:${httpPort}`, options.dynamicConfig ?? {});
  } catch (err) {
    removeDir();
    throw err;
  }
  // `temporal-server start` renders the config template embedded in the binary from the
  // environment, as the temporalio/server image does (and test:cluster). Its SQLite branch is the
  // server's own development-sqlite.yaml: one history shard, and each store in memory (created with
  // its schema at start, gone at exit), over one connection.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DB: 'sqlite',
    SQLITE_MODE: 'memory',
    NUM_HISTORY_SHARDS: '1',
    BIND_ON_IP: '127.0.0.1',
    DYNAMIC_CONFIG_FILE_PATH: dynamicConfig,
    LOG_LEVEL: 'error',
    ...Object.fromEntries(PORT_NAMES.map((name, i) => [name, String(ports[i])])),
  };
  const child = spawn(server, ['start'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  // The start of the output says why a server stopped (a Go panic's first line); its end, what it
  // was doing. Both are kept, bounded.
  let head = '';
  let tail = '';
  const keep = (chunk: Buffer) => {
    const text = chunk.toString();
    if (head.length < 3000) head += text.slice(0, 3000 - head.length);
    tail = (tail + text).slice(-2000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const address = `127.0.0.1:${grpcPort}`;
  const stop = async () => {
    await stopChild(child);
    removeDir();
  };
  try {
    const version = await prepare(address, child);
    return { address, version, pid: child.pid ?? null, stop };
  } catch (err) {
    await stop();
    const output = head.length < 3000 ? head : `${head}\n[...]\n${tail}`;
    if (err instanceof ExitedBeforeServing) throw new ExitedBeforeServing(err.code, reasonIn(output), output);
    throw new Error(`Temporal dev server did not start: ${(err as Error).message}\n${output}`, {
      cause: err,
    });
  }
}

/**
 * Waits until the server answers, registers the namespace and the search attributes (what
 * `temporal server start-dev --search-attribute` did; the compose stack's temporal-init.sh does the
 * same with the CLI), and waits until the namespace serves them. Resolves with the server's version.
 */
async function prepare(address: string, child: ChildProcess): Promise<string> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  const connection = await until(deadline, child, 'the server to answer', () =>
    Connection.connect({ address, connectTimeout: 1_000 }),
  );
  try {
    const { serverVersion } = await until(deadline, child, 'the server to serve', () =>
      connection.workflowService.getSystemInfo({}),
    );
    await until(deadline, child, `namespace ${NAMESPACE} to be registered`, async () => {
      try {
        await connection.workflowService.registerNamespace({
          namespace: NAMESPACE,
          workflowExecutionRetentionPeriod: msToTs(RETENTION),
        });
      } catch (err) {
        // A retry after an attempt whose answer was lost finds the namespace made.
        if (!isAlreadyExists(err)) throw err;
      }
    });
    const wanted = new Map(
      ALL_SEARCH_ATTRIBUTES.map((key) => {
        const type = encodeSearchAttributeIndexedValueType(key.type);
        if (type === undefined) throw new Error(`search attribute ${key.name}: unknown type ${key.type}`);
        return [key.name, type];
      }),
    );
    await until(deadline, child, 'the search attributes to be registered', async () => {
      const { customAttributes } = await connection.operatorService.listSearchAttributes({
        namespace: NAMESPACE,
      });
      const missing = [...wanted].filter(([name]) => !(customAttributes && name in customAttributes));
      if (missing.length === 0) return;
      await connection.operatorService.addSearchAttributes({
        namespace: NAMESPACE,
        searchAttributes: Object.fromEntries(missing),
      });
      throw new Error(`registered ${missing.map(([name]) => name).join(', ')}; reading them back`);
    });
    // Starts, polls and visibility go through each service's namespace registry, which learns of a
    // namespace made a moment ago on its first miss: a visibility call shows the frontend's has.
    await until(deadline, child, `namespace ${NAMESPACE} to serve`, () =>
      connection.workflowService.countWorkflowExecutions({ namespace: NAMESPACE }),
    );
    return serverVersion ?? 'version unknown';
  } finally {
    await connection.close();
  }
}

function isAlreadyExists(err: unknown): boolean {
  // gRPC status 6, ALREADY_EXISTS.
  return (err as { code?: unknown } | null)?.code === 6;
}

/**
 * Calls `attempt` until it resolves, every 200 ms, and fails at the deadline with its last error,
 * or at once when the server process has exited.
 */
async function until<T>(
  deadline: number,
  child: ChildProcess,
  what: string,
  attempt: () => Promise<T>,
): Promise<T> {
  let lastError: unknown = null;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new ExitedBeforeServing(child.exitCode ?? child.signalCode ?? 'unknown');
    }
    try {
      return await attempt();
    } catch (err) {
      lastError = err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`timed out waiting for ${what} (${READY_TIMEOUT_MS / 1000}s)`, { cause: lastError });
}

/** A running Temporal UI server. */
export interface StartedUi {
  url: string;
  version: string;
  stop(): Promise<void>;
}

/**
 * Starts the Temporal UI server on a free loopback port, for the server at `temporalAddress`, with
 * the settings the CLI's dev server gives its embedded UI, and waits until it answers.
 */
/**
 * Starts a Temporal UI server as {@link startDevServer} does, for a server already running at
 * `temporalAddress`, with `codecEndpoint` as its codec endpoint (null: none). For the test that
 * compares the UI with and without the codec server.
 */
export async function startTemporalUi(
  temporalAddress: string,
  codecEndpoint: string | null,
  log: (line: string) => void = () => {},
): Promise<StartedUi> {
  return startUi(await resolveTemporalUi(process.env, log), temporalAddress, codecEndpoint, log);
}

async function startUi(
  binary: string,
  temporalAddress: string,
  codecEndpoint: string | null,
  log: (line: string) => void,
): Promise<StartedUi> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'agent-job-temporal-ui-'));
  mkdirSync(join(dir, 'config'));
  // The UI server reads config/<env>.yaml under its root; JSON is YAML.
  const config = {
    temporalGrpcAddress: temporalAddress,
    host: '127.0.0.1',
    port,
    enableUi: true,
    defaultNamespace: NAMESPACE,
    // Plain HTTP on loopback: the session cookie cannot be Secure.
    cors: { cookieInsecure: true },
    hideLogs: true,
    // The browser calls it; on the dev stack it needs no token (the codec server's local-only allowance).
    ...(codecEndpoint !== null && { codec: { endpoint: codecEndpoint } }),
  };
  writeFileSync(join(dir, 'config', 'development.yaml'), JSON.stringify(config, null, 2));
  const child = spawn(binary, ['--root', dir, '--config', 'config', '--env', 'development', 'start'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-3000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await until(Date.now() + READY_TIMEOUT_MS, child, 'the Temporal UI to answer', async () => {
      const response = await fetch(url);
      if (!response.ok) throw new Error(`GET ${url} answered ${response.status}`);
    });
  } catch (err) {
    await stop();
    throw new Error(`the Temporal UI server did not start: ${(err as Error).message}\n${output}`, {
      cause: err,
    });
  }
  log(
    `started Temporal UI server pid ${child.pid} on ${url}` +
      (codecEndpoint === null ? '' : ` with its codec endpoint at ${codecEndpoint}`),
  );
  // It prints "Temporal UI version 2.54.1"; the release is what the other version lines show.
  const said = versionOf(binary);
  return { url, version: /\d+\.\d+\.\d+\S*/.exec(said)?.[0] ?? said, stop };
}

/** The release of the Temporal TypeScript SDK that is installed, for the lines that print versions. */
export function sdkVersion(): string {
  return (createRequire(import.meta.url)('@temporalio/client/package.json') as { version: string }).version;
}

/** Stops a server process: SIGTERM, then SIGKILL after 10 s, and waits for it to exit. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}
