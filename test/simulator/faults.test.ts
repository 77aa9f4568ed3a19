/** The fault rules as raw HTTP sees them: order, counting, skip, rates with a seed, and each kind. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { parseScenario, startSimulator, type FaultRule } from '../../src/simulator/index.js';
import { startTestSimulator, uniqueId, waitFor } from '../harness.js';
import { call, jobPath, jobsPath, promptBody, rawRequest } from './http.js';

const KEY = uniqueId('sim-key');
const sim = await startTestSimulator({ apiKeys: [KEY], defaultScenario: { durationMs: 60_000 } });

function projectWith(rules: FaultRule[], seed?: number): string {
  const projectId = uniqueId('proj');
  sim.setScenario(projectId, { faults: { rules, seed } });
  return projectId;
}

async function statuses(projectId: string, endpoint: 'create' | 'get', times: number): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < times; i += 1) {
    const response =
      endpoint === 'create'
        ? await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') })
        : await call(sim, 'GET', jobPath(projectId, 'job_missing'), { key: KEY });
    seen.push(response.status);
  }
  return seen;
}

test('rules read as a sequence: a request taken by one rule is not counted by the next', async () => {
  const projectId = projectWith([
    { endpoint: 'create', first: 2, kind: 'status', status: 503 },
    { endpoint: 'create', first: 1, kind: 'status', status: 500 },
  ]);
  assert.deepEqual(await statuses(projectId, 'create', 4), [503, 503, 500, 201]);
  assert.equal(sim.stats().jobsPerProject[projectId], 1, 'failed creates store nothing');
});

test('skip lets requests through first; endpoints are counted apart; any matches all', async () => {
  const projectId = projectWith([
    { endpoint: 'get', skip: 1, first: 1, kind: 'status', status: 504 },
    { endpoint: 'any', first: 1, kind: 'status', status: 408 },
  ]);
  assert.deepEqual(await statuses(projectId, 'get', 3), [408, 504, 404]);
  assert.deepEqual(await statuses(projectId, 'create', 1), [201]);
});

test('setScenario restarts the counts', async () => {
  const rules: FaultRule[] = [{ endpoint: 'get', first: 1, kind: 'status', status: 502 }];
  const projectId = projectWith(rules);
  assert.deepEqual(await statuses(projectId, 'get', 2), [502, 404]);
  sim.setScenario(projectId, { faults: { rules } });
  assert.deepEqual(await statuses(projectId, 'get', 2), [502, 404]);
});

test('an error rate is reproducible from its seed, and differs with another seed', async () => {
  const rules: FaultRule[] = [{ endpoint: 'get', rate: 0.5, kind: 'status', status: 503 }];
  const run = async (seed: number, projectId: string) => {
    sim.setScenario(projectId, { faults: { rules, seed } });
    return statuses(projectId, 'get', 40);
  };
  const projectId = uniqueId('proj');
  const first = await run(7, projectId);
  assert.deepEqual(await run(7, projectId), first);
  const failures = first.filter((s) => s === 503).length;
  assert.ok(failures > 5 && failures < 35, `about half failed: ${failures}`);
  assert.notDeepEqual(await run(8, projectId), first);
});

test('Retry-After in both forms', async () => {
  const projectId = projectWith([
    { endpoint: 'get', first: 1, kind: 'status', status: 429, retryAfter: { seconds: 3 } },
    {
      endpoint: 'get',
      first: 1,
      kind: 'status',
      status: 503,
      retryAfter: { seconds: 60, form: 'http-date' },
    },
  ]);
  const seconds = await call(sim, 'GET', jobPath(projectId, 'j'), { key: KEY });
  assert.equal(seconds.status, 429);
  assert.equal(seconds.headers.get('retry-after'), '3');
  const date = await call(sim, 'GET', jobPath(projectId, 'j'), { key: KEY });
  assert.equal(date.status, 503);
  const at = Date.parse(date.headers.get('retry-after') ?? '');
  assert.ok(at - Date.now() > 55_000 && at - Date.now() <= 60_000);
  assert.match(
    date.headers.get('retry-after') ?? '',
    /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/,
  );
});

test('html and truncated bodies', async () => {
  const projectId = projectWith([
    { endpoint: 'create', first: 1, kind: 'html', status: 502 },
    { endpoint: 'create', first: 1, kind: 'truncated', status: 502 },
    { endpoint: 'create', first: 1, kind: 'truncated', status: 200 },
  ]);
  const html = await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  assert.equal(html.status, 502);
  assert.match(html.headers.get('content-type') ?? '', /text\/html/);
  assert.match(html.text, /^<html>/);
  const cut502 = await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  assert.equal(cut502.status, 502);
  assert.equal(cut502.json, undefined);
  assert.equal(sim.stats().jobsPerProject[projectId], undefined, 'neither created a job');
  const cut200 = await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  assert.equal(cut200.status, 200);
  assert.equal(cut200.json, undefined);
  assert.ok(cut200.text.startsWith('{"id":"job_'));
  assert.equal(sim.stats().jobsPerProject[projectId], 1, 'a truncated 200 create did create the job');
});

test('drop and reset-after-store: no response; only the latter stores the job', async () => {
  const dropped = projectWith([{ endpoint: 'create', first: 1, kind: 'drop' }]);
  await assert.rejects(call(sim, 'POST', jobsPath(dropped), { key: KEY, body: promptBody('x') }));
  assert.equal(sim.stats().jobsPerProject[dropped], undefined);
  const reset = projectWith([{ endpoint: 'create', first: 1, kind: 'reset-after-store' }]);
  await assert.rejects(call(sim, 'POST', jobsPath(reset), { key: KEY, body: promptBody('x') }));
  assert.equal(sim.stats().jobsPerProject[reset], 1);
  assert.ok((sim.stats().requestsPerStatus.drop ?? 0) >= 1);
  assert.ok((sim.stats().requestsPerStatus.reset ?? 0) >= 1);
});

test('a fault comes after auth: an unauthenticated request does not use it up', async () => {
  const projectId = projectWith([{ endpoint: 'get', first: 1, kind: 'status', status: 500 }]);
  assert.equal((await call(sim, 'GET', jobPath(projectId, 'j'), { key: 'wrong' })).status, 401);
  assert.equal((await call(sim, 'GET', jobPath(projectId, 'j'), { key: KEY })).status, 500);
});

test('Retry-After 0, and an HTTP date in the past (a server whose clock is behind)', async () => {
  const projectId = projectWith([
    { endpoint: 'get', first: 1, kind: 'status', status: 429, retryAfter: { seconds: 0 } },
    {
      endpoint: 'get',
      first: 1,
      kind: 'status',
      status: 503,
      retryAfter: { seconds: -3600, form: 'http-date' },
    },
  ]);
  const zero = await call(sim, 'GET', jobPath(projectId, 'j'), { key: KEY });
  assert.equal(zero.headers.get('retry-after'), '0');
  const past = await call(sim, 'GET', jobPath(projectId, 'j'), { key: KEY });
  const at = Date.parse(past.headers.get('retry-after') ?? '');
  assert.ok(Date.now() - at > 3_500_000, `a date an hour ago, got ${past.headers.get('retry-after')}`);
  assert.throws(
    () =>
      sim.setScenario(
        uniqueId('proj'),
        parseScenario({
          faults: { rules: [{ endpoint: 'get', kind: 'status', status: 429, retryAfter: { seconds: -1 } }] },
        }),
      ),
    /need form "http-date"/,
  );
});

test('oversized: a real record padded with an unknown field; slow: processed now, answered later', async () => {
  const projectId = projectWith([
    { endpoint: 'create', first: 1, kind: 'oversized', bytes: 300_000 },
    { endpoint: 'get', first: 1, kind: 'slow', ms: 700 },
  ]);
  const created = await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  assert.equal(created.status, 201);
  const record = created.json as { id: string; status: string; padding: string };
  assert.equal(record.status, 'active');
  assert.equal(record.padding.length, 300_000);
  const started = Date.now();
  const read = await call(sim, 'GET', jobPath(projectId, record.id), { key: KEY });
  assert.equal(read.status, 200);
  assert.ok(Date.now() - started >= 650, `answered after ${Date.now() - started} ms`);
});

test('altered: processed, and answered with fields of the real record replaced or left out', async () => {
  const projectId = projectWith([
    { endpoint: 'create', first: 1, kind: 'altered', set: { status: 12, region: 'eu' }, remove: ['model'] },
  ]);
  const created = await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  assert.equal(created.status, 201);
  const record = created.json as Record<string, unknown>;
  assert.equal(record.status, 12);
  assert.equal(record.region, 'eu');
  assert.ok(!('model' in record));
  assert.equal(sim.stats().jobsPerProject[projectId], 1, 'the create was applied');
});

/** Timers (timeouts and intervals) this process holds now. */
function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;
}

