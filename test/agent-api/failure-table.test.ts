/**
 * The client against the simulator over real HTTP, one test per row of the failure table in
 * docs/agent-api.md: type, retryable, requestMayHaveTakenEffect, and no key in the message.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import {
  AgentApiClient,
  AgentApiError,
  createDispatcher,
  type AgentApiClientOptions,
} from '../../src/agent-api/index.js';
import { FailureType } from '../../src/contract.js';
import { startSimulator, type Scenario } from '../../src/simulator/index.js';
import { onCleanup, startTestSimulator, uniqueId, waitFor } from '../harness.js';

const API_KEY = `mint_${uniqueId('failure-table-secret')}`;

const sim = await startTestSimulator({ apiKeys: [API_KEY], defaultScenario: { durationMs: 60_000 } });
/** Short timeouts so the hang row ends in a fraction of a second. */
const shortTimeouts = createDispatcher({
  connectTimeoutMs: 1_000,
  headersTimeoutMs: 300,
  bodyTimeoutMs: 300,
});
onCleanup(() => shortTimeouts.close());
const client = new AgentApiClient({ baseUrl: sim.url, apiKey: API_KEY, dispatcher: shortTimeouts });

/** A fresh project with its own scenario, so rows never share fault counters. */
function project(scenario: Partial<Scenario> = {}): string {
  const projectId = uniqueId('proj');
  sim.setScenario(projectId, scenario);
  return projectId;
}

/** A project whose first request to `endpoint` answers `status`. */
function failingOnce(
  endpoint: 'create' | 'get' | 'message',
  status: number,
  retryAfterSeconds?: number,
): string {
  return project({
    faults: {
      rules: [
        {
          endpoint,
          first: 1,
          kind: 'status',
          status,
          retryAfter: retryAfterSeconds === undefined ? undefined : { seconds: retryAfterSeconds },
        },
      ],
    },
  });
}

interface Expected {
  type: FailureType;
  retryable: boolean;
  requestMayHaveTakenEffect: boolean;
  status: number | null;
  retryAfterMs?: number | null;
}

/** Awaits the rejection and checks the row; returns the error for further checks. */
async function expectFailure(
  call: Promise<unknown>,
  expected: Expected,
  key = API_KEY,
): Promise<AgentApiError> {
  const err = await call.then(
    () => assert.fail('the call succeeded'),
    (error: unknown) => error,
  );
  assert.ok(err instanceof AgentApiError, `expected an AgentApiError, got ${String(err)}`);
  assert.equal(err.type, expected.type, err.message);
  assert.equal(err.retryable, expected.retryable, 'retryable');
  assert.equal(
    err.requestMayHaveTakenEffect,
    expected.requestMayHaveTakenEffect,
    'requestMayHaveTakenEffect',
  );
  assert.equal(err.status, expected.status, 'status');
  if (expected.retryAfterMs !== undefined)
    assert.equal(err.retryAfterMs, expected.retryAfterMs, 'retryAfterMs');
  assert.ok(!err.message.includes(key), 'the message must not contain the key');
  assert.ok(!err.message.includes('Bearer'), 'the message must not contain the Authorization header');
  assert.ok(err.message.length > 0 && !err.message.includes('\n'), 'one line');
  return err;
}

function newJob(projectId: string): Promise<string> {
  return client
    .createJob(projectId, 'Document the API', { idempotencyKey: uniqueId('key') })
    .then((r) => r.id);
}

function createIn(projectId: string, c: AgentApiClient = client) {
  return c.createJob(projectId, 'Document the API', { idempotencyKey: uniqueId('key') });
}

function createInWith(projectId: string, signal: AbortSignal) {
  return client.createJob(projectId, 'Document the API', { idempotencyKey: uniqueId('key'), signal });
}

