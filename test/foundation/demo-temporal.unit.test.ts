import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { cliReleases, isOlder, OLDEST_CLI } from '../../dev/demo-temporal.js';

const scratch = mkdtempSync(join(tmpdir(), 'demo-temporal-unit-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** An executable that prints `said` for `--version`, followed by `body` as a binary's bytes would be. */
function fakeCli(name: string, said: string, body = ''): string {
  const path = join(scratch, name);
  writeFileSync(path, `#!/bin/sh\necho "${said}"\nexit 0\n${body}`, { mode: 0o755 });
  return path;
}

test('a released CLI is read from its --version line, with the UI it embeds', () => {
  const cli = fakeCli('released', 'temporal version 1.5.1 (Server 1.29.1, UI 2.42.1)');
  assert.deepEqual(cliReleases(cli), { release: '1.5.1', ui: '2.42.1' });
});

test('a CLI built from source says 0.0.0-DEV; its release is the module version Go recorded in it', () => {
  const modinfo =
    '\npath\tgithub.com/temporalio/cli/cmd/temporal\nmod\tgithub.com/temporalio/cli\tv1.5.1\th1:abc=\n';
  const cli = fakeCli('dev', 'temporal version 0.0.0-DEV (Server 1.29.1, UI 2.42.1)', modinfo);
  assert.deepEqual(cliReleases(cli), { release: '1.5.1', ui: '2.42.1' });
  const unknown = fakeCli('dev-unknown', 'temporal version 0.0.0-DEV (Server 1.29.1, UI 2.42.1)');
  assert.equal(cliReleases(unknown).release, '0.0.0-DEV');
});

test('the floor: 1.5.1 and later are used; older releases and unreadable ones are passed over', () => {
  for (const release of [OLDEST_CLI, '1.5.2', '1.10.0', '2.0.0'])
    assert.equal(isOlder(release, OLDEST_CLI), false, release);
  for (const release of ['1.5.0', '1.4.1', '0.0.0-DEV', 'version unknown'])
    assert.equal(isOlder(release, OLDEST_CLI), true, release);
  assert.equal(isOlder('1.29.1', '1.31.0'), true);
  assert.equal(isOlder('1.32.2', '1.31.0'), false);
});
