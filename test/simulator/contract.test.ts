/**
 * The simulator's contract over real HTTP: auth, validation, lifecycle, archive, rate limit,
 * idempotency, follow-up turns, stale reads, stats, admin endpoints and the request log.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startSimulator, type RunningSimulator, type SimulatorOptions } from '../../src/simulator/index.js';
import { uniqueId, waitFor } from '../harness.js';
import { call, jobPath, jobsPath, promptBody, type RawResponse } from './http.js';

const KEY = uniqueId('sim-key');
const PR_LINK = /^https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+$/;

/** Runs `fn` against a fresh simulator and always stops it. */
async function withSimulator(
  options: Partial<SimulatorOptions>,
  fn: (sim: RunningSimulator) => Promise<void>,
) {
  const sim = await startSimulator({ port: 0, log: false, apiKeys: [KEY], ...options });
  try {
    await fn(sim);
  } finally {
    await sim.stop();
  }
}

async function create(sim: RunningSimulator, projectId: string, headers: Record<string, string> = {}) {
  return call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('Document the API'), headers });
}

async function createId(sim: RunningSimulator, projectId: string): Promise<string> {
  const response = await create(sim, projectId);
  assert.equal(response.status, 201, response.text);
  return String(response.json?.id);
}

function get(sim: RunningSimulator, projectId: string, jobId: string): Promise<RawResponse> {
  return call(sim, 'GET', jobPath(projectId, jobId), { key: KEY });
}

function message(
  sim: RunningSimulator,
  projectId: string,
  jobId: string,
  headers: Record<string, string> = {},
) {
  return call(sim, 'POST', `${jobPath(projectId, jobId)}/message`, {
    key: KEY,
    body: promptBody('Add examples'),
    headers,
  });
}

/** Polls get-job until the status is `status`; returns the record. */
async function until(sim: RunningSimulator, projectId: string, jobId: string, status: string) {
  return waitFor(
    async () => {
      const response = await get(sim, projectId, jobId);
      return response.json?.status === status ? response.json : null;
    },
    { what: `job ${jobId} to be ${status}` },
  );
}

describe('auth', () => {
  test('no key, a wrong key, or another scheme: 401 with an error body', async () => {
    await withSimulator({}, async (sim) => {
      const projectId = uniqueId('proj');
      for (const init of [{ key: null }, { key: 'wrong' }, { headers: { authorization: `Basic ${KEY}` } }]) {
        const response = await call(sim, 'POST', jobsPath(projectId), { body: promptBody('x'), ...init });
        assert.equal(response.status, 401);
        assert.equal(typeof response.json?.error, 'string');
      }
      assert.equal(sim.stats().jobsCreated, 0);
    });
  });

  test('any of several keys is accepted', async () => {
    const other = uniqueId('second-key');
    await withSimulator({ apiKeys: [KEY, other] }, async (sim) => {
      const response = await call(sim, 'POST', jobsPath(uniqueId('proj')), {
        key: other,
        body: promptBody('x'),
      });
      assert.equal(response.status, 201);
    });
  });
});