describe('HTTP status rows', () => {
  test('400 (empty prompt): InvalidRequest, final, not applied', async () => {
    const projectId = project();
    const err = await expectFailure(client.createJob(projectId, '', { idempotencyKey: uniqueId('key') }), {
      type: FailureType.InvalidRequest,
      retryable: false,
      requestMayHaveTakenEffect: false,
      status: 400,
    });
    assert.match(err.message, /createJob \(project "proj-[^"]+"\) failed with HTTP 400: prompt is required/);
    assert.equal(sim.stats().jobsPerProject[projectId], undefined);
  });

  test('422: InvalidRequest, final', async () => {
    await expectFailure(createIn(failingOnce('create', 422)), {
      type: FailureType.InvalidRequest,
      retryable: false,
      requestMayHaveTakenEffect: false,
      status: 422,
    });
  });

  // A refused key is retryable for the client: the failure policy's `credentials` bound decides
  // (a poll waits for a rotation, a create with a key that never worked fails at once).
  test('401 (wrong key): Unauthorized, message points at the key settings but not at the key', async () => {
    const wrongKey = `mint_${uniqueId('wrong-secret')}`;
    const wrong = new AgentApiClient({ baseUrl: sim.url, apiKey: wrongKey, dispatcher: shortTimeouts });
    const err = await expectFailure(
      createIn(project(), wrong),
      { type: FailureType.Unauthorized, retryable: true, requestMayHaveTakenEffect: false, status: 401 },
      wrongKey,
    );
    assert.match(err.message, /AGENT_API_KEY/);
    assert.match(err.message, /AGENT_API_KEY_FILE/);
  });

  test('403: Unauthorized, message names scopes and the allow-list', async () => {
    const err = await expectFailure(client.getJob(failingOnce('get', 403), 'job-1'), {
      type: FailureType.Unauthorized,
      retryable: true,
      requestMayHaveTakenEffect: false,
      status: 403,
    });
    assert.match(err.message, /scope/);
    assert.match(err.message, /allow-list/);
  });

  test('404 on create: ProjectNotFound, final', async () => {
    const projectId = project({ projectExists: false });
    const err = await expectFailure(createIn(projectId), {
      type: FailureType.ProjectNotFound,
      retryable: false,
      requestMayHaveTakenEffect: false,
      status: 404,
    });
    assert.ok(err.message.includes(projectId), 'the message names the project');
  });

  test('404 on get: JobNotFound, retryable (the activity bounds it)', async () => {
    const err = await expectFailure(client.getJob(project(), 'job-that-never-was'), {
      type: FailureType.JobNotFound,
      retryable: true,
      requestMayHaveTakenEffect: false,
      status: 404,
    });
    assert.ok(err.message.includes('job-that-never-was'), 'the message names the job');
  });

  test('404 on message: JobNotFound', async () => {
    await expectFailure(client.sendMessage(project(), 'job-that-never-was', 'More'), {
      type: FailureType.JobNotFound,
      retryable: true,
      requestMayHaveTakenEffect: false,
      status: 404,
    });
  });

  for (const status of [408, 425]) {
    test(`${status}: ServiceUnavailable, retried, not applied`, async () => {
      await expectFailure(createIn(failingOnce('create', status)), {
        type: FailureType.ServiceUnavailable,
        retryable: true,
        requestMayHaveTakenEffect: false,
        status,
        retryAfterMs: null,
      });
    });
  }

  test('429 with Retry-After seconds: RateLimited with retryAfterMs', async () => {
    await expectFailure(createIn(failingOnce('create', 429, 7)), {
      type: FailureType.RateLimited,
      retryable: true,
      requestMayHaveTakenEffect: false,
      status: 429,
      retryAfterMs: 7_000,
    });
  });

  test('429 with Retry-After as an HTTP date: RateLimited with retryAfterMs', async () => {
    const projectId = project({
      faults: {
        rules: [
          {
            endpoint: 'get',
            first: 1,
            kind: 'status',
            status: 429,
            retryAfter: { seconds: 30, form: 'http-date' },
          },
        ],
      },
    });
    const err = await expectFailure(client.getJob(projectId, 'job-1'), {
      type: FailureType.RateLimited,
      retryable: true,
      requestMayHaveTakenEffect: false,
      status: 429,
    });
    // An HTTP date has whole seconds: the wait is up to one second (plus transit) shorter.
    assert.ok(
      err.retryAfterMs !== null && err.retryAfterMs > 27_000 && err.retryAfterMs <= 30_000,
      String(err.retryAfterMs),
    );
  });

  test('429 from the real rate limit: RateLimited with the simulator Retry-After', async () => {
    const limited = await startSimulator({
      port: 0,
      log: false,
      apiKeys: [API_KEY],
      createsPerProjectPerHour: 1,
    });
    try {
      const c = new AgentApiClient({ baseUrl: limited.url, apiKey: API_KEY, dispatcher: shortTimeouts });
      const projectId = uniqueId('proj');
      await createIn(projectId, c);
      const err = await expectFailure(createIn(projectId, c), {
        type: FailureType.RateLimited,
        retryable: true,
        requestMayHaveTakenEffect: false,
        status: 429,
      });
      assert.ok(err.retryAfterMs !== null && err.retryAfterMs > 3_500_000 && err.retryAfterMs <= 3_600_000);
      assert.equal(limited.stats().jobsPerProject[projectId], 1);
    } finally {
      await limited.stop();
    }
  });

  for (const status of [500, 502, 504]) {
    test(`${status}: ServiceUnavailable, retried, ambiguous`, async () => {
      const err = await expectFailure(createIn(failingOnce('create', status)), {
        type: FailureType.ServiceUnavailable,
        retryable: true,
        requestMayHaveTakenEffect: true,
        status,
        retryAfterMs: null,
      });
      assert.match(err.message, /may have been applied/);
    });
  }

  test('503 with Retry-After: ServiceUnavailable, not applied, retryAfterMs set', async () => {
    await expectFailure(createIn(failingOnce('create', 503, 2)), {
      type: FailureType.ServiceUnavailable,
      retryable: true,
      requestMayHaveTakenEffect: false,
      status: 503,
      retryAfterMs: 2_000,
    });
  });

  test('an unlisted 4xx (418) is InvalidRequest, an unlisted 5xx (599) ServiceUnavailable', async () => {
    await expectFailure(client.getJob(failingOnce('get', 418), 'job-1'), {
      type: FailureType.InvalidRequest,
      retryable: false,
      requestMayHaveTakenEffect: false,
      status: 418,
    });
    await expectFailure(createIn(failingOnce('create', 599)), {
      type: FailureType.ServiceUnavailable,
      retryable: true,
      requestMayHaveTakenEffect: true,
      status: 599,
    });
  });
});

describe('network rows', () => {
  test('connection refused (a closed port): NetworkError, not applied', async () => {
    const port = await closedPort();
    const refused = new AgentApiClient({
      baseUrl: `http://127.0.0.1:${port}`,
      apiKey: API_KEY,
      dispatcher: shortTimeouts,
    });
    const err = await expectFailure(createIn('proj-refused', refused), {
      type: FailureType.NetworkError,
      retryable: true,
      requestMayHaveTakenEffect: false,
      status: null,
    });
    assert.match(err.message, /connection refused/);
  });

  test('DNS failure (.invalid host): NetworkError, not applied', async () => {
    // The default connect timeout (10 s): it covers the lookup, and a slow resolver must still end
    // in a DNS error rather than a connect timeout.
    const patient = createDispatcher();
    try {
      const nowhere = new AgentApiClient({
        baseUrl: 'http://agent-api.invalid',
        apiKey: API_KEY,
        dispatcher: patient,
      });
      await expectFailure(createIn('proj-dns', nowhere), {
        type: FailureType.NetworkError,
        retryable: true,
        requestMayHaveTakenEffect: false,
        status: null,
      });
    } finally {
      await patient.destroy();
    }
  });

  test('dropped connection (socket destroyed, request not processed): NetworkError, ambiguous', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'create', first: 1, kind: 'drop' }] } });
    await expectFailure(createIn(projectId), {
      type: FailureType.NetworkError,
      retryable: true,
      requestMayHaveTakenEffect: true,
      status: null,
    });
    assert.equal(
      sim.stats().jobsPerProject[projectId],
      undefined,
      'the client could not know, but nothing was created',
    );
  });

  test('reset after the create was stored: ambiguous; the retry with the same key returns the same job', async () => {
    // About the Idempotency-Key: a simulator that honours it (the file's, like the live API, does not).
    const keyed = await startSimulator({
      port: 0,
      log: false,
      apiKeys: [API_KEY],
      defaultScenario: { durationMs: 60_000 },
      honourIdempotencyKey: true,
    });
    try {
      const c = new AgentApiClient({ baseUrl: keyed.url, apiKey: API_KEY, dispatcher: shortTimeouts });
      const projectId = uniqueId('proj');
      keyed.setScenario(projectId, {
        faults: { rules: [{ endpoint: 'create', first: 1, kind: 'reset-after-store' }] },
      });
      const idempotencyKey = uniqueId('key');
      await expectFailure(c.createJob(projectId, 'Document the API', { idempotencyKey }), {
        type: FailureType.NetworkError,
        retryable: true,
        requestMayHaveTakenEffect: true,
        status: null,
      });
      assert.equal(
        keyed.stats().jobsPerProject[projectId],
        1,
        'the job exists although the client saw a reset',
      );
      const stored = keyed.stats().jobs.find((job) => job.projectId === projectId);

      const retried = await c.createJob(projectId, 'Document the API', { idempotencyKey });
      assert.equal(retried.id, stored?.id);
      assert.equal(keyed.stats().jobsPerProject[projectId], 1, 'the retry created no second job');
      assert.equal(keyed.stats().jobsPerIdempotencyKey[idempotencyKey], 1);
    } finally {
      await keyed.stop();
    }
  });

  test('a hang: RequestTimeout from the headers timeout, ambiguous', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'create', first: 1, kind: 'hang' }] } });
    const err = await expectFailure(createIn(projectId), {
      type: FailureType.RequestTimeout,
      retryable: true,
      requestMayHaveTakenEffect: true,
      status: null,
    });
    assert.match(err.message, /no response headers in time/);
  });

  test('AbortSignal.timeout: RequestTimeout, ambiguous', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'get', first: 1, kind: 'hang' }] } });
    const patient = createDispatcher();
    try {
      const c = new AgentApiClient({ baseUrl: sim.url, apiKey: API_KEY, dispatcher: patient });
      await expectFailure(c.getJob(projectId, 'job-1', { signal: AbortSignal.timeout(100) }), {
        type: FailureType.RequestTimeout,
        retryable: true,
        requestMayHaveTakenEffect: true,
        status: null,
      });
    } finally {
      await patient.destroy();
    }
  });

  test('timeoutMs of the call: RequestTimeout, ambiguous, long before the client bound', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'get', first: 1, kind: 'hang' }] } });
    const patient = createDispatcher();
    try {
      const c = new AgentApiClient({ baseUrl: sim.url, apiKey: API_KEY, dispatcher: patient });
      const started = Date.now();
      await expectFailure(
        c.getJob(projectId, 'job-1', { signal: new AbortController().signal, timeoutMs: 100 }),
        { type: FailureType.RequestTimeout, retryable: true, requestMayHaveTakenEffect: true, status: null },
      );
      // The client's own bound is 60 s and the dispatcher's headers timeout longer still.
      assert.ok(Date.now() - started < 10_000, `ended after ${Date.now() - started} ms`);
    } finally {
      await patient.destroy();
    }
  });

  test('an already aborted signal rejects at once with its reason, and sends nothing', async () => {
    const projectId = project();
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(createInWith(projectId, controller.signal), (err: unknown) => {
      assert.equal(err, controller.signal.reason);
      assert.equal((err as Error).name, 'AbortError');
      return true;
    });
    assert.equal(sim.stats().requestsPerProjectEndpoint[projectId], undefined);
  });

  test('an abort in flight rejects promptly with the abort reason', async () => {
    const projectId = project({ faults: { rules: [{ endpoint: 'create', first: 1, kind: 'hang' }] } });
    const patient = createDispatcher();
    try {
      const c = new AgentApiClient({ baseUrl: sim.url, apiKey: API_KEY, dispatcher: patient });
      const controller = new AbortController();
      const call = c.createJob(projectId, 'Document the API', {
        idempotencyKey: uniqueId('key'),
        signal: controller.signal,
      });
      const before = sim.stats().requestsPerStatus.hang ?? 0;
      await waitFor(() => (sim.stats().requestsPerStatus.hang ?? 0) > before, {
        what: 'the request to hang',
      });
      const abortedAt = Date.now();
      controller.abort();
      await assert.rejects(call, (err: unknown) => {
        assert.ok(!(err instanceof AgentApiError), 'an abort is not an API failure');
        assert.equal((err as Error).name, 'AbortError');
        return true;
      });
      assert.ok(Date.now() - abortedAt < 1_000, 'promptly');
    } finally {
      await patient.destroy();
    }
  });
});

