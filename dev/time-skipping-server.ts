/**
 * Temporal's time-skipping test server (the Java one from sdk-java), for measurements that need
 * hours of workflow time in minutes: while time skipping is unlocked and nothing is running, it
 * jumps its clock to the next timer.
 *
 * This machine reaches package registries only, so the SDK's own download of the test server may
 * fail here. Maven Central is reachable: the jars are resolved once with Maven
 * (dev/time-skipping-server/pom.xml) into a cache shared by every clone.
 *
 * The server is started here rather than through @temporalio/testing's
 * `TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path' } } })`,
 * which does accept a launcher script: its core (sdk-core `ephemeral_server`) gives the process 5
 * seconds to answer, and this JVM takes 2.5 s idle and more than 5 on a busy machine. So this module
 * waits on its own deadline, then opens the connection the SDK's environment opens (with the test
 * service, for `unlockTimeSkippingWithSleep` and the server's clock).
 *
 * Run directly (`npx tsx dev/time-skipping-server.ts`) to resolve, download if needed, and print
 * the classpath.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Client, Connection } from '@temporalio/client';
// The option that gives a connection the test service, as @temporalio/testing sets it.
import { InternalConnectionOptionsSymbol } from '@temporalio/client/lib/connection.js';
import { msToTs, tsToMs } from '@temporalio/common/lib/time.js';
import { NativeConnection } from '@temporalio/worker';
import { ALL_SEARCH_ATTRIBUTES } from '../src/contract.js';
import { freePort, stopChild } from './dev-server.js';
import { findOnPath } from './temporal-cli.js';

/** The sdk-java release whose `io.temporal:temporal-test-server` is used. */
export const TEST_SERVER_VERSION = '1.38.0';

const POM = fileURLToPath(new URL('./time-skipping-server/pom.xml', import.meta.url));
const MAIN_CLASS = 'io.temporal.testserver.TestServer';
const NAMESPACE = 'default';
const READY_TIMEOUT_MS = 60_000;
/** `IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD`: every custom search attribute here is a Keyword. */
const KEYWORD = 2;

/** Raised when the test server cannot be resolved; its message is the one line a person needs. */
export class TestServerUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TestServerUnavailableError';
  }
}

/** The cache directory of this test server version, shared by every clone on the machine. */
export function testServerCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'agent-job-orchestrator', `temporal-test-server-${TEST_SERVER_VERSION}`);
}

/**
 * Resolves the test server's jars: the cache, or a first download with Maven. The download goes to
 * a private directory that is renamed into place, so two clones resolving at once never see half a
 * cache.
 *
 * @returns the directory of the jars (the classpath is its `*`)
 */
