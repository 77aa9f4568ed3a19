/**
 * `npm run demo` on the Temporal a newcomer already has (dev/demo-temporal.ts): with a `temporal`
 * CLI on PATH and no Go, from a clean copy of the repository, the CLI's dev server and no build;
 * with an older CLI and a network that drops everything, the CLI named, the SDK's download given up
 * within its bound, and the build from source (the cached one) as before; and a CLI the SDK
 * downloaded earlier, started from the SDK's cache without the network.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, test } from 'node:test';
import { DOWNLOAD_STALL_MS, OLDEST_CLI } from '../../dev/demo-temporal.js';
import { sdkVersion } from '../../dev/dev-server.js';
import { resolveTemporalCli } from '../../dev/temporal-cli.js';
import { TEMPORAL_SERVER_VERSION, TEMPORAL_UI_VERSION } from '../../dev/temporal-versions.js';
import { demoEnv, pathWithout, pinnedBuildsCache, runDemo } from '../demo-run.js';
import { ROOT } from '../harness.js';

const scratch = mkdtempSync(join(tmpdir(), 'demo-temporal-e2e-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * A clean copy of this checkout: the files git tracks or would add, none that it ignores
 * (node_modules, build output), as a fresh clone has them. Copied from the working tree rather than
 * cloned from a commit, so that the change under test is what runs.
 */
function cleanCopy(): string {
  const dir = join(scratch, 'clone');
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  for (const file of listed.split('\0')) {
    // A file deleted in the working tree but not yet in the index is listed and absent.
    if (file && existsSync(join(ROOT, file))) cpSync(join(ROOT, file), join(dir, file));
  }
  return dir;
}

/** A directory holding only `temporal`, a link to `target`, to put first on PATH. */
function binWithTemporal(name: string, target: string): string {
  const dir = join(scratch, name);
  mkdirSync(dir);
  symlinkSync(target, join(dir, 'temporal'));
  return dir;
}