describe('body rows', () => {
  test('HTML with 200 on a get: UnexpectedResponse with an excerpt, retried (a get changes nothing)', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'get', first: 1, kind: 'html', status: 200 }] },
    });
    const err = await expectFailure(client.getJob(projectId, 'job-1'), {
      type: FailureType.UnexpectedResponse,
      retryable: true,
      requestMayHaveTakenEffect: true,
      status: 200,
    });
    assert.match(err.message, /not JSON/);
    assert.match(err.message, /<html><head><title>200 OK/);
  });

  test('HTML with 200 on a create: UnreadableAnswer, final, no job to name', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', first: 1, kind: 'html', status: 200 }] },
    });
    const err = await expectFailure(createIn(projectId), {
      type: FailureType.UnreadableAnswer,
      retryable: false,
      requestMayHaveTakenEffect: true,
      status: 200,
    });
    assert.equal(err.jobId, null);
    assert.match(err.message, /not JSON/);
    assert.match(err.message, /not sent again/);
  });

  test('truncated JSON with 200 on a create: UnreadableAnswer naming the job its start names', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'create', first: 1, kind: 'truncated', status: 200 }] },
    });
    const err = await expectFailure(createIn(projectId), {
      type: FailureType.UnreadableAnswer,
      retryable: false,
      requestMayHaveTakenEffect: true,
      status: 200,
    });
    const stored = sim.stats().jobs.find((job) => job.projectId === projectId);
    assert.ok(stored, 'the create was applied');
    assert.equal(err.jobId, stored.id);
    assert.ok(err.message.includes(stored.id), err.message);
  });

  test('a message answered 200 with a record without status: UnreadableAnswer naming the job', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'message', first: 1, kind: 'altered', remove: ['status'] }] },
    });
    const jobId = await newJob(projectId);
    const err = await expectFailure(client.sendMessage(projectId, jobId, 'And examples'), {
      type: FailureType.UnreadableAnswer,
      retryable: false,
      requestMayHaveTakenEffect: true,
      status: 200,
    });
    assert.equal(err.jobId, jobId);
    assert.equal(sim.stats().jobs.find((job) => job.id === jobId)?.turns, 2, 'the message was applied');
  });

  test('a create answered with drift in optional fields is a success', async () => {
    const projectId = project({
      faults: {
        rules: [{ endpoint: 'create', first: 1, kind: 'altered', set: { model: 7, region: 'eu' } }],
      },
    });
    const record = await createIn(projectId);
    assert.equal(record.model, undefined);
    assert.equal(record.region, 'eu');
  });

  test('HTML with 502: ServiceUnavailable, the page excerpted', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'get', first: 1, kind: 'html', status: 502 }] },
    });
    const err = await expectFailure(client.getJob(projectId, 'job-1'), {
      type: FailureType.ServiceUnavailable,
      retryable: true,
      requestMayHaveTakenEffect: true,
      status: 502,
    });
    assert.match(err.message, /502 Bad Gateway/);
  });

  test('truncated JSON with 200: UnexpectedResponse with an excerpt of at most 200 characters', async () => {
    const projectId = project({
      faults: { rules: [{ endpoint: 'get', first: 1, kind: 'truncated', status: 200 }] },
    });
    const jobId = await newJob(projectId);
    const err = await expectFailure(client.getJob(projectId, jobId), {
      type: FailureType.UnexpectedResponse,
      retryable: true,
      requestMayHaveTakenEffect: true,
      status: 200,
    });
    const excerpt = /: ("[^\n]*")$/.exec(err.message)?.[1];
    assert.ok(excerpt !== undefined, err.message);
    const text = JSON.parse(excerpt) as string;
    assert.ok(text.startsWith(`{"id":"${jobId}"`), text);
    assert.ok(text.length <= 200);
  });

  test('a JSON body that is not a record: UnexpectedResponse naming the problem', async () => {
    const projectId = project({
      faults: {
        rules: [{ endpoint: 'get', first: 1, kind: 'status', status: 200, message: 'not a record' }],
      },
    });
    const err = await expectFailure(client.getJob(projectId, 'job-1'), {
      type: FailureType.UnexpectedResponse,
      retryable: true,
      requestMayHaveTakenEffect: true,
      status: 200,
    });
    assert.match(err.message, /not an agent job record \(id: /);
    assert.match(err.message, /not a record/);
  });
});