export async function resolveTestServer(
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = defaultLog,
): Promise<string> {
  const lib = join(testServerCacheDir(env), 'lib');
  if (existsSync(lib)) {
    log(`using the time-skipping test server ${TEST_SERVER_VERSION} from the cache: ${lib}`);
    return lib;
  }
  const mvn = findOnPath('mvn', env);
  if (!mvn) {
    throw new TestServerUnavailableError(
      `no \`mvn\` on PATH: install Maven (e.g. apt-get install maven) to download the time-skipping test server ${TEST_SERVER_VERSION} once`,
    );
  }
  const target = testServerCacheDir(env);
  mkdirSync(join(target, '..'), { recursive: true });
  const scratch = mkdtempSync(`${target}.download-`);
  log(
    `downloading io.temporal:temporal-test-server:${TEST_SERVER_VERSION} from Maven Central into ${target} (once)`,
  );
  const started = Date.now();
  const ticker = setInterval(
    () => log(`still downloading (${Math.round((Date.now() - started) / 1000)}s)`),
    15_000,
  );
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(
        mvn,
        [
          '-B',
          '-q',
          '-Dstyle.color=never',
          '-f',
          POM,
          `-Dtemporal.testserver.version=${TEST_SERVER_VERSION}`,
          'dependency:copy-dependencies',
          '-DincludeScope=runtime',
          `-DoutputDirectory=${join(scratch, 'lib')}`,
        ],
        { env, stdio: ['ignore', 'inherit', 'inherit'] },
      );
      child.on('error', reject);
      child.on('exit', resolve);
    });
    if (code !== 0) {
      throw new TestServerUnavailableError(
        `mvn dependency:copy-dependencies for temporal-test-server ${TEST_SERVER_VERSION} exited with code ${code}`,
      );
    }
    rmSync(target, { recursive: true, force: true });
    renameSync(scratch, target);
    log(`downloaded the test server in ${Math.round((Date.now() - started) / 1000)}s`);
    return lib;
  } finally {
    clearInterval(ticker);
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** A running time-skipping test server and the connections to it. */
export interface TimeSkippingServer {
  address: string;
  namespace: string;
  /** A plain client: time passes only through {@link TimeSkippingServer.sleep}. */
  client: Client;
  /** With the test service, for {@link TimeSkippingServer.sleep} and the current time. */
  connection: Connection;
  /** For workers. */
  nativeConnection: NativeConnection;
  /** Lets `durationMs` of server time pass, skipping it when nothing is running. */
  sleep(durationMs: number): Promise<void>;
  /** The server's clock, which runs ahead of the real one by all the time skipped. */
  currentTimeMs(): Promise<number>;
  /** Closes the connections, kills the server and waits for it to exit. */
  stop(): Promise<void>;
}

/**
 * Starts the test server on a free port and waits until it answers, then registers the project's
 * search attributes: like the dev server, the test server rejects an upsert of one it does not know.
 */
export async function startTimeSkippingServer(
  log: (line: string) => void = defaultLog,
): Promise<TimeSkippingServer> {
  const java = findOnPath('java', process.env);
  if (!java) {
    throw new TestServerUnavailableError(
      'no `java` on PATH: install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless) to run the time-skipping test server',
    );
  }
  const lib = await resolveTestServer(process.env, log);
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const child = spawn(java, ['-cp', join(lib, '*'), MAIN_CLASS, String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const opened: Array<{ close(): Promise<void> }> = [];
  try {
    const connection = await connectWhenServing(address, child);
    opened.push(connection);
    const nativeConnection = await NativeConnection.connect({ address });
    opened.push(nativeConnection);
    await connection.operatorService.addSearchAttributes({
      namespace: NAMESPACE,
      searchAttributes: Object.fromEntries(ALL_SEARCH_ATTRIBUTES.map((key) => [key.name, KEYWORD])),
    });
    const testService = connection.testService;
    if (!testService) throw new Error('the connection has no test service');
    log(`started the time-skipping test server ${TEST_SERVER_VERSION}, pid ${child.pid}, on ${address}`);
    return {
      address,
      namespace: NAMESPACE,
      client: new Client({ connection, namespace: NAMESPACE }),
      connection,
      nativeConnection,
      sleep: async (durationMs) => {
        await testService.unlockTimeSkippingWithSleep({ duration: msToTs(durationMs) });
      },
      currentTimeMs: async () => tsToMs((await testService.getCurrentTime({})).time),
      stop: async () => {
        for (const each of opened.reverse()) await each.close();
        await stopChild(child);
        log(`stopped the time-skipping test server on ${address}`);
      },
    };
  } catch (err) {
    for (const each of opened.reverse()) await each.close();
    await stopChild(child);
    throw new Error(`the time-skipping test server did not start: ${(err as Error).message}\n${output}`, {
      cause: err,
    });
  }
}

async function connectWhenServing(address: string, child: ChildProcess): Promise<Connection> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let lastError: unknown = null;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the server exited with code ${child.exitCode}`);
    try {
      const connection = await Connection.connect({
        address,
        connectTimeout: 1_000,
        [InternalConnectionOptionsSymbol]: { supportsTestService: true },
      } as Parameters<typeof Connection.connect>[0]);
      try {
        await connection.workflowService.getSystemInfo({});
        return connection;
      } catch (err) {
        await connection.close();
        throw err;
      }
    } catch (err) {
      lastError = err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  throw new Error(`no answer on ${address} within ${READY_TIMEOUT_MS / 1000}s`, { cause: lastError });
}

function defaultLog(line: string): void {
  process.stderr.write(`[test-server] ${line}\n`);
}

/** The Java runtime's version line, for the record of a run. */
export function javaVersion(): string {
  const out = spawnSync('java', ['-version'], { encoding: 'utf8' });
  return (out.stderr || out.stdout).split('\n')[0]?.trim() ?? 'unknown';
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  resolveTestServer()
    .then((lib) => process.stdout.write(`${join(lib, '*')}\n`))
    .catch((err: unknown) => {
      process.stderr.write(`[test-server] ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    });
}