test('trickle: processed at once, the real body a few bytes per interval with the full content-length', async () => {
  const projectId = projectWith([
    { endpoint: 'create', first: 1, kind: 'trickle', intervalMs: 40, bytesPerChunk: 16 },
  ]);
  let storedAtHead: number | undefined;
  const exchange = await rawRequest(sim, 'POST', jobsPath(projectId), {
    key: KEY,
    body: promptBody('x'),
    onResponse: () => (storedAtHead = sim.stats().jobsPerProject[projectId]),
  });
  assert.equal(storedAtHead, 1, 'the job was stored before the body started');
  assert.equal(exchange.status, 201);
  assert.ok(exchange.complete, 'the whole body arrived in the end');
  assert.equal(Number(exchange.headers['content-length']), Buffer.byteLength(exchange.text));
  const record = JSON.parse(exchange.text) as { id: string; status: string };
  assert.equal(record.status, 'active');
  assert.ok(sim.stats().jobs.some((job) => job.id === record.id));
  const expectedChunks = Math.ceil(Buffer.byteLength(exchange.text) / 16);
  assert.ok(exchange.chunks.length >= expectedChunks / 2, `${exchange.chunks.length} chunks`);
  assert.ok(
    exchange.chunks.every((chunk) => chunk.bytes.length <= 32),
    'no more than two chunks ever arrived together',
  );
  const took = (exchange.chunks.at(-1)?.atMs ?? 0) - (exchange.chunks[0]?.atMs ?? 0);
  assert.ok(took >= (expectedChunks - 1) * 40 - 40, `the body took ${took} ms`);
});