describe('success rows and requests', () => {
  test('create, get and message succeed over a base URL with a path prefix and trailing slash', async () => {
    const prefixed = new AgentApiClient({
      baseUrl: `${sim.url}/`,
      apiKey: API_KEY,
    } satisfies AgentApiClientOptions);
    const projectId = project({ durationMs: 100 });
    const created = await prefixed.createJob(projectId, 'Document the API', {
      idempotencyKey: uniqueId('key'),
    });
    assert.equal(created.status, 'active');
    assert.equal(created.prLink, null);
    const done = await waitFor(
      async () => {
        const record = await prefixed.getJob(projectId, created.id);
        return record.status === 'completed' ? record : null;
      },
      { what: 'the job to complete' },
    );
    assert.match(done.prLink ?? '', /^https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+$/);
    const next = await prefixed.sendMessage(projectId, created.id, 'And examples');
    assert.equal(next.status, 'active');
  });

  test('IDs are encoded as path segments', async () => {
    const projectId = `${uniqueId('proj')}/../x?y#z`;
    sim.setScenario(projectId, {});
    const created = await createIn(projectId);
    const read = await client.getJob(projectId, created.id);
    assert.equal(read.id, created.id);
    assert.equal(sim.stats().jobsPerProject[projectId], 1);
  });

  test('a path prefix in the base URL is kept', async () => {
    const prefix = new AgentApiClient({
      baseUrl: `${sim.url}/api/`,
      apiKey: API_KEY,
      dispatcher: shortTimeouts,
    });
    const before = sim.stats().requestsPerEndpoint.unknown ?? 0;
    // The simulator serves no prefix: the 404 on an unknown route proves the prefix went into the path.
    await expectFailure(prefix.getJob(project(), 'job-1'), {
      type: FailureType.JobNotFound,
      retryable: true,
      requestMayHaveTakenEffect: false,
      status: 404,
    });
    assert.equal(sim.stats().requestsPerEndpoint.unknown, before + 1);
  });
});

/** A port nothing listens on: bound once, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(typeof address === 'object' && address !== null);
  return address.port;
}