describe('validation', () => {
  const cases: [string, { body: string; contentType?: string | null }][] = [
    ['malformed JSON', { body: '{"prompt": ' }],
    ['a missing prompt', { body: '{}' }],
    ['an empty prompt', { body: promptBody('') }],
    ['a prompt that is not a string', { body: promptBody(42) }],
    ['a body that is not an object', { body: '"Document"' }],
    ['a text/plain content type', { body: promptBody('x'), contentType: 'text/plain' }],
    ['no content type', { body: promptBody('x'), contentType: null }],
  ];
  for (const [what, init] of cases) {
    test(`${what}: 400 on create and message`, async () => {
      await withSimulator({}, async (sim) => {
        const projectId = uniqueId('proj');
        const created = await call(sim, 'POST', jobsPath(projectId), { key: KEY, ...init });
        assert.equal(created.status, 400, created.text);
        assert.equal(typeof created.json?.error, 'string');
        const jobId = await createId(sim, projectId);
        const sent = await call(sim, 'POST', `${jobPath(projectId, jobId)}/message`, { key: KEY, ...init });
        assert.equal(sent.status, 400, sent.text);
        assert.equal(sim.stats().jobsPerProject[projectId], 1);
      });
    });
  }

  test('a JSON content type with a charset is accepted', async () => {
    await withSimulator({}, async (sim) => {
      const response = await call(sim, 'POST', jobsPath(uniqueId('proj')), {
        key: KEY,
        body: promptBody('x'),
        contentType: 'application/json; charset=utf-8',
      });
      assert.equal(response.status, 201);
    });
  });

  test('unknown jobs, unknown routes and wrong methods', async () => {
    await withSimulator({}, async (sim) => {
      const projectId = uniqueId('proj');
      assert.equal((await get(sim, projectId, 'job_missing')).status, 404);
      assert.equal((await message(sim, projectId, 'job_missing')).status, 404);
      const jobId = await createId(sim, projectId);
      assert.equal(
        (await get(sim, uniqueId('other-project'), jobId)).status,
        404,
        'a job belongs to its project',
      );
      assert.equal((await call(sim, 'GET', '/v1/whatever', { key: KEY })).status, 404);
      assert.equal((await call(sim, 'DELETE', jobPath(projectId, jobId), { key: KEY })).status, 405);
    });
  });
});

describe('lifecycle', () => {
  test('active, then completed with a pull request link', async () => {
    await withSimulator({ defaultScenario: { durationMs: 150 } }, async (sim) => {
      const projectId = uniqueId('proj');
      const created = await create(sim, projectId);
      assert.equal(created.status, 201);
      const record = created.json ?? {};
      assert.equal(record.status, 'active');
      assert.equal(record.prLink, null);
      assert.equal(record.archivedAt, null);
      assert.equal(typeof record.model, 'string');
      assert.deepEqual(Object.keys(record.source as object).sort(), ['ref', 'repository']);
      assert.ok(!Number.isNaN(Date.parse(String(record.createdAt))));
      const done = await until(sim, projectId, String(record.id), 'completed');
      assert.match(String(done.prLink), PR_LINK);
      const job = sim.stats().jobs.find((j) => j.id === record.id);
      assert.ok(job?.terminalAt !== null && job !== undefined && job.terminalAt >= job.createdAt + 150);
    });
  });

  test('no-changes completes with prLink null; failed fails', async () => {
    await withSimulator({ defaultScenario: { durationMs: 100 } }, async (sim) => {
      const quiet = uniqueId('proj');
      sim.setScenario(quiet, { outcome: 'no-changes' });
      const done = await until(sim, quiet, await createId(sim, quiet), 'completed');
      assert.equal(done.prLink, null);
      const broken = uniqueId('proj');
      sim.setScenario(broken, { outcome: 'failed' });
      const failed = await until(sim, broken, await createId(sim, broken), 'failed');
      assert.equal(failed.prLink, null);
    });
  });

  test('archived through the admin endpoint and through archiveJob', async () => {
    await withSimulator({ defaultScenario: { durationMs: 100 } }, async (sim) => {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      const completed = await until(sim, projectId, jobId, 'completed');
      const archived = await call(sim, 'POST', `/_sim/jobs/${projectId}/${jobId}/archive`);
      assert.equal(archived.status, 200);
      const record = (await get(sim, projectId, jobId)).json ?? {};
      assert.equal(record.status, 'archived');
      assert.ok(!Number.isNaN(Date.parse(String(record.archivedAt))));
      assert.equal(record.prLink, completed.prLink, 'an archived job keeps its pull request link');

      const activeId = await createId(sim, projectId);
      sim.archiveJob(projectId, activeId);
      const early = (await get(sim, projectId, activeId)).json ?? {};
      assert.equal(early.status, 'archived');
      assert.equal(early.prLink, null);
      assert.throws(() => sim.archiveJob(projectId, 'job_missing'), /no job/);
      assert.equal((await call(sim, 'POST', `/_sim/jobs/${projectId}/job_missing/archive`)).status, 404);
    });
  });

  test('archived after archiveAfterMs', async () => {
    await withSimulator({ defaultScenario: { durationMs: 50 }, archiveAfterMs: 100 }, async (sim) => {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      const archived = await until(sim, projectId, jobId, 'archived');
      const job = sim.stats().jobs.find((j) => j.id === jobId);
      assert.equal(Date.parse(String(archived.archivedAt)), (job?.createdAt ?? 0) + 150);
    });
  });
});

