import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { cliCacheDir, findTemporalCli, TemporalCliUnavailableError } from '../../dev/temporal-cli.js';

const scratch = mkdtempSync(join(tmpdir(), 'cli-resolver-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

function fakeBinary(dir: string): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'temporal');
  writeFileSync(path, '#!/bin/sh\necho temporal version test\n');
  chmodSync(path, 0o755);
  return path;
}

test('TEMPORAL_CLI_PATH wins over PATH and the cache', () => {
  const explicit = fakeBinary(join(scratch, 'explicit'));
  const onPath = fakeBinary(join(scratch, 'bin'));
  const found = findTemporalCli({
    TEMPORAL_CLI_PATH: explicit,
    PATH: join(scratch, 'bin'),
    XDG_CACHE_HOME: scratch,
  });
  assert.deepEqual(found, { source: 'TEMPORAL_CLI_PATH', path: explicit });
  assert.notEqual(found?.path, onPath);
});

test('a TEMPORAL_CLI_PATH that is not executable is a clear error, not a silent fallback', () => {
  assert.throws(
    () => findTemporalCli({ TEMPORAL_CLI_PATH: join(scratch, 'missing'), PATH: '' }),
    (err: unknown) =>
      err instanceof TemporalCliUnavailableError && /TEMPORAL_CLI_PATH=.*not an executable/.test(err.message),
  );
});

test('PATH comes before the cache, and the cache before a build', () => {
  const cacheHome = join(scratch, 'cache-home');
  const cached = fakeBinary(cliCacheDir({ XDG_CACHE_HOME: cacheHome }));
  const onPath = fakeBinary(join(scratch, 'path-bin'));
  assert.deepEqual(findTemporalCli({ PATH: join(scratch, 'path-bin'), XDG_CACHE_HOME: cacheHome }), {
    source: 'PATH',
    path: onPath,
  });
  assert.deepEqual(findTemporalCli({ PATH: '', XDG_CACHE_HOME: cacheHome }), {
    source: 'cache',
    path: cached,
  });
  assert.equal(findTemporalCli({ PATH: '', XDG_CACHE_HOME: join(scratch, 'empty') }), null);
});
