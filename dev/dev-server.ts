/**
 * Starts a real Temporal server for tests, the demo and the benchmark: `temporal server start-dev`
 * of the CLI that dev/temporal-cli.ts resolves, with the project's search attributes registered.
 * When only the SDK's download is left, it uses @temporalio/testing's local environment instead.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { Connection } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { ALL_SEARCH_ATTRIBUTES } from '../src/contract.js';
import { resolveTemporalCli } from './temporal-cli.js';

/** A running dev server. `stop()` ends it and waits for the process to exit. */
export interface DevServer {
  address: string;
  namespace: string;
  /** The Temporal UI, when started with `ui: true` from a CLI binary. */
  uiUrl: string | null;
  pid: number | null;
  stop(): Promise<void>;
}

/** Options of {@link startDevServer}. */
export interface DevServerOptions {
  /** Serve the Temporal UI too. Default false. */
  ui?: boolean;
  /** gRPC port; a free one by default. */
  port?: number;
  /** Extra `--dynamic-config-value` pairs, e.g. `frontend.rps=10000` for the benchmark. */
  dynamicConfig?: Record<string, string | number | boolean>;
  log?: (line: string) => void;
}

const NAMESPACE = 'default';
const READY_TIMEOUT_MS = 60_000;

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
 * How many times a server that exits before it serves is started again. The dev server picks free
 * ports of its own (HTTP, metrics, the services' internal ports) when it starts; with many servers
 * and tests starting at once on one machine, another process can take one of them in between, and
 * the server then ends with "address already in use". A fresh start picks fresh ports.
 */
const START_ATTEMPTS = 3;

/** Starts the dev server and resolves once it answers on gRPC. */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const log = options.log ?? ((line: string) => process.stderr.write(`[dev-server] ${line}\n`));
  const cli = await resolveTemporalCli(process.env, (line) => log(line));
  if (cli.path === null) return startWithSdkDownload(log);
  const attempts = options.port === undefined ? START_ATTEMPTS : 1;
  for (let attempt = 1; ; attempt++) {
    try {
      return await startCliServer(cli.path, options, log);
    } catch (err) {
      if (!(err instanceof ExitedBeforeServing) || attempt >= attempts) throw err;
      log(
        `the server exited before serving (attempt ${attempt} of ${attempts}), starting it again: ${err.summary}`,
      );
    }
  }
}

/** The server process ended before it answered; `summary` is the line of its output that says why. */
class ExitedBeforeServing extends Error {
  constructor(
    readonly code: number,
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

async function startCliServer(
  cliPath: string,
  options: DevServerOptions,
  log: (line: string) => void,
): Promise<DevServer> {
  const [grpcPort, freeUiPort] = await freePorts(2);
  const port = options.port ?? grpcPort;
  const uiPort = options.ui ? (freeUiPort as number) : null;
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--log-level', 'error'];
  args.push(...(uiPort === null ? ['--headless'] : ['--ui-port', String(uiPort)]));
  for (const key of ALL_SEARCH_ATTRIBUTES) args.push('--search-attribute', `${key.name}=Keyword`);
  for (const [name, value] of Object.entries(options.dynamicConfig ?? {})) {
    args.push('--dynamic-config-value', `${name}=${JSON.stringify(value)}`);
  }
  const child = spawn(cliPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
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
  const address = `127.0.0.1:${port}`;
  try {
    await waitUntilServing(address, child);
  } catch (err) {
    await stopChild(child);
    const output = head.length < 3000 ? head : `${head}\n[...]\n${tail}`;
    if (err instanceof ExitedBeforeServing) throw new ExitedBeforeServing(err.code, reasonIn(output), output);
    throw new Error(`Temporal dev server did not start: ${(err as Error).message}\n${output}`, {
      cause: err,
    });
  }
  const uiUrl = uiPort === null ? null : `http://127.0.0.1:${uiPort}`;
  log(
    `started Temporal dev server pid ${child.pid} from ${cliPath} on ${address}${uiUrl ? ` (UI ${uiUrl})` : ''}`,
  );
  return {
    address,
    namespace: NAMESPACE,
    uiUrl,
    pid: child.pid ?? null,
    stop: async () => {
      await stopChild(child);
      log(`stopped Temporal dev server pid ${child.pid}`);
    },
  };
}

async function waitUntilServing(address: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let lastError: unknown = null;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new ExitedBeforeServing(child.exitCode);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      try {
        await connection.workflowService.describeNamespace({ namespace: NAMESPACE });
        return;
      } finally {
        await connection.close();
      }
    } catch (err) {
      lastError = err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`no answer on ${address} within ${READY_TIMEOUT_MS / 1000}s`, { cause: lastError });
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

async function startWithSdkDownload(log: (line: string) => void): Promise<DevServer> {
  let env: TestWorkflowEnvironment;
  try {
    env = await TestWorkflowEnvironment.createLocal({ server: { searchAttributes: ALL_SEARCH_ATTRIBUTES } });
  } catch (err) {
    throw new Error(
      'cannot start a Temporal server: no Temporal CLI, no Go toolchain to build one, and the SDK download failed. ' +
        'Install Go 1.24+ or the Temporal CLI, or set TEMPORAL_CLI_PATH.',
      { cause: err },
    );
  }
  const address = env.address;
  log(`started Temporal dev server from the SDK download on ${address}`);
  return {
    address,
    namespace: env.namespace ?? NAMESPACE,
    uiUrl: null,
    pid: null,
    stop: () => env.teardown(),
  };
}
