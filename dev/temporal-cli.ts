/**
 * Finds the Temporal CLI, whose `server start-dev` is the real Temporal server that the tests, the
 * demo and the benchmark run against. This machine reaches package registries only, so the SDK's
 * own download of the CLI may fail here; the Go module proxy is reachable, so the CLI is built from
 * source once and cached for every clone.
 *
 * Order: $TEMPORAL_CLI_PATH, `temporal` on PATH, the cached build, a fresh `go install`, and last
 * the SDK's download (reported as `sdk-download`: callers then let @temporalio/testing fetch it).
 *
 * Run directly (`npm run temporal:cli`) to resolve, build if needed, and print the binary's path.
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { goBuildEnv, TEMPORAL_CLI_VERSION } from './temporal-versions.js';

export { TEMPORAL_CLI_VERSION };
const CLI_MODULE = 'github.com/temporalio/cli/cmd/temporal';

/** Where the CLI came from, as printed in logs. */
export type CliSource = 'TEMPORAL_CLI_PATH' | 'PATH' | 'cache' | 'go-build' | 'sdk-download';

/** A CLI binary found on this machine. */
export interface FoundCli {
  source: Exclude<CliSource, 'sdk-download'>;
  path: string;
}

/** The resolver's answer. `path` is null only for `sdk-download`. */
export type ResolvedCli = FoundCli | { source: 'sdk-download'; path: null };

/** Raised when no CLI can be found or built; its message is the one line a person needs. */
export class TemporalCliUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TemporalCliUnavailableError';
  }
}

/** The cache directory shared by every clone of this project on the machine. */
export function cliCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'agent-job-orchestrator', `temporal-cli-${TEMPORAL_CLI_VERSION}`);
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The executable `name` in a directory of PATH, or null. */
export function findOnPath(name: string, env: NodeJS.ProcessEnv = process.env): string | null {
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return null;
}

/** Resolves the CLI without building anything. Returns null when a build or download is needed. */
export function findTemporalCli(env: NodeJS.ProcessEnv = process.env): FoundCli | null {
  const fromEnv = env.TEMPORAL_CLI_PATH;
  if (fromEnv) {
    if (!isExecutable(fromEnv)) {
      throw new TemporalCliUnavailableError(
        `TEMPORAL_CLI_PATH=${fromEnv} is not an executable file; fix or unset it.`,
      );
    }
    return { source: 'TEMPORAL_CLI_PATH', path: fromEnv };
  }
  const onPath = findOnPath('temporal', env);
  if (onPath) return { source: 'PATH', path: onPath };
  const cached = join(cliCacheDir(env), 'temporal');
  if (isExecutable(cached)) return { source: 'cache', path: cached };
  return null;
}

/**
 * Builds the CLI with `go install` into the cache directory. The build goes to a private
 * directory first and is renamed into place, so two clones building at once never see half a file.
 */
export async function buildTemporalCli(
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = defaultLog,
): Promise<string> {
  const go = findOnPath('go', env);
  if (!go) throw new TemporalCliUnavailableError('no Go toolchain on PATH to build the Temporal CLI');
  const target = cliCacheDir(env);
  mkdirSync(target, { recursive: true });
  const scratch = mkdtempSync(join(target, '.build-'));
  log(
    `building Temporal CLI v${TEMPORAL_CLI_VERSION} with ${go} into ${target} (the first build takes several minutes)`,
  );
  const started = Date.now();
  const ticker = setInterval(
    () => log(`still building the Temporal CLI (${Math.round((Date.now() - started) / 1000)}s)`),
    20_000,
  );
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(go, ['install', `${CLI_MODULE}@v${TEMPORAL_CLI_VERSION}`], {
        env: goBuildEnv(env, scratch),
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      child.on('error', reject);
      child.on('exit', resolve);
    });
    if (code !== 0) {
      throw new TemporalCliUnavailableError(
        `go install ${CLI_MODULE}@v${TEMPORAL_CLI_VERSION} exited with code ${code}`,
      );
    }
    const built = join(target, 'temporal');
    renameSync(join(scratch, 'temporal'), built);
    log(`built Temporal CLI in ${Math.round((Date.now() - started) / 1000)}s: ${built}`);
    return built;
  } finally {
    clearInterval(ticker);
    rmSync(scratch, { recursive: true, force: true });
  }
}

/**
 * Resolves the CLI in the documented order, building it when needed, and prints which one it uses.
 * Falls back to `sdk-download` only when there is no Go toolchain; a failed Go build is an error,
 * because on this kind of machine the SDK's download cannot work either.
 */
export async function resolveTemporalCli(
  env: NodeJS.ProcessEnv = process.env,
  log: (line: string) => void = defaultLog,
): Promise<ResolvedCli> {
  const found = findTemporalCli(env);
  if (found) {
    log(`using Temporal CLI from ${found.source}: ${found.path} (${cliVersion(found.path)})`);
    return found;
  }
  if (findOnPath('go', env)) {
    const path = await buildTemporalCli(env, log);
    log(`using Temporal CLI from go-build: ${path} (${cliVersion(path)})`);
    return { source: 'go-build', path };
  }
  log(
    'no Temporal CLI found and no Go toolchain: falling back to the SDK download of the CLI (needs internet)',
  );
  return { source: 'sdk-download', path: null };
}

function cliVersion(path: string): string {
  const out = spawnSync(path, ['--version'], { encoding: 'utf8' });
  return out.status === 0 ? out.stdout.trim() : 'version unknown';
}

function defaultLog(line: string): void {
  process.stderr.write(`[temporal-cli] ${line}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  resolveTemporalCli()
    .then((cli) => {
      process.stdout.write(`${cli.path ?? 'sdk-download'}\n`);
    })
    .catch((err: unknown) => {
      process.stderr.write(`[temporal-cli] ${err instanceof Error ? err.message : String(err)}\n`);
      process.stderr.write(
        '[temporal-cli] install the Temporal CLI (https://docs.temporal.io/cli) or Go 1.21+ (which fetches the Go release it needs from the module proxy), or set TEMPORAL_CLI_PATH\n',
      );
      process.exit(1);
    });
}