describe('rate limit', () => {
  test('the third create in an hour is refused with 429 and Retry-After; other projects are not', async () => {
    await withSimulator({ createsPerProjectPerHour: 2 }, async (sim) => {
      const projectId = uniqueId('proj');
      await createId(sim, projectId);
      await createId(sim, projectId);
      const third = await create(sim, projectId);
      assert.equal(third.status, 429);
      assert.equal(typeof third.json?.error, 'string');
      const retryAfter = Number(third.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter > 3590 && retryAfter <= 3600, String(retryAfter));
      assert.equal(sim.stats().jobsPerProject[projectId], 2);
      assert.equal((await create(sim, uniqueId('proj'))).status, 201);
      // Reads are not rate limited.
      assert.equal((await get(sim, projectId, String(sim.stats().jobs[0]?.id))).status, 200);
    });
  });

  test('a budget of K per W seconds counts follow-up messages too, frees after W, and can omit Retry-After', async () => {
    await withSimulator({ budget: { uses: 2, windowSeconds: 1 }, retryAfter: false }, async (sim) => {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      assert.equal((await message(sim, projectId, jobId)).status, 200);
      const refusedCreate = await create(sim, projectId);
      assert.equal(refusedCreate.status, 429, 'a create and a message used the budget of 2');
      assert.equal(refusedCreate.headers.get('retry-after'), null, 'no Retry-After when asked for none');
      const refusedMessage = await message(sim, projectId, jobId);
      assert.equal(refusedMessage.status, 429, 'messages are refused too');
      const usedAt = sim.stats().jobs[0]?.createdAt ?? 0;
      await waitFor(() => Date.now() > usedAt + 1_050, { what: 'the window to pass', timeoutMs: 5_000 });
      assert.equal((await create(sim, projectId)).status, 201, 'the budget frees after W seconds');
    });
  });

  test('0 means unlimited', async () => {
    await withSimulator({ createsPerProjectPerHour: 0 }, async (sim) => {
      const projectId = uniqueId('proj');
      for (let i = 0; i < 5; i += 1) await createId(sim, projectId);
      assert.equal(sim.stats().jobsPerProject[projectId], 5);
    });
  });
});

describe('idempotency keys ignored (the default, as the live API)', () => {
  test('the same Idempotency-Key on create makes a new job each time, and the stats count both', async () => {
    await withSimulator({}, async (sim) => {
      const projectId = uniqueId('proj');
      const key = uniqueId('idem');
      const first = await create(sim, projectId, { 'idempotency-key': key });
      const second = await create(sim, projectId, { 'idempotency-key': key });
      assert.equal(first.status, 201);
      assert.equal(second.status, 201, 'not a replay');
      assert.notEqual(second.json?.id, first.json?.id);
      assert.equal(sim.stats().jobsPerProject[projectId], 2);
      assert.equal(sim.stats().jobsPerIdempotencyKey[key], 2);
      assert.equal(sim.stats().createsPerIdempotencyKey[key], 2);
    });
  });

  test('a reused key with another prompt is another job, not 422; each create uses the rate limit', async () => {
    await withSimulator({ createsPerProjectPerHour: 2 }, async (sim) => {
      const projectId = uniqueId('proj');
      const key = uniqueId('idem');
      assert.equal((await create(sim, projectId, { 'idempotency-key': key })).status, 201);
      const other = await call(sim, 'POST', jobsPath(projectId), {
        key: KEY,
        body: promptBody('Something else'),
        headers: { 'idempotency-key': key },
      });
      assert.equal(other.status, 201, other.text);
      const limited = await create(sim, projectId, { 'idempotency-key': key });
      assert.equal(limited.status, 429, 'a repeated key is a use like any other');
      assert.equal(sim.stats().jobsPerIdempotencyKey[key], 2);
      assert.equal(sim.stats().createsPerIdempotencyKey[key], 2, 'a refused create is not counted');
    });
  });

  test('a follow-up message with the same key starts a turn each time', async () => {
    await withSimulator({ defaultScenario: { durationMs: 60_000 } }, async (sim) => {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      const key = uniqueId('idem');
      assert.equal((await message(sim, projectId, jobId, { 'idempotency-key': key })).status, 200);
      assert.equal((await message(sim, projectId, jobId, { 'idempotency-key': key })).status, 200);
      assert.equal(sim.stats().jobs.find((j) => j.id === jobId)?.turns, 3);
      assert.equal(sim.stats().messagesPerIdempotencyKey[key], 2);
    });
  });
});

