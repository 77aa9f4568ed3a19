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
import { SecretVolume, watchKeyFile } from '../secret-volume.js';

const root = mkdtempSync(join(tmpdir(), 'agent-key-events-'));
after(() => rmSync(root, { recursive: true, force: true }));

test('a key file that goes missing is reported once, its return once, however often it is checked', () => {
  const key = `key-${randomUUID()}`;
  const volume = new SecretVolume(root, key);
  const { source, events, clock } = watchKeyFile(volume.path, 1_000);

  rmSync(join(volume.dir, '..data'));
  for (let second = 1; second <= 60; second++) {
    clock.ms = second * 1_000;
    assert.equal(source.current(), key, 'the last good key stays in use');
  }
  assert.deepEqual(events, [{ kind: 'unusable', path: volume.path, reason: 'cannot read it: ENOENT' }]);

  volume.swap(key);
  clock.ms += 1_000;
  assert.equal(source.current(), key);
  clock.ms += 1_000;
  source.current();
  assert.deepEqual(
    events.map((e) => e.kind),
    ['unusable', 'recovered'],
  );

  rmSync(join(volume.dir, '..data'));
  clock.ms += 1_000;
  source.current();
  clock.ms += 1_000;
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
  const { source, events } = watchKeyFile(volume.path, 1_000);
  rmSync(join(volume.dir, '..data'));
  for (let i = 0; i < 5; i++) assert.equal(source.afterRefusal(key), null);
  assert.equal(events.length, 1);
});
