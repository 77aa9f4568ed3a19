/**
 * Key rotation in the API client: a key file laid out as Kubernetes mounts a Secret (a symlink
 * into a `..data` directory that is swapped atomically), the real simulator over HTTP, and its
 * `PUT /_sim/keys` rotation. No server of Temporal is needed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { inspect } from 'node:util';
import { AgentApiClient, AgentApiError, ApiKeyFileError, FileApiKey } from '../../src/agent-api/index.js';
import type { WatchedFileEvent } from '../../src/agent-api/watched-file.js';
import { ApiFailureType } from '../../src/failure-policy/types.js';
import { startTestSimulator, uniqueId } from '../harness.js';
import { SecretVolume, watchKeyFile } from '../secret-volume.js';
import { createdJobs } from '../simulator-stats.js';

const root = mkdtempSync(join(tmpdir(), 'agent-key-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

function newKey(): string {
  return `rotation-key-${randomUUID()}`;
}

test('a file key is re-read when the mounted Secret is swapped, at most once per interval', () => {
  const [first, second] = [newKey(), newKey()];
  const volume = new SecretVolume(root, `${first}\n`);
  const { source, events, clock } = watchKeyFile(volume.path, 1_000);
  assert.equal(source.current(), first);

  volume.swap(second);
  clock.ms = 999;
  assert.equal(source.current(), first, 'no check before the interval has passed');
  clock.ms = 1_000;
  assert.equal(source.current(), second);
  assert.deepEqual(events, [{ kind: 'reloaded', path: volume.path }]);
  assert.deepEqual(source.known(), [first, second]);
});

test('an empty or malformed file keeps the last good key, and is read again on the next check', () => {
  const good = newKey();
  const volume = new SecretVolume(root, good);
  const { source, events, clock } = watchKeyFile(volume.path, 10);

  volume.swap('');
  clock.ms += 10;
  assert.equal(source.current(), good);
  volume.swap('two words');
  clock.ms += 10;
  assert.equal(source.current(), good);
  const next = newKey();
  volume.swap(next);
  clock.ms += 10;
  assert.equal(source.current(), next);
  assert.deepEqual(
    events.map((e) => e.kind),
    ['unusable', 'unusable', 'reloaded'],
  );
  assert.ok(!inspect(events).includes('two words'), 'an event never quotes the file');
});

test('a key file without a usable key fails at start, naming the file and not its content', () => {
  const volume = new SecretVolume(root, 'not a key');
  assert.throws(
    () => new FileApiKey(volume.path),
    (err: unknown) =>
      err instanceof ApiKeyFileError &&
      err.message.includes(volume.path) &&
      !err.message.includes('not a key'),
  );
  assert.throws(() => new FileApiKey(join(root, 'missing')), /cannot read it: ENOENT/);
});

test('a rotation with no overlap fails no call: a 401 re-reads the file and the call is sent once more', async () => {
  const [oldKey, newKeyValue] = [newKey(), newKey()];
  const volume = new SecretVolume(root, oldKey);
  const sim = await startTestSimulator({ apiKeys: [oldKey], defaultScenario: { durationMs: 60_000 } });
  const events: WatchedFileEvent[] = [];
  // A long interval: only the 401 path can pick up the new key within this test.
  const client = new AgentApiClient({
    baseUrl: sim.url,
    apiKey: new FileApiKey(volume.path, { checkIntervalMs: 3_600_000, onEvent: (e) => events.push(e) }),
  });
  const projectId = uniqueId('rotation');
  const job = await client.createJob(projectId, 'Before the rotation', { idempotencyKey: uniqueId('idem') });

  volume.swap(newKeyValue);
  const rotated = await fetch(`${sim.url}/_sim/keys`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiKeys: [newKeyValue] }),
  });
  assert.equal(rotated.status, 200);
  assert.ok(!(await rotated.text()).includes(newKeyValue), 'the admin answer does not echo the keys');

  const before401 = sim.stats().requestsPerStatus['401'] ?? 0;
  const read = await client.getJob(projectId, job.id);
  assert.equal(read.id, job.id);
  const created = await client.createJob(projectId, 'After the rotation', {
    idempotencyKey: uniqueId('idem'),
  });
  assert.notEqual(created.id, job.id);
  assert.equal(createdJobs(sim, projectId), 2);
  assert.equal((sim.stats().requestsPerStatus['401'] ?? 0) - before401, 1, 'one refusal, then the new key');
  assert.deepEqual(events, [{ kind: 'reloaded', path: volume.path }]);

  const oldKeyRefused = await fetch(`${sim.url}/v2/agent/${projectId}/job/${job.id}`, {
    headers: { authorization: `Bearer ${oldKey}` },
  });
  assert.equal(oldKeyRefused.status, 401, 'the simulator refuses the old key from then on');
});

test('a 401 with an unchanged file is final after one request, and no message carries a key', async () => {
  const key = newKey();
  const volume = new SecretVolume(root, key);
  const sim = await startTestSimulator({ apiKeys: [newKey()] });
  const client = new AgentApiClient({ baseUrl: sim.url, apiKey: new FileApiKey(volume.path) });
  const projectId = uniqueId('refused');
  const err = await client.getJob(projectId, 'job-1').then(
    () => assert.fail('a refused key must fail the call'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof AgentApiError);
  assert.equal(err.type, ApiFailureType.Unauthorized);
  assert.equal(err.status, 401);
  assert.equal(sim.stats().requestsPerStatus['401'], 1, 'the same key is not sent twice');
  assert.ok(!inspect(err, { depth: 10 }).includes(key), 'the error does not carry the key');
  assert.ok(!inspect(client, { depth: 10 }).includes(key), 'the client does not show the key');
});