describe('idempotency keys honoured (honourIdempotencyKey: true)', () => {
  test('the same Idempotency-Key returns the same job, counted once, without using the rate limit', async () => {
    await withSimulator({ createsPerProjectPerHour: 1, honourIdempotencyKey: true }, async (sim) => {
      const projectId = uniqueId('proj');
      const key = uniqueId('idem');
      const first = await create(sim, projectId, { 'idempotency-key': key });
      const second = await create(sim, projectId, { 'idempotency-key': key });
      assert.equal(first.status, 201);
      assert.equal(second.status, 200);
      assert.equal(second.json?.id, first.json?.id);
      assert.equal(sim.stats().jobsPerProject[projectId], 1);
      assert.equal(sim.stats().jobsPerIdempotencyKey[key], 1);
      assert.equal(sim.stats().createsPerIdempotencyKey[key], 2, 'the replay is counted as a create');
    });
  });

  test('the same key in another project is another job; a reused key with another prompt is 422', async () => {
    await withSimulator({ honourIdempotencyKey: true }, async (sim) => {
      const key = uniqueId('idem');
      const a = await create(sim, uniqueId('proj'), { 'idempotency-key': key });
      const b = await create(sim, uniqueId('proj'), { 'idempotency-key': key });
      assert.notEqual(a.json?.id, b.json?.id);
      const projectId = uniqueId('proj');
      await create(sim, projectId, { 'idempotency-key': key });
      const conflict = await call(sim, 'POST', jobsPath(projectId), {
        key: KEY,
        body: promptBody('Something else'),
        headers: { 'idempotency-key': key },
      });
      assert.equal(conflict.status, 422);
    });
  });

  test('a follow-up message with the same key starts one turn only', async () => {
    await withSimulator(
      { defaultScenario: { durationMs: 60_000 }, honourIdempotencyKey: true },
      async (sim) => {
        const projectId = uniqueId('proj');
        const jobId = await createId(sim, projectId);
        const key = uniqueId('idem');
        assert.equal((await message(sim, projectId, jobId, { 'idempotency-key': key })).status, 200);
        assert.equal((await message(sim, projectId, jobId, { 'idempotency-key': key })).status, 200);
        assert.equal(sim.stats().jobs.find((j) => j.id === jobId)?.turns, 2);
        assert.equal(sim.stats().messagesPerIdempotencyKey[key], 2, 'the replay is counted as a message');
      },
    );
  });
});