/** Resolves true when nothing accepts a TCP connection on `address` (host:port). */
function refused(address: string): Promise<boolean> {
  const [host, port] = address.split(':') as [string, string];
  return new Promise((resolve) => {
    const socket = connect(Number(port), host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });
}

test('with a temporal CLI on PATH and no Go, npm run demo -- --codec from a clean clone runs on the CLI dev server, its UI decoding through the codec server, builds nothing, and stops it', async (t) => {
  // The pinned CLI build of the tests (cached, or built now), whatever else this machine has.
  const cliEnv: NodeJS.ProcessEnv = { ...process.env, PATH: pathWithout(['temporal']) };
  delete cliEnv.TEMPORAL_CLI_PATH;
  const cli = await resolveTemporalCli(cliEnv, () => {});
  const clone = cleanCopy();
  const env = demoEnv({
    PATH: [binWithTemporal('cli-bin', cli.path), pathWithout(['go', 'temporal'])].join(delimiter),
    // An empty project cache: a fall-through to the build would need Go, which is not there, so the
    // demo could not finish on anything but the CLI.
    XDG_CACHE_HOME: join(scratch, 'empty-cache'),
    // npm ci reaches the registry; the demo does not get as far as a download.
    HTTPS_PROXY: undefined,
  });
  assert.equal(
    execFileSync('sh', ['-c', 'command -v go || true'], { env, encoding: 'utf8' }),
    '',
    'no go on PATH',
  );
  // While the job runs, what the CLI's UI says of its codec endpoint.
  const seen: { uiSettings?: Promise<{ Codec: { Endpoint: string } }> } = {};
  const onLine = (text: string) => {
    const ui = /watch it in the Temporal UI: (http:\/\/127\.0\.0\.1:\d+)\//.exec(text)?.[1];
    if (ui && seen.uiSettings === undefined) {
      seen.uiSettings = fetch(`${ui}/api/v1/settings`).then(
        (response) => response.json() as Promise<{ Codec: { Endpoint: string } }>,
      );
    }
  };
  const { code, out, ms } = await runDemo(['--codec'], { cwd: clone, env, timeoutMs: 300_000, onLine });
  t.diagnostic(`npm run demo from the clean copy, npm ci included: ${(ms / 1000).toFixed(1)} s`);
  assert.equal(code, 0, out);
  assert.match(out, /\[setup\] installing dependencies with npm ci/, 'the clone had no node_modules');
  assert.match(
    out,
    /starting the dev server of the Temporal CLI on PATH \(.*cli-bin\/temporal\), with its UI/,
  );
  assert.match(
    out,
    /versions: Temporal CLI 1\.5\.1 dev server on PATH \(Temporal Server \d+\.\d+\.\d+, Temporal UI \d+\.\d+\.\d+\), TypeScript SDK \d+\.\d+\.\d+, Node v24\./,
  );
  assert.match(out, /prLink: https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+/);
  const endpoint = /codec server on (http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]+), the UI decodes through it/.exec(
    out,
  )?.[1];
  assert.ok(endpoint && seen.uiSettings, out);
  assert.equal((await seen.uiSettings).Codec.Endpoint, endpoint, "the CLI's UI was given the codec server");
  assert.match(out, /workflow in the UI: http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\//);
  assert.doesNotMatch(
    out,
    /Temporal Server v\d|go install|fetching the Temporal CLI|building/i,
    'nothing built or fetched',
  );
  const address = /stopped the Temporal CLI's dev server on (127\.0\.0\.1:\d+)/.exec(out)?.[1];
  assert.ok(address, out);
  assert.ok(await refused(address), `nothing serves on ${address} once the demo has ended`);
});

test('an older CLI is named and passed over, the download is given up within its bound, and the demo builds from source as before', async () => {
  // A stand-in for an older installation: it answers `--version` in the CLI's format, as 1.4.0, and
  // does nothing else.
  const oldBin = join(scratch, 'old-cli', 'temporal');
  mkdirSync(join(scratch, 'old-cli'));
  writeFileSync(oldBin, '#!/bin/sh\necho "temporal version 1.4.0 (Server 1.28.0, UI 2.36.0)"\n', {
    mode: 0o755,
  });
  // A proxy that accepts and never answers: a network that drops everything, where the SDK's
  // download has no timeout of its own.
  const held: Socket[] = [];
  const blackhole = createServer((socket) => held.push(socket)).listen(0, '127.0.0.1');
  await new Promise((resolve) => blackhole.once('listening', resolve));
  const { port } = blackhole.address() as { port: number };
  // The demo must find the pinned builds in its cache, and must not build.
  const cacheHome = await pinnedBuildsCache();
  try {
    const { code, out, lines } = await runDemo([], {
      env: demoEnv({
        PATH: [join(scratch, 'old-cli'), pathWithout(['temporal'])].join(delimiter),
        HTTPS_PROXY: `http://127.0.0.1:${port}`,
        XDG_CACHE_HOME: cacheHome,
      }),
      timeoutMs: 180_000,
    });
    assert.equal(code, 0, out);
    assert.match(
      out,
      new RegExp(
        `the Temporal CLI on PATH \\(${oldBin}\\) is 1\\.4\\.0: upgrade it to ${OLDEST_CLI.replaceAll('.', '\\.')} or newer`,
      ),
    );
    const at = (pattern: RegExp) => lines.find((line) => pattern.test(line.text))?.at;
    const fetching = at(/fetching the Temporal CLI's dev server the SDK's way/);
    const gaveUp = at(/gave up on the download after \d+ s/);
    assert.ok(fetching !== undefined && gaveUp !== undefined, out);
    const waited = gaveUp - fetching;
    assert.ok(
      waited >= DOWNLOAD_STALL_MS && waited < DOWNLOAD_STALL_MS + 5_000,
      `gave up ${waited} ms after it began (bound ${DOWNLOAD_STALL_MS} ms)`,
    );
    assert.ok(held.length > 0, 'the download went to the network (through the proxy)');
    assert.match(out, new RegExp(`using cached Temporal Server v${TEMPORAL_SERVER_VERSION}`));
    assert.match(out, new RegExp(`using cached Temporal UI server v${TEMPORAL_UI_VERSION}`));
    assert.doesNotMatch(out, /still building|go: downloading/);
    assert.match(
      out,
      new RegExp(`versions: Temporal Server ${TEMPORAL_SERVER_VERSION.replaceAll('.', '\\.')}, Temporal UI`),
    );
    assert.match(out, /prLink: https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+/);
    assert.match(out, /stopped Temporal Server pid \d+/);
  } finally {
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => blackhole.close(resolve));
  }
});

test("a CLI the SDK downloaded before is started from the SDK's cache, with no network", async () => {
  // The tests' CLI build placed where, and under the name which, the SDK keeps its download: the
  // SDK then starts it without asking the network (which the default demo env refuses).
  const cli = await resolveTemporalCli(process.env, () => {});
  const cacheHome = join(scratch, 'download-cache');
  const downloads = join(cacheHome, 'agent-job-orchestrator', 'temporal-cli-download');
  mkdirSync(downloads, { recursive: true });
  symlinkSync(cli.path, join(downloads, `temporal-sdk-typescript-${sdkVersion()}`));
  const { code, out } = await runDemo([], { env: demoEnv({ XDG_CACHE_HOME: cacheHome }) });
  assert.equal(code, 0, out);
  assert.match(out, /starting the dev server of the Temporal CLI the SDK downloaded before/);
  assert.match(
    out,
    /versions: Temporal CLI \d+\.\d+\.\d+ dev server downloaded by the SDK \(Temporal Server /,
  );
  assert.match(out, /prLink: https:\/\/github\.com\//);
  assert.doesNotMatch(out, /Temporal Server v\d|building/);
  assert.match(out, /stopped the Temporal CLI's dev server on 127\.0\.0\.1:\d+/);
});
