/** The fault rules as raw HTTP sees them: order, counting, skip, rates with a seed, and each kind. */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  parseScenario,
  startSimulator,
  type FaultRule,
  type RunningSimulator,
} from '../../src/simulator/index.js';
import { uniqueId } from '../harness.js';
import { call, jobPath, jobsPath, promptBody } from './http.js';

const KEY = uniqueId('sim-key');
let sim: RunningSimulator;

before(async () => {
  sim = await startSimulator({
    port: 0,
    log: false,
    apiKeys: [KEY],
    defaultScenario: { durationMs: 60_000 },
  });
});

after(() => sim.stop());

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
