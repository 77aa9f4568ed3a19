/**
 * The API client through a real forward proxy (test/agent-api/forward-proxy.ts, in a child process)
 * to the simulator, under a host name that only the proxy resolves: https:// through a CONNECT
 * tunnel, http:// in absolute form, NO_PROXY, loopback always direct, and proxy credentials never
 * in an error. The proxy prints one line per request it receives; each test counts the lines its
 * own requests made, up to a marker request sent after them.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, request } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createServer as createTlsServer } from 'node:tls';
import { inspect } from 'node:util';
import { getGlobalDispatcher } from 'undici';
import { AgentApiClient, AgentApiError, createDispatcher } from '../../src/agent-api/index.js';
import { WORKFLOW_TYPE, type AgentJobRecord } from '../../src/contract.js';
import type { agentJobWorkflow } from '../../src/workflows/index.js';
import {
  FAST_POLL,
  onCleanup,
  spawnTs,
  startTestSimulator,
  startWorkerProcess,
  temporalEnv,
  uniqueId,
  waitFor,
  workerProcessEnv,
} from '../harness.js';
import { createdJobs } from '../simulator-stats.js';

/** The API's host name in these tests: `.test` is reserved (RFC 2606), resolved only in the proxy's process. */
const HOST = 'agent-api.proxy-only.test';
const API_KEY = `mint_${uniqueId('proxy-secret')}`;
const PROXY_USER = uniqueId('proxy-user');
const PROXY_PASSWORD = uniqueId('proxy-password');
const WRONG_PASSWORD = uniqueId('wrong-password');
/** What an error message must never contain: either credential, or the Basic header made of them. */
const SECRETS = [PROXY_USER, PROXY_PASSWORD, WRONG_PASSWORD, basic(PROXY_PASSWORD), basic(WRONG_PASSWORD)];

function basic(password: string): string {
  return Buffer.from(`${PROXY_USER}:${password}`).toString('base64');
}

/** The test process's environment without proxy variables, for the child processes to add theirs. */
function envWithoutProxies(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['http_proxy', 'HTTP_PROXY', 'https_proxy', 'HTTPS_PROXY', 'no_proxy', 'NO_PROXY']) {
    delete env[name];
  }
  return env;
}

const sim = await startTestSimulator({ apiKeys: [API_KEY], defaultScenario: { durationMs: 60_000 } });
const simPort = Number(new URL(sim.url).port);

/** A self-signed certificate for HOST, made with the machine's openssl for this run only. */
const certDir = mkdtempSync(join(tmpdir(), 'proxy-test-'));
onCleanup(() => rmSync(certDir, { recursive: true, force: true }));
const certPath = join(certDir, 'cert.pem');
const keyPath = join(certDir, 'key.pem');
execFileSync(
  'openssl',
  [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
    ...['-keyout', keyPath, '-out', certPath, '-days', '1', '-subj', `/CN=${HOST}`],
    ...['-addext', `subjectAltName=DNS:${HOST}`],
  ],
  { stdio: ['ignore', 'ignore', 'pipe'] },
);

/**
 * The simulator behind TLS: https://HOST:tlsPort/ once the proxy has resolved HOST. It keeps the
 * server name (SNI) each connection asked for.
 */
const tlsSockets = new Set<Socket>();
const tlsServerNames: Array<string | false | null> = [];
const tlsFront = createTlsServer({ cert: readFileSync(certPath), key: readFileSync(keyPath) }, (socket) => {
  tlsServerNames.push(socket.servername);
  const upstream = connect(simPort, '127.0.0.1');
  for (const s of [socket, upstream]) {
    tlsSockets.add(s);
    s.on('close', () => tlsSockets.delete(s));
    // An error is only a test's connection going away: end both sides.
    s.on('error', () => {
      socket.destroy();
      upstream.destroy();
    });
  }
  socket.pipe(upstream).pipe(socket);
});
tlsFront.listen(0, '127.0.0.1');
await once(tlsFront, 'listening');
const tlsPort = (tlsFront.address() as { port: number }).port;
onCleanup(async () => {
  for (const socket of tlsSockets) socket.destroy();
  await new Promise((resolve) => tlsFront.close(resolve));
});