describe('follow-up turns', () => {
  test('a message puts a completed job back to active, and it completes again with a new link', async () => {
    await withSimulator({ defaultScenario: { durationMs: 100 } }, async (sim) => {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      const first = await until(sim, projectId, jobId, 'completed');
      const sent = await message(sim, projectId, jobId);
      assert.equal(sent.status, 200);
      assert.equal(sent.json?.status, 'active');
      assert.equal(sent.json?.prLink, null);
      assert.equal(sim.stats().jobs.find((j) => j.id === jobId)?.terminalAt, null);
      const second = await until(sim, projectId, jobId, 'completed');
      assert.match(String(second.prLink), PR_LINK);
      assert.notEqual(second.prLink, first.prLink);
      assert.equal(sim.stats().jobs.find((j) => j.id === jobId)?.turns, 2);
    });
  });

  test('a message revives an archived job', async () => {
    await withSimulator({ defaultScenario: { durationMs: 100 } }, async (sim) => {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      sim.archiveJob(projectId, jobId);
      const sent = await message(sim, projectId, jobId);
      assert.equal(sent.json?.status, 'active');
      assert.equal(sent.json?.archivedAt, null);
    });
  });

  test('stale reads: the message answer and the next N reads still show the previous turn', async () => {
    await withSimulator({ defaultScenario: { durationMs: 100 } }, async (sim) => {
      const projectId = uniqueId('proj');
      sim.setScenario(projectId, { faults: { staleReadsAfterMessage: 2 } });
      const jobId = await createId(sim, projectId);
      const first = await until(sim, projectId, jobId, 'completed');
      const sent = await message(sim, projectId, jobId);
      assert.deepEqual(sent.json, first, 'the message answer is the previous turn');
      assert.deepEqual((await get(sim, projectId, jobId)).json, first);
      assert.deepEqual((await get(sim, projectId, jobId)).json, first);
      assert.equal((await get(sim, projectId, jobId)).json?.status, 'active', 'then the new turn shows');
    });
  });

  test('stale reads after an answered message: the answer is the new turn, the next N reads the previous one', async () => {
    await withSimulator({ defaultScenario: { durationMs: 100 } }, async (sim) => {
      const projectId = uniqueId('proj');
      sim.setScenario(projectId, { faults: { staleReadsAfterAnsweredMessage: 2 } });
      const jobId = await createId(sim, projectId);
      const first = await until(sim, projectId, jobId, 'completed');
      const sent = await message(sim, projectId, jobId);
      assert.equal(sent.json?.status, 'active', 'the message answer is the new turn');
      assert.equal(sent.json?.prLink, null);
      for (let read = 1; read <= 2; read += 1) {
        const lagging = (await get(sim, projectId, jobId)).json ?? {};
        assert.equal(lagging.status, 'completed', `read ${read} still sees the previous turn`);
        assert.equal(lagging.prLink, first.prLink);
      }
      assert.equal((await get(sim, projectId, jobId)).json?.status, 'active', 'then the new turn shows');
      const second = await until(sim, projectId, jobId, 'completed');
      assert.notEqual(second.prLink, first.prLink, 'and its own link once it ends');
    });
  });

  test('404 for the first N reads after create', async () => {
    await withSimulator({}, async (sim) => {
      const projectId = uniqueId('proj');
      sim.setScenario(projectId, { faults: { notFoundReadsAfterCreate: 2 } });
      const jobId = await createId(sim, projectId);
      assert.equal((await get(sim, projectId, jobId)).status, 404);
      assert.equal((await get(sim, projectId, jobId)).status, 404);
      assert.equal((await get(sim, projectId, jobId)).status, 200);
    });
  });
});

