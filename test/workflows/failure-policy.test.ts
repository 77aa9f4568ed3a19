/**
 * The failure policy (src/failure-policy/) where it is used: a workflow's end over the
 * real server, a real worker and the simulator over HTTP (or a real TLS or HTTP server where the
 * simulator cannot play the fault). Each test holds a promise the policy makes: a key that stops
 * working loses no agent job, a key that never worked creates none, a failure that never left is
 * not ambiguous, a redirect is never resent, an answer that will not change is not waited out.
 *
 * Windows are short here; `KEY_EXPIRY_MS` lengthens the fleet's key expiry (the closing figures of
 * issue 43 ran it at 120,000).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { AgentApiClient } from '../../src/agent-api/index.js';
import { createActivities } from '../../src/activities/index.js';
import { FailureType, statusQuery, type AgentJobInput } from '../../src/contract.js';
import type { agentJobWorkflow } from '../../src/workflows/index.js';
import {
  onCleanup,
  startSimulatedSuite,
  startTestWorker,
  uniqueId,
  waitFor,
  workflowFailure,
  type TestWorker,
} from '../harness.js';
import { captureHistory } from '../capture-history.js';
import { answeredWith, createdJobs, requestsTo } from '../simulator-stats.js';

const KEY_EXPIRY_MS = Number(process.env.KEY_EXPIRY_MS ?? 6_000);
const POLL = { initialInterval: '300ms', maxInterval: '1s', backoffCoefficient: 1.5 };

const suite = await startSimulatedSuite('policy', { durationMs: 2_000 });
const { env, sim, project, apiKey } = suite;
const failing = await suite.startWorker({ ambiguousCreatePolicy: 'fail' });

type Handle = WorkflowHandle<typeof agentJobWorkflow>;

function start(input: Partial<AgentJobInput> & { projectId: string }, on: TestWorker = suite.worker) {
  return suite.startJob({ prompt: 'Document the API', poll: POLL, ...input }, { taskQueue: on.taskQueue });
}

/** The simulator accepts only `keys` from now on (`[]`: none of the world's). */
function acceptKeys(keys: string[]): void {
  sim.setApiKeys(keys.length === 0 ? [`nobody-${uniqueId('key')}`] : keys);
}

/** A worker whose activities call `baseUrl` with `key`. */
function workerFor(baseUrl: string, key = apiKey): Promise<TestWorker> {
  const api = new AgentApiClient({ baseUrl, apiKey: key });
  return startTestWorker(env, createActivities({ api, ambiguousCreatePolicy: 'fail' }));
}

/** A local server, stopped after the file's tests. */
async function listening(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address();
  assert.ok(address !== null && typeof address === 'object');
  return `127.0.0.1:${address.port}`;
}

describe('a key that stops working loses no agent job', { concurrency: 1 }, () => {
  test(`a fleet through a ${KEY_EXPIRY_MS / 1000}s key expiry: every job completes, each created once`, async () => {
    const jobs = 6;
    const projectId = project({ durationMs: KEY_EXPIRY_MS + 4_000 });
    const handles: Handle[] = [];
    for (let i = 0; i < jobs; i++) handles.push(await start({ projectId, credentialTolerance: '10m' }));
    await waitFor(() => requestsTo(sim, projectId, 'get') >= jobs, { what: 'every job polled once' });

    acceptKeys([]);
    try {
      const phases = () =>
        Promise.all(handles.map(async (handle) => (await handle.query(statusQuery)).phase));
      await waitFor(async () => (await phases()).every((phase) => phase === 'waiting-for-api-key'), {
        what: "every workflow's status query to show the wait for a key",
        timeoutMs: 10_000,
      });
      // The expiry itself: how long the key stays refused, not a wait for a condition.
      await new Promise((resolve) => setTimeout(resolve, KEY_EXPIRY_MS));
    } finally {
      acceptKeys([apiKey]);
    }

    const results = await Promise.all(handles.map((handle) => handle.result()));
    assert.equal(results.filter((result) => result.prLink !== null).length, jobs);
    assert.equal(createdJobs(sim, projectId), jobs, 'one create per workflow');
  });

  test('403 pages for a while (a WAF, a scope being fixed): polls wait through them', async () => {
    const projectId = project({
      durationMs: 4_000,
      faults: { rules: [{ endpoint: 'get', skip: 1, forMs: 3_000, kind: 'status', status: 403 }] },
    });
    const refusedBefore = answeredWith(sim, 403);
    const handle = await start({ projectId });
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    const refused = answeredWith(sim, 403) - refusedBefore;
    assert.ok(refused >= 2, `polls met the 403s and were sent again: ${refused} answered 403`);
    await captureHistory(env, handle, 'key-wait-403');
  });

  test('past the credential tolerance the workflow fails Unauthorized, saying how long it waited', async () => {
    const projectId = project({
      durationMs: 60_000,
      faults: { rules: [{ endpoint: 'get', skip: 1, kind: 'status', status: 401 }] },
    });
    const handle = await start({ projectId, credentialTolerance: '3s' });
    const failure = await workflowFailure(handle);
    assert.equal(failure.type, FailureType.Unauthorized);
    assert.match(failure.message, /past the credential tolerance of 3s/);
    assert.equal(createdJobs(sim, projectId), 1);
  });

  test('a create with a key that never worked fails at once: Unauthorized, nothing created', async () => {
    const wrongKeyWorker = await workerFor(sim.url, `wrong-${uniqueId('key')}`);
    const projectId = project();
    const since = Date.now();
    const failure = await workflowFailure(await start({ projectId }, wrongKeyWorker));
    assert.equal(failure.type, FailureType.Unauthorized);
    assert.match(failure.message, /no agent job was created/);
    assert.ok(Date.now() - since < 10_000, `failed after ${Date.now() - since} ms`);
    assert.equal(createdJobs(sim, projectId), 0);
  });

  test('a create whose key answered for the project lately waits for it, and creates once', async () => {
    const projectId = project({ durationMs: 1_000 });
    // The worker has an answer from the project: this job's create and polls.
    await (await start({ projectId })).result();
    acceptKeys([]);
    let handle: Handle;
    try {
      handle = await start({ projectId });
      await waitFor(async () => (await handle.query(statusQuery)).phase === 'waiting-for-api-key', {
        what: 'the create to wait for a key',
      });
    } finally {
      acceptKeys([apiKey]);
    }
    const result = await handle.result();
    assert.equal(result.status, 'completed');
    assert.equal(createdJobs(sim, projectId), 2);
  });
});