/** One request as the proxy printed it. */
interface ProxyRequest {
  method: string;
  target: string;
  authorized: boolean;
}

const proxyProcess = spawnTs('test/agent-api/forward-proxy.ts', [], {
  ...envWithoutProxies(),
  PROXY_ONLY_HOST: HOST,
  PROXY_CREDENTIALS: `${PROXY_USER}:${PROXY_PASSWORD}`,
});
await proxyProcess.waitForOutput(/^listening \d+$/m, 'the proxy to listen');
const proxyPort = Number(/^listening (\d+)$/m.exec(proxyProcess.stdout())?.[1]);

/** The proxy's URL with its user and `password` (the right one by default). */
function proxyUrl(password = PROXY_PASSWORD): string {
  return `http://${PROXY_USER}:${password}@127.0.0.1:${proxyPort}`;
}

function proxyRequests(): ProxyRequest[] {
  return proxyProcess
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as ProxyRequest);
}

/**
 * Runs `scenario`, then sends the proxy a marker request of its own and waits until the proxy has
 * printed it: the lines before it and after the scenario's start are every request the scenario
 * made through the proxy, none still on its way (so a count of zero means none).
 */
async function throughProxy<T>(scenario: () => Promise<T>): Promise<{ result: T; requests: ProxyRequest[] }> {
  const before = proxyRequests().length;
  const result = await scenario();
  const marker = `http://marker.invalid/${uniqueId('marker')}`;
  const req = request({ host: '127.0.0.1', port: proxyPort, path: marker, agent: false });
  req.end();
  const [response] = (await once(req, 'response')) as [NodeJS.ReadableStream];
  response.resume();
  const requests = await waitFor(
    () => {
      const all = proxyRequests();
      const at = all.findIndex((r) => r.target === marker);
      return at === -1 ? null : all.slice(before, at);
    },
    { what: 'the marker request at the proxy' },
  );
  return { result, requests };
}

/** A client of the simulator at `baseUrl` through a dispatcher made from `env` alone. */
function clientFor(baseUrl: string, env: NodeJS.ProcessEnv): AgentApiClient {
  const dispatcher = createDispatcher({ connectTimeoutMs: 5_000 }, env);
  onCleanup(() => dispatcher.close());
  return new AgentApiClient({ baseUrl, apiKey: API_KEY, dispatcher });
}

/** Creates an agent job in a fresh project and reads it back. */
async function createAndRead(
  client: AgentApiClient,
): Promise<{ projectId: string; created: AgentJobRecord; read: AgentJobRecord }> {
  const projectId = uniqueId('proxy');
  const created = await client.createJob(projectId, 'Through the proxy', { idempotencyKey: uniqueId('key') });
  const read = await client.getJob(projectId, created.id);
  return { projectId, created, read };
}

/** The error a call rejected with; fails the test when it succeeded. */
async function rejection(call: Promise<unknown>): Promise<AgentApiError> {
  const err = await call.then(
    () => assert.fail('the call succeeded'),
    (error: unknown) => error,
  );
  assert.ok(err instanceof AgentApiError, `expected an AgentApiError, got ${inspect(err)}`);
  return err;
}

function assertNoSecrets(text: string, what: string): void {
  for (const secret of SECRETS)
    assert.ok(!text.includes(secret), `${what} shows a proxy credential:\n${text}`);
}

/**
 * Runs test/agent-api/proxy-client.ts with `env` added; resolves with its one JSON line, its output
 * and its exit code.
 */
async function runClientProcess(
  env: NodeJS.ProcessEnv,
): Promise<{ line: Record<string, unknown>; output: string; exitCode: number | string }> {
  const child = spawnTs('test/agent-api/proxy-client.ts', [], {
    ...envWithoutProxies(),
    AGENT_API_BASE_URL: `https://${HOST}:${tlsPort}`,
    AGENT_API_KEY: API_KEY,
    PROJECT_ID: uniqueId('proxy-child'),
    NODE_EXTRA_CA_CERTS: certPath,
    ...env,
  });
  await waitFor(() => child.child.exitCode !== null, {
    what: 'the client process to exit',
    timeoutMs: 30_000,
  });
  const line = child
    .stdout()
    .split('\n')
    .find((l) => l.startsWith('{'));
  assert.ok(line, `the client process printed no result:\n${child.stdout()}\n${child.stderr()}`);
  return {
    line: JSON.parse(line) as Record<string, unknown>,
    output: child.stdout() + child.stderr(),
    exitCode: await child.exited,
  };
}