test('trickle: the interval is cleared when the client goes away', async () => {
  const projectId = projectWith([{ endpoint: 'create', first: 1, kind: 'trickle', intervalMs: 60_000 }]);
  const before = activeTimers();
  let timersWhileTrickling = 0;
  const exchange = await rawRequest(sim, 'POST', jobsPath(projectId), {
    key: KEY,
    body: promptBody('x'),
    onResponse: (_head, destroy) => {
      timersWhileTrickling = activeTimers();
      destroy();
    },
  });
  assert.equal(exchange.complete, false);
  assert.equal(timersWhileTrickling, before + 1, 'one interval while the body trickles');
  await waitFor(() => activeTimers() === before, { what: 'the interval to be cleared', timeoutMs: 5_000 });
  assert.equal(sim.stats().jobsPerProject[projectId], 1, 'the create was processed all the same');
});

test('trickle: stop() clears the interval and ends the answer', async () => {
  const own = await startSimulator({
    port: 0,
    log: false,
    apiKeys: [KEY],
    defaultScenario: { faults: { rules: [{ endpoint: 'create', kind: 'trickle', intervalMs: 60_000 }] } },
  });
  const before = activeTimers();
  let headArrived: () => void = () => undefined;
  const head = new Promise<void>((resolve) => (headArrived = resolve));
  const pending = rawRequest(own, 'POST', jobsPath(uniqueId('proj')), {
    key: KEY,
    body: promptBody('x'),
    onResponse: () => headArrived(),
  });
  await head;
  assert.equal(activeTimers(), before + 1, 'one interval while the body trickles');
  const started = performance.now();
  await own.stop();
  assert.ok(performance.now() - started < 1_000, 'stop() did not wait for the body');
  const exchange = await pending;
  assert.equal(exchange.complete, false);
  assert.equal(exchange.text.length, 1, 'one byte arrived before the stop');
  assert.equal(activeTimers(), before);
});

