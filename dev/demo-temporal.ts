/**
 * The Temporal server of `npm run demo`: the one a newcomer already has, tried in this order
 * (docs/decisions/0013-one-temporal-release-everywhere.md, as amended for the demo):
 *
 * 1. TEMPORAL_ADDRESS: the server the user named. Never one merely found listening: a
 *    port-forward to a shared cluster looks the same as a dev server on 7233.
 * 2. A `temporal` CLI on PATH, {@link OLDEST_CLI} or newer: its `temporal server start-dev`, which
 *    serves the UI itself. An older one is named with the release to upgrade to, and skipped.
 * 3. The SDK's own download of that CLI (`TestWorkflowEnvironment.createLocal()`), where the network
 *    allows, given up when it stops making progress ({@link DOWNLOAD_STALL_MS}).
 * 4. The build from source of the pinned release (dev/dev-server.ts), as CI and a machine that
 *    reaches no download site run it.
 *
 * `npm test` and the benchmark never come here: they run the pinned release only.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { TestWorkflowEnvironment, type EphemeralServerExecutable } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { ALL_SEARCH_ATTRIBUTES } from '../src/contract.js';
import { freePort, sdkVersion, startDevServer } from './dev-server.js';
import { cacheDir, findOnPath, versionOf } from './go-install.js';

/**
 * The oldest CLI whose dev server the demo starts: its Server (1.29.1) takes the project quota's
 * update-with-start, with which a job takes its place in the project's budget.
 */
export const OLDEST_CLI = '1.5.1';

/**
 * How long the SDK's download may go without receiving anything before the demo gives up on it and
 * builds from source. The SDK sets no timeout of its own, so a network that drops packets would
 * otherwise hang the demo; a slow network that keeps delivering is waited for, since a bound on the
 * whole download would abandon a working one. 20 s covers a name lookup, a TLS handshake and the
 * download service's answer on a poor link, and costs little against the build's minutes.
 */
export const DOWNLOAD_STALL_MS = 20_000;

/**
 * Features of the demo that a dev server older than the pinned release may lack, with the Server
 * release that has them on by default (read in each release's common/dynamicconfig/constants.go).
 */
const NEWER_SERVER_FEATURES = [
  {
    since: '1.31.0',
    missing:
      'task-queue priority is off (its matcher is on by default from Server 1.31), so the project ' +
      "quota's grants and interactive jobs are not served ahead of other tasks",
  },
];

/** The server the demo uses, and how to stop it. */
export interface DemoTemporal {
  address: string;
  uiUrl: string | null;
  /** The server and UI with their releases, for the versions line; null for one the user named. */
  described: string | null;
  stop(): Promise<void>;
}

/** Options of {@link startDemoTemporal}. */
export interface DemoTemporalOptions {
  /** The codec server's URL, given to the UI as its codec endpoint. */
  codecEndpoint?: string;
  log: (line: string) => void;
}

/** Finds or starts the demo's server, in the order of this module's comment. */
export async function startDemoTemporal(options: DemoTemporalOptions): Promise<DemoTemporal> {
  const named = process.env.TEMPORAL_ADDRESS;
  if (named) {
    options.log(`using the Temporal server at ${named} (TEMPORAL_ADDRESS)`);
    return {
      address: named,
      uiUrl: process.env.TEMPORAL_UI_URL ?? null,
      described: null,
      stop: async () => {},
    };
  }
  // The CLI's dev server runs as a child of the SDK's runtime. Without signal handlers of the
  // runtime's own: a Ctrl-C must end the demo as before, and --keep handles its own.
  Runtime.install({ shutdownSignals: [], logger: new DefaultLogger('ERROR') });
  return (await fromCliOnPath(options)) ?? (await fromDownload(options)) ?? (await fromBuild(options));
}

async function fromCliOnPath(options: DemoTemporalOptions): Promise<DemoTemporal | null> {
  const cli = findOnPath('temporal');
  if (cli === null) return null;
  const { release } = cliReleases(cli);
  if (isOlder(release, OLDEST_CLI)) {
    options.log(
      `the Temporal CLI on PATH (${cli}) is ${release}: upgrade it to ${OLDEST_CLI} or newer ` +
        '(https://docs.temporal.io/cli) for the demo to use it; trying the next way',
    );
    return null;
  }
  options.log(`starting the dev server of the Temporal CLI on PATH (${cli}), with its UI`);
  try {
    const started = await startCliServer({ type: 'existing-path', path: cli }, cli, 'on PATH', options);
    sayWhatIsMissing(started.serverVersion, options.log);
    return started;
  } catch (err) {
    options.log(`the CLI's dev server did not start (${(err as Error).message}); trying the next way`);
    return null;
  }
}