describe('the agent API through a forward proxy', () => {
  test('the test process itself cannot resolve the proxy-only host name', async () => {
    await assert.rejects(lookup(HOST), (err: NodeJS.ErrnoException) =>
      ['ENOTFOUND', 'EAI_AGAIN'].includes(err.code ?? ''),
    );
  });

  test('https:// goes through one CONNECT tunnel, trusted by NODE_EXTRA_CA_CERTS, from HTTPS_PROXY in the environment', async () => {
    const tlsBefore = tlsServerNames.length;
    const { result, requests } = await throughProxy(() => runClientProcess({ HTTPS_PROXY: proxyUrl() }));
    const { created, read } = result.line as { created: AgentJobRecord; read: AgentJobRecord };
    assert.ok(created, `the client process failed: ${JSON.stringify(result.line)}`);
    assert.equal(result.exitCode, 0);
    assert.equal(read.id, created.id);
    assert.equal(read.status, 'active');
    // Both calls on one tunnel: the dispatcher keeps the proxied connection alive like a direct one.
    assert.deepEqual(requests, [{ method: 'CONNECT', target: `${HOST}:${tlsPort}`, authorized: true }]);
    // The TLS inside the tunnel names the API's host (SNI), as a direct connection would.
    assert.deepEqual(tlsServerNames.slice(tlsBefore), [HOST]);
  });

  test('http:// goes through the proxy in absolute form, from the lowercase http_proxy', async () => {
    const globalBefore = getGlobalDispatcher();
    const client = clientFor(`http://${HOST}:${simPort}`, { http_proxy: proxyUrl() });
    const { result, requests } = await throughProxy(() => createAndRead(client));
    const { projectId, created, read } = result;
    assert.deepEqual(read, created);
    assert.equal(read.status, 'active');
    assert.equal(sim.stats().jobsPerProject[projectId], 1);
    const jobs = `http://${HOST}:${simPort}/v2/agent/${projectId}/job`;
    assert.deepEqual(requests, [
      { method: 'POST', target: jobs, authorized: true },
      { method: 'GET', target: `${jobs}/${created.id}`, authorized: true },
    ]);
    assert.equal(getGlobalDispatcher(), globalBefore, 'a proxy dispatcher must not become the global one');
  });

  test('NO_PROXY excludes a host it names, and only that host', async () => {
    const excluded = clientFor(`http://${HOST}:${simPort}`, {
      HTTP_PROXY: proxyUrl(),
      NO_PROXY: 'example.com, .proxy-only.test',
    });
    const { result: err, requests } = await throughProxy(() => rejection(excluded.getJob('p', 'job_1')));
    // Sent directly, so this process had to resolve the name itself, and could not.
    assert.equal(err.type, 'NetworkError', err.message);
    assert.match(inspect(err), /ENOTFOUND|EAI_AGAIN/);
    assert.deepEqual(requests, []);

    const other = clientFor(`http://${HOST}:${simPort}`, { HTTP_PROXY: proxyUrl(), no_proxy: 'example.com' });
    const proxied = await throughProxy(() => createAndRead(other));
    assert.equal(proxied.result.read.id, proxied.result.created.id);
    assert.equal(proxied.requests.length, 2);
  });

  test('loopback bypasses the proxy even with NO_PROXY empty', async () => {
    const env = { HTTP_PROXY: proxyUrl(), HTTPS_PROXY: proxyUrl(), NO_PROXY: '' };
    const { result, requests } = await throughProxy(async () => [
      await createAndRead(clientFor(sim.url, env)),
      await createAndRead(clientFor(`http://localhost:${simPort}`, env)),
    ]);
    for (const { projectId, created, read } of result) {
      assert.equal(read.id, created.id);
      assert.equal(sim.stats().jobsPerProject[projectId], 1);
    }
    assert.deepEqual(requests, []);
  });

  test("the dispatcher's timeouts hold for absolute-form requests through the proxy", async () => {
    const projectId = uniqueId('proxy-hang');
    sim.setScenario(projectId, { faults: { rules: [{ endpoint: 'get', kind: 'hang' }] } });
    const dispatcher = createDispatcher({ headersTimeoutMs: 300 }, { HTTP_PROXY: proxyUrl() });
    onCleanup(() => dispatcher.close());
    // The client's own bound, far above the 300 ms, ends the call should the proxied pool lose them.
    const client = new AgentApiClient({
      baseUrl: `http://${HOST}:${simPort}`,
      apiKey: API_KEY,
      dispatcher,
      requestTimeoutMs: 10_000,
    });
    const { result: err, requests } = await throughProxy(() => rejection(client.getJob(projectId, 'job_1')));
    assert.equal(err.type, 'RequestTimeout', err.message);
    // undici's headers timeout (300 ms), not the client's bound.
    assert.match(err.message, /no response headers in time/);
    assert.equal(requests.length, 1);
  });

  test('a proxy that refuses: no credential in any error', async () => {
    // Absolute form: the proxy answers 407 to the request itself.
    const absolute = clientFor(`http://${HOST}:${simPort}`, { HTTP_PROXY: proxyUrl(WRONG_PASSWORD) });
    const refused = await throughProxy(() => rejection(absolute.getJob('p', 'job_1')));
    assert.deepEqual(refused.requests, [
      { method: 'GET', target: `http://${HOST}:${simPort}/v2/agent/p/job/job_1`, authorized: false },
    ]);
    // Nothing reached the API: final, never ambiguous, and the message says what to check.
    assert.equal(refused.result.type, 'ProxyRefused', refused.result.message);
    assert.equal(refused.result.requestMayHaveTakenEffect, false);
    assert.match(refused.result.message, /407/);
    assertNoSecrets(`${refused.result.message}\n${inspect(refused.result, { depth: 10 })}`, 'the 407 error');

    // CONNECT: the proxy answers 407 to the tunnel, in a process that reads HTTPS_PROXY itself.
    const tunnel = await throughProxy(() => runClientProcess({ HTTPS_PROXY: proxyUrl(WRONG_PASSWORD) }));
    assert.ok(tunnel.result.line.error, `the call succeeded: ${JSON.stringify(tunnel.result.line)}`);
    assert.equal(tunnel.result.exitCode, 1);
    assert.equal((tunnel.result.line.error as { type: unknown }).type, 'ProxyRefused');
    assert.deepEqual(tunnel.requests, [
      { method: 'CONNECT', target: `${HOST}:${tlsPort}`, authorized: false },
    ]);
    assertNoSecrets(tunnel.result.output, "the client process's output");
  });

  test('an unreachable proxy: refused at its address, no credential in the error', async () => {
    const closed = createServer().listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const closedPort = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = clientFor(`https://${HOST}`, {
      HTTPS_PROXY: `http://${PROXY_USER}:${PROXY_PASSWORD}@127.0.0.1:${closedPort}`,
    });
    const err = await rejection(unreachable.getJob('p', 'job_1'));
    assert.equal(err.type, 'NetworkError', err.message);
    const detail = inspect(err, { depth: 10 });
    assertNoSecrets(`${err.message}\n${detail}`, 'the connection error');
    // Refused at the proxy's address: with HTTPS_PROXY ignored, this process would have tried to
    // resolve HOST itself and failed with ENOTFOUND, a NetworkError too.
    assert.match(detail, new RegExp(`ECONNREFUSED 127\\.0\\.0\\.1:${closedPort}\\b`));
  });

  test('a proxy variable without a scheme is taken as an http:// proxy, as curl takes it', async () => {
    const client = clientFor(`http://${HOST}:${simPort}`, {
      HTTP_PROXY: `${PROXY_USER}:${PROXY_PASSWORD}@127.0.0.1:${proxyPort}`,
    });
    const { result, requests } = await throughProxy(() => createAndRead(client));
    assert.equal(result.read.id, result.created.id);
    assert.deepEqual(
      requests.map((r) => [r.method, r.authorized]),
      [
        ['POST', true],
        ['GET', true],
      ],
    );
  });

  test('a proxy variable that is not an http(s) URL is refused without showing its value', () => {
    for (const value of [
      `ftp://${PROXY_USER}:${PROXY_PASSWORD}@proxy:21`,
      `http://${PROXY_USER}:${PROXY_PASSWORD}@[bad`,
    ]) {
      assert.throws(
        () => createDispatcher({}, { HTTPS_PROXY: value }),
        (err: Error) => {
          assert.match(err.message, /^HTTPS_PROXY must be an http:\/\/ or https:\/\/ proxy URL/);
          assertNoSecrets(inspect(err), 'the error');
          return true;
        },
      );
    }
  });

  test('a workflow behind a proxy that answers 503 to CONNECT for a while completes, with one create', async () => {
    // Squid or Envoy while the upstream is out of reach for a moment: 503 to every CONNECT, then
    // tunnels again. It resolves HOST itself, as the forward proxy does. 30 s: the outage issue 55
    // measured, longer than a create's first few retries.
    const UNREACHABLE_MS = 30_000;
    let unreachableUntil = Number.POSITIVE_INFINITY;
    const answered: number[] = [];
    const flaky = createHttpServer((_req, res) => res.writeHead(400).end());
    flaky.on('connect', (req, socket: Socket, head: Buffer) => {
      socket.on('error', () => socket.destroy());
      if (Date.now() < unreachableUntil || req.url !== `${HOST}:${tlsPort}`) {
        answered.push(503);
        socket.end('HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n');
        return;
      }
      answered.push(200);
      const upstream = connect(tlsPort, '127.0.0.1', () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        socket.pipe(upstream).pipe(socket);
      });
      upstream.on('error', () => socket.destroy());
    });
    flaky.listen(0, '127.0.0.1');
    await once(flaky, 'listening');
    onCleanup(() => {
      flaky.closeAllConnections();
      return new Promise<void>((resolve) => flaky.close(() => resolve()));
    });

    const env = await temporalEnv();
    const worker = await workerProcessEnv(
      env,
      { url: `https://${HOST}:${tlsPort}`, apiKey: API_KEY },
      {
        HTTPS_PROXY: `http://127.0.0.1:${(flaky.address() as { port: number }).port}`,
        NODE_EXTRA_CA_CERTS: certPath,
      },
    );
    await startWorkerProcess(worker);
    const projects = [uniqueId('proxy-503'), uniqueId('proxy-503')];
    for (const projectId of projects) sim.setScenario(projectId, { durationMs: 300 });
    unreachableUntil = Date.now() + UNREACHABLE_MS;
    const handles = await Promise.all(
      projects.map((projectId) =>
        env.client.workflow.start<typeof agentJobWorkflow>(WORKFLOW_TYPE, {
          taskQueue: worker.taskQueue,
          workflowId: uniqueId('proxy-503'),
          args: [
            { projectId, prompt: 'Behind a proxy that cannot reach the API for a moment', poll: FAST_POLL },
          ],
        }),
      ),
    );
    const results = await Promise.all(handles.map((handle) => handle.result()));
    for (const [i, result] of results.entries()) {
      assert.equal(result.status, 'completed', JSON.stringify(result));
      assert.equal(result.resent, 0, 'nothing sent again: a 503 to CONNECT is not ambiguous');
      assert.equal(createdJobs(sim, projects[i] ?? ''), 1, 'one agent job per workflow');
    }
    const refused = answered.filter((status) => status === 503).length;
    assert.ok(refused >= 2, `the proxy answered ${answered.join(',')}`);
    process.stdout.write(
      `# behind a proxy answering 503 for ${UNREACHABLE_MS / 1000} s: ${results.length} workflows completed, ` +
        `creates ${projects.map((projectId) => createdJobs(sim, projectId)).join(',')}, ${refused} CONNECTs refused\n`,
    );
  });
});