test('reset-mid-body: processed, headers with the full length, the body cut after the ID', async () => {
  const projectId = projectWith([{ endpoint: 'create', first: 1, kind: 'reset-mid-body' }]);
  const resetsBefore = sim.stats().requestsPerStatus.reset ?? 0;
  const exchange = await rawRequest(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  assert.equal(exchange.status, 201);
  assert.equal(exchange.complete, false);
  assert.ok(exchange.error !== null, 'the client saw the body stop short');
  assert.ok(Number(exchange.headers['content-length']) > Buffer.byteLength(exchange.text));
  const match = /^\{"id":"(job_[0-9a-f]+)"$/.exec(exchange.text);
  assert.ok(match, `the ID pair and nothing after it: ${exchange.text}`);
  const jobs = sim.stats().jobs.filter((job) => job.projectId === projectId);
  assert.deepEqual(
    jobs.map((job) => job.id),
    [match[1]],
    'the job was stored, with the ID that arrived',
  );
  assert.equal(sim.stats().requestsPerStatus.reset, resetsBefore + 1);
});

test('reset-mid-body: bytes cuts where asked, on a get too, and never sends the whole body', async () => {
  const projectId = projectWith([
    { endpoint: 'get', first: 1, kind: 'reset-mid-body', bytes: 5 },
    { endpoint: 'get', first: 1, kind: 'reset-mid-body', bytes: 1_000_000 },
  ]);
  const created = await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  const path = jobPath(projectId, String(created.json?.id));
  const five = await rawRequest(sim, 'GET', path, { key: KEY });
  assert.equal(five.status, 200);
  assert.equal(five.text, '{"id"');
  const almost = await rawRequest(sim, 'GET', path, { key: KEY });
  assert.equal(almost.complete, false);
  assert.equal(Buffer.byteLength(almost.text), Number(almost.headers['content-length']) - 1);
  assert.equal((await call(sim, 'GET', path, { key: KEY })).status, 200, 'then reads are whole');
});

test('forMs: the rule applies from its first match for that long, then never again', async () => {
  const projectId = projectWith([{ endpoint: 'get', kind: 'html', status: 200, forMs: 300 }]);
  const created = await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  const path = jobPath(projectId, String(created.json?.id));
  // The window opens at the first match, not when the scenario was set.
  await delay(350);
  const opened = Date.now();
  const first = await call(sim, 'GET', path, { key: KEY });
  assert.equal(first.status, 200);
  assert.match(first.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(first.text, /maintenance/i);
  assert.equal(first.json, undefined, 'not a record');
  assert.match((await call(sim, 'GET', path, { key: KEY })).headers.get('content-type') ?? '', /^text\/html/);
  await waitFor(
    async () => /json/.test((await call(sim, 'GET', path, { key: KEY })).headers.get('content-type') ?? ''),
    { what: 'the maintenance window to end', timeoutMs: 5_000, intervalMs: 20 },
  );
  assert.ok(Date.now() - opened >= 300, `the window lasted ${Date.now() - opened} ms`);
  for (let i = 0; i < 3; i += 1) {
    const after = await call(sim, 'GET', path, { key: KEY });
    assert.equal(after.json?.id, created.json?.id, 'after the window, never again');
  }
});

test('forMs with a status: 404s on get during a failover, then the job is there', async () => {
  const projectId = projectWith([{ endpoint: 'get', kind: 'status', status: 404, forMs: 200 }]);
  const created = await call(sim, 'POST', jobsPath(projectId), { key: KEY, body: promptBody('x') });
  const path = jobPath(projectId, String(created.json?.id));
  const opened = Date.now();
  assert.equal((await call(sim, 'GET', path, { key: KEY })).status, 404);
  assert.equal((await call(sim, 'GET', path, { key: KEY })).status, 404);
  await waitFor(async () => (await call(sim, 'GET', path, { key: KEY })).status === 200, {
    what: 'the failover to end',
    timeoutMs: 5_000,
    intervalMs: 20,
  });
  assert.ok(Date.now() - opened >= 200);
  sim.setScenario(projectId, {
    faults: { rules: [{ endpoint: 'get', kind: 'status', status: 404, forMs: 200 }] },
  });
  assert.equal((await call(sim, 'GET', path, { key: KEY })).status, 404, 'setScenario opens a new window');
});

test('slow on create: the job exists at once, and a client that gives up never gets the answer', async () => {
  const projectId = projectWith([{ endpoint: 'create', first: 1, kind: 'slow', ms: 60_000 }]);
  const answered = sim.stats().requestsPerStatus['201'] ?? 0;
  const abort = new AbortController();
  const pending = fetch(`${sim.url}${jobsPath(projectId)}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: promptBody('x'),
    signal: abort.signal,
  });
  await waitFor(() => sim.stats().jobsPerProject[projectId] === 1, { what: 'the job to be stored' });
  // The worker dies: its request goes away with it.
  abort.abort();
  await assert.rejects(pending);
  assert.equal(sim.stats().requestsPerStatus['201'] ?? 0, answered, 'nobody was answered');
  assert.equal(sim.stats().jobsPerProject[projectId], 1);
});

test('the new rules are checked like the others', () => {
  for (const rule of [
    { endpoint: 'get', kind: 'trickle', intervalMs: 0 },
    { endpoint: 'get', kind: 'trickle', bytesPerChunk: 0 },
    { endpoint: 'get', kind: 'reset-mid-body', bytes: -1 },
    { endpoint: 'get', kind: 'html', status: 200, forMs: 0 },
    { endpoint: 'get', kind: 'reset-mid-body', byte: 3 },
  ]) {
    assert.throws(() => parseScenario({ faults: { rules: [rule] } }), Error, JSON.stringify(rule));
  }
  assert.deepEqual(
    parseScenario({
      faults: {
        staleReadsAfterAnsweredMessage: 2,
        rules: [{ endpoint: 'get', kind: 'trickle', intervalMs: 2000, bytesPerChunk: 1, forMs: 90_000 }],
      },
    }).faults?.rules?.[0],
    { endpoint: 'get', kind: 'trickle', intervalMs: 2000, bytesPerChunk: 1, forMs: 90_000 },
  );
});