describe('failures that never left are not ambiguous', () => {
  test('an untrusted certificate: TlsHandshakeFailed at once under "fail", naming the cause', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'policy-tls-'));
    onCleanup(() => rmSync(dir, { recursive: true, force: true }));
    const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
    execFileSync('openssl', [
      ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1'],
      ...['-keyout', key, '-out', cert],
    ]);
    let requests = 0;
    const server = createTlsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (_req, res) => {
      requests++;
      res.writeHead(500).end();
    });
    const untrusted = await workerFor(`https://${await listening(server)}`);
    const since = Date.now();
    const failure = await workflowFailure(await start({ projectId: uniqueId('tls') }, untrusted));
    assert.equal(failure.type, FailureType.TlsHandshakeFailed, failure.message);
    assert.match(failure.message, /self-signed/);
    assert.match(failure.message, /nothing was sent/);
    assert.ok(Date.now() - since < 10_000, `failed after ${Date.now() - since} ms`);
    assert.equal(requests, 0, 'no request passed the handshake');
  });

  /** A create against a server that answers every request `status` with `location`: its failure and POSTs. */
  async function createRedirected(status: number, location: string) {
    let posts = 0;
    const server = createHttpServer((req, res) => {
      if (req.method === 'POST') posts++;
      req.resume();
      res.writeHead(status, { location }).end();
    });
    const worker = await workerFor(`http://${await listening(server)}`);
    const failure = await workflowFailure(await start({ projectId: uniqueId(`status-${status}`) }, worker));
    return { failure, posts };
  }

  test('a redirect: final Redirected naming Location and AGENT_API_BASE_URL, sent once', async () => {
    const { failure, posts } = await createRedirected(308, 'https://api.elsewhere.example/v2/agent');
    assert.equal(failure.type, FailureType.Redirected, failure.message);
    assert.match(failure.message, /api\.elsewhere\.example/);
    assert.match(failure.message, /AGENT_API_BASE_URL/);
    assert.equal(posts, 1);
  });

  test('a 303 after a create means it was processed: CreateOutcomeUnknown under "fail"', async () => {
    const { failure, posts } = await createRedirected(303, '/v2/agent/p/job/job_1');
    assert.equal(failure.type, FailureType.CreateOutcomeUnknown, failure.message);
    assert.equal(posts, 1);
  });

  test('connection refused under "fail" is retried as surely not sent, never CreateOutcomeUnknown', async () => {
    const server = createHttpServer();
    const address = await listening(server);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const refused = await workerFor(`http://${address}`);
    const handle = await start({ projectId: uniqueId('refused'), timeout: '6s' }, refused);
    const failure = await workflowFailure(handle);
    assert.equal(failure.type, FailureType.AgentJobTimedOut, failure.message);
    assert.match(failure.message, /last API error NetworkError/);
  });
});

describe('an answer that will not change is not waited out', () => {
  test('a record padded past the cap ends the workflow within seconds, not after blipTolerance', async () => {
    const projectId = project({
      durationMs: 60_000,
      faults: { rules: [{ endpoint: 'get', skip: 1, kind: 'oversized', bytes: 3_000_000 }] },
    });
    const since = Date.now();
    const failure = await workflowFailure(await start({ projectId, blipTolerance: '30m' }, failing));
    assert.equal(failure.type, FailureType.UnexpectedResponse);
    assert.match(failure.message, /5 such answers in a row/);
    assert.ok(Date.now() - since < 60_000, `failed after ${Date.now() - since} ms`);
  });
});
