/**
 * What a key file reports: one event per change of state, not one per check. A missing file
 * checked every second for a minute is one warning, and its return one more line. No server.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { FileApiKey, type ApiKeyFileEvent } from '../../src/agent-api/index.js';
import { SecretVolume } from '../secret-volume.js';

const root = mkdtempSync(join(tmpdir(), 'agent-key-events-'));
after(() => rmSync(root, { recursive: true, force: true }));

test('a key file that goes missing is reported once, its return once, however often it is checked', () => {
  const key = `key-${randomUUID()}`;
  const volume = new SecretVolume(root, key);
  let now = 0;
  const events: ApiKeyFileEvent[] = [];
  const source = new FileApiKey(volume.path, {
    checkIntervalMs: 1_000,
    now: () => now,
    onEvent: (e) => events.push(e),
  });

  rmSync(join(volume.dir, '..data'));
  for (let second = 1; second <= 60; second++) {
    now = second * 1_000;
    assert.equal(source.current(), key, 'the last good key stays in use');
  }
  assert.deepEqual(events, [{ kind: 'unusable', path: volume.path, reason: 'cannot read it: ENOENT' }]);

  volume.swap(key);
  now += 1_000;
  assert.equal(source.current(), key);
  now += 1_000;
  source.current();
  assert.deepEqual(
    events.map((e) => e.kind),
    ['unusable', 'recovered'],
  );

  rmSync(join(volume.dir, '..data'));
  now += 1_000;
  source.current();
  now += 1_000;
  source.current();
  assert.deepEqual(
    events.map((e) => e.kind),
    ['unusable', 'recovered', 'unusable'],
    'a new outage is a new change of state',
  );
});

test('a refused key re-reads a missing file without a second warning', () => {
  const key = `key-${randomUUID()}`;
  const volume = new SecretVolume(root, key);
  const events: ApiKeyFileEvent[] = [];
  const source = new FileApiKey(volume.path, {
    checkIntervalMs: 1_000,
    now: () => 0,
    onEvent: (e) => events.push(e),
  });
  rmSync(join(volume.dir, '..data'));
  for (let i = 0; i < 5; i++) assert.equal(source.afterRefusal(key), null);
  assert.equal(events.length, 1);
});