async function fromDownload(options: DemoTemporalOptions): Promise<DemoTemporal | null> {
  const dir = cacheDir('temporal-cli-download');
  mkdirSync(dir, { recursive: true });
  // The SDK's name for its download (core-bridge's ephemeral_server): the CLI release it asks for
  // is the one paired with this SDK release (our @temporalio packages are pinned together).
  const binary = join(dir, `temporal-sdk-typescript-${sdkVersion()}`);
  options.log(
    existsSync(binary)
      ? `starting the dev server of the Temporal CLI the SDK downloaded before (${binary}), with its UI`
      : `fetching the Temporal CLI's dev server the SDK's way into ${dir} ` +
          `(given up after ${DOWNLOAD_STALL_MS / 1000} s without progress)`,
  );
  const started = Date.now();
  const starting = startCliServer(
    // The name carries the SDK release, which fixes the CLI release: the SDK's one-day expiry would
    // only make an offline laptop lose a working copy.
    { type: 'cached-download', downloadDir: dir, ttl: '365 days' },
    binary,
    'downloaded by the SDK',
    options,
  );
  try {
    // The SDK downloads into `<binary>.downloading` and renames it when complete.
    const outcome = await unlessStalled(starting, `${binary}.downloading`, DOWNLOAD_STALL_MS);
    if (outcome !== 'stalled') {
      sayWhatIsMissing(outcome.serverVersion, options.log);
      return outcome;
    }
    options.log(
      `gave up on the download after ${Math.round((Date.now() - started) / 1000)} s, ` +
        `${DOWNLOAD_STALL_MS / 1000} s of them without progress; building from source instead`,
    );
    // Should it finish after all, its server is stopped rather than left behind.
    void starting.then(
      (late) => late.stop(),
      (err: unknown) => options.log(`the download given up on ended: ${(err as Error).message}`),
    );
  } catch (err) {
    // The SDK's message repeats the URL at each layer of its HTTP client; the line names the site once.
    const reason = (err as Error).message.replace(/error sending request for url \([^)]*\): /g, '');
    options.log(`the download from temporal.download failed (${reason}); building from source instead`);
  }
  return null;
}

async function fromBuild(options: DemoTemporalOptions): Promise<DemoTemporal> {
  options.log(
    'starting a local Temporal server with the UI (the first run on a machine builds Temporal Server and the UI server, which takes minutes)',
  );
  const server = await startDevServer({ ui: true, uiCodecEndpoint: options.codecEndpoint, log: options.log });
  return {
    address: server.address,
    uiUrl: server.uiUrl,
    described: `Temporal Server ${server.version}, Temporal UI ${server.uiVersion ?? '(none)'}`,
    stop: () => server.stop(),
  };
}

/**
 * Starts `temporal server start-dev` through the SDK (which registers the search attributes and
 * waits until it serves), with the UI on a free port and the codec endpoint. Resolves with the
 * Server release it runs too.
 */
async function startCliServer(
  executable: EphemeralServerExecutable,
  binary: string,
  origin: string,
  options: DemoTemporalOptions,
): Promise<DemoTemporal & { serverVersion: string }> {
  const uiPort = await freePort();
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable,
      uiPort,
      searchAttributes: ALL_SEARCH_ATTRIBUTES,
      // Its log on the demo's terminal: errors only.
      log: { format: 'json', level: 'error' },
      extraArgs: options.codecEndpoint ? ['--ui-codec-endpoint', options.codecEndpoint] : [],
    },
  });
  const stop = async () => {
    await env.teardown();
    options.log(`stopped the Temporal CLI's dev server on ${env.address}`);
  };
  try {
    const { serverVersion = 'version unknown' } = await env.connection.workflowService.getSystemInfo({});
    const releases = cliReleases(binary);
    return {
      address: env.address,
      uiUrl: `http://127.0.0.1:${uiPort}`,
      described: `Temporal CLI ${releases.release} dev server ${origin} (Temporal Server ${serverVersion}, Temporal UI ${releases.ui})`,
      serverVersion,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** One line, when the server is older than some of what the demo shows: what is missing. */
function sayWhatIsMissing(serverVersion: string, log: (line: string) => void): void {
  const missing = NEWER_SERVER_FEATURES.filter((feature) => isOlder(serverVersion, feature.since));
  if (missing.length === 0) return;
  log(
    `this dev server runs Temporal Server ${serverVersion}, older than the release the project is tested on: ` +
      missing.map((feature) => feature.missing).join('; '),
  );
}

/**
 * Resolves with what `work` resolves with, or with 'stalled' once `partial` (the file a download
 * writes to) has neither appeared nor grown for `stallMs`.
 */
async function unlessStalled<T>(work: Promise<T>, partial: string, stallMs: number): Promise<T | 'stalled'> {
  let watch: NodeJS.Timeout | undefined;
  const stalled = new Promise<'stalled'>((resolve) => {
    let size = -1;
    let progressAt = Date.now();
    watch = setInterval(() => {
      const now = statSync(partial, { throwIfNoEntry: false })?.size ?? -1;
      if (now !== size) {
        size = now;
        progressAt = Date.now();
      } else if (Date.now() - progressAt >= stallMs) {
        resolve('stalled');
      }
    }, 500);
  });
  try {
    return await Promise.race([work, stalled]);
  } finally {
    clearInterval(watch);
  }
}

/** The line of the module information a Go build records in its binary (`go version -m` prints it). */
const GO_MODULE_LINE = '\nmod\tgithub.com/temporalio/cli\tv';

/**
 * A CLI's own release and the UI it embeds, from `temporal --version`
 * ("temporal version 1.5.1 (Server 1.29.1, UI 2.42.1)"). A build from source without the release's
 * link flags says 0.0.0-DEV; its release is then the module version Go records in the binary.
 */
export function cliReleases(binary: string): { release: string; ui: string } {
  const said = versionOf(binary);
  const ui = /UI (\S+?)\)/.exec(said)?.[1] ?? 'version unknown';
  const release = /^temporal version (\S+)/.exec(said)?.[1] ?? 'version unknown';
  if (release !== '0.0.0-DEV') return { release, ui };
  const bytes = readFileSync(binary);
  const at = bytes.indexOf(GO_MODULE_LINE);
  const recorded =
    at < 0 ? null : /^[^\t]+\t[^\t]+\tv([^\t\n]+)/.exec(bytes.toString('latin1', at + 1, at + 80));
  return { release: recorded?.[1] ?? release, ui };
}

/** Whether release `a` is older than `b`; one that cannot be read counts as older. */
export function isOlder(a: string, b: string): boolean {
  if (!/^\d+\.\d+\.\d+/.test(a)) return true;
  return a.localeCompare(b, 'en', { numeric: true }) < 0;
}