describe('stats, admin and log', () => {
  test('stats count jobs, requests per endpoint, status and project', async () => {
    await withSimulator({}, async (sim) => {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      await get(sim, projectId, jobId);
      await get(sim, projectId, 'job_missing');
      await message(sim, projectId, jobId);
      await call(sim, 'POST', jobsPath(projectId), { key: 'wrong', body: promptBody('x') });
      const stats = sim.stats();
      assert.equal(stats.jobsCreated, 1);
      assert.deepEqual(stats.requestsPerEndpoint, { create: 2, get: 2, message: 1 });
      assert.deepEqual(stats.requestsPerStatus, { '200': 2, '201': 1, '401': 1, '404': 1 });
      assert.deepEqual(stats.requestsPerProjectEndpoint[projectId], { create: 2, get: 2, message: 1 });
      assert.deepEqual(
        stats.jobs.map((j) => [j.id, j.projectId, j.status, j.turns]),
        [[jobId, projectId, 'active', 2]],
      );
      const overHttp = await call(sim, 'GET', '/_sim/stats');
      assert.equal(overHttp.status, 200);
      assert.equal(overHttp.json?.jobsCreated, 1);
      assert.deepEqual(
        sim.stats().requestsPerEndpoint,
        stats.requestsPerEndpoint,
        'admin calls are not counted',
      );
    });
  });

  test('stats count the gets and messages each job received, with the arrival of the last', async () => {
    await withSimulator({ defaultScenario: { durationMs: 60_000 } }, async (sim) => {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      const requestsOf = () => sim.stats().jobs.find((j) => j.id === jobId)?.requests;
      assert.deepEqual(requestsOf(), {
        get: { count: 0, lastAt: null },
        message: { count: 0, lastAt: null },
      });
      await get(sim, projectId, jobId);
      const beforeSecondGet = Date.now();
      await get(sim, projectId, jobId);
      const afterSecondGet = Date.now();
      // Refused before handling: not a request the job received.
      await call(sim, 'GET', jobPath(projectId, jobId), { key: 'wrong' });
      const beforeMessage = Date.now();
      await message(sim, projectId, jobId);
      const requests = requestsOf();
      assert.equal(requests?.get.count, 2);
      const lastGet = requests?.get.lastAt ?? 0;
      assert.ok(lastGet >= beforeSecondGet && lastGet <= afterSecondGet, `last get at ${lastGet}`);
      assert.equal(requests?.message.count, 1);
      assert.ok((requests?.message.lastAt ?? 0) >= beforeMessage);
    });
  });

  test('PUT /_sim/scenarios sets a scenario; a bad one is 400', async () => {
    await withSimulator({}, async (sim) => {
      const projectId = uniqueId('proj');
      const put = await call(sim, 'PUT', `/_sim/scenarios/${projectId}`, {
        body: JSON.stringify({ projectExists: false }),
      });
      assert.equal(put.status, 200, put.text);
      assert.equal((await create(sim, projectId)).status, 404);
      const bad = await call(sim, 'PUT', `/_sim/scenarios/${projectId}`, {
        body: JSON.stringify({ outcome: 'maybe' }),
      });
      assert.equal(bad.status, 400);
      assert.match(String(bad.json?.error), /outcome/);
      const typo = await call(sim, 'PUT', `/_sim/scenarios/${projectId}`, {
        body: JSON.stringify({ duration: 5 }),
      });
      assert.equal(typo.status, 400, 'unknown fields are refused');
    });
  });

  test('latencyMs delays every answer', async () => {
    await withSimulator({ defaultScenario: { latencyMs: 150 } }, async (sim) => {
      const started = performance.now();
      await create(sim, uniqueId('proj'));
      assert.ok(performance.now() - started >= 140);
    });
  });

  test('one JSON log line per request, with method, path, status and latency, and no header value', async () => {
    const lines: string[] = [];
    const sim = await startSimulator({ port: 0, apiKeys: [KEY], log: (line) => lines.push(line) });
    try {
      const projectId = uniqueId('proj');
      const jobId = await createId(sim, projectId);
      await get(sim, projectId, jobId);
      await call(sim, 'GET', jobPath(projectId, jobId), { key: 'wrong-key-value' });
      await waitFor(() => lines.length === 3, { what: 'three log lines' });
      const entries = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
      assert.deepEqual(
        entries.map((e) => [e.method, e.path, e.status]),
        [
          ['POST', jobsPath(projectId), 201],
          ['GET', jobPath(projectId, jobId), 200],
          ['GET', jobPath(projectId, jobId), 401],
        ],
      );
      assert.ok(entries.every((e) => typeof e.latencyMs === 'number'));
      for (const line of lines) {
        assert.ok(!line.includes(KEY) && !line.includes('wrong-key-value') && !/bearer/i.test(line), line);
      }
    } finally {
      await sim.stop();
    }
  });

  test('stop() ends hanging requests and returns promptly', async () => {
    const sim = await startSimulator({
      port: 0,
      log: false,
      apiKeys: [KEY],
      defaultScenario: { faults: { rules: [{ endpoint: 'any', kind: 'hang' }] } },
    });
    const hanging = create(sim, uniqueId('proj'));
    await waitFor(() => sim.stats().requestsPerStatus.hang === 1, { what: 'the request to hang' });
    const started = performance.now();
    await sim.stop();
    assert.ok(performance.now() - started < 1_000);
    await assert.rejects(hanging);
  });
});
