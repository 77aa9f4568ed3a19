/**
 * Finds the Temporal CLI, which the project uses as a client only: the tests of the commands the
 * docs give (`temporal workflow execute`, `temporal workflow reset`), deploy/compose/temporal-init.sh
 * (which the admin-tools image runs with it) and the versioned rollout of `npm run test:cluster`.
 * The server of the tests and the benchmark is Temporal Server itself (dev/dev-server.ts), not
 * this CLI's dev server; the demo runs the dev server of a CLI of the user's own on PATH when there is
 * one (dev/demo-temporal.ts). This machine reaches package registries only, so
 * the CLI is built from source through the Go module proxy once and cached for every clone.
 *
 * Order: $TEMPORAL_CLI_PATH, `temporal` on PATH, the cached build, a fresh `go install`.
 *
 * Run directly (`npm run temporal:cli`) to resolve, build if needed, and print the binary's path.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  cacheDir,
  findOnPath,
  goInstall,
  GoBuildError,
  isExecutable,
  versionOf,
  type Log,
} from './go-install.js';
import { TEMPORAL_CLI_VERSION } from './temporal-versions.js';

export { findOnPath, TEMPORAL_CLI_VERSION };
const CLI_MODULE = 'github.com/temporalio/cli/cmd/temporal';

/** Where the CLI came from, as printed in logs. */
export type CliSource = 'TEMPORAL_CLI_PATH' | 'PATH' | 'cache' | 'go-build';

/** A CLI binary found on this machine. */
export interface FoundCli {
  source: CliSource;
  path: string;
}

/** Raised when no CLI can be found or built; its message is the one line a person needs. */
export class TemporalCliUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TemporalCliUnavailableError';
  }
}

/** The cache directory shared by every clone of this project on the machine. */
export function cliCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return cacheDir(`temporal-cli-${TEMPORAL_CLI_VERSION}`, env);
}

/** Resolves the CLI without building anything. Returns null when a build is needed. */
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

/** Resolves the CLI in the documented order, building it when needed, and prints which one it uses. */
export async function resolveTemporalCli(
  env: NodeJS.ProcessEnv = process.env,
  log: Log = defaultLog,
): Promise<FoundCli> {
  const found = findTemporalCli(env);
  if (found) {
    log(`using Temporal CLI from ${found.source}: ${found.path} (${versionOf(found.path)})`);
    return found;
  }
  const target = cliCacheDir(env);
  try {
    await goInstall(
      {
        what: `Temporal CLI v${TEMPORAL_CLI_VERSION}`,
        target,
        packages: [`${CLI_MODULE}@v${TEMPORAL_CLI_VERSION}`],
        binaries: { temporal: 'temporal' },
      },
      env,
      log,
    );
  } catch (err) {
    if (err instanceof GoBuildError) throw new TemporalCliUnavailableError(err.message, { cause: err });
    throw err;
  }
  const path = join(target, 'temporal');
  log(`using Temporal CLI from go-build: ${path} (${versionOf(path)})`);
  return { source: 'go-build', path };
}

function defaultLog(line: string): void {
  process.stderr.write(`[temporal-cli] ${line}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  resolveTemporalCli()
    .then((cli) => {
      process.stdout.write(`${cli.path}\n`);
    })
    .catch((err: unknown) => {
      process.stderr.write(`[temporal-cli] ${err instanceof Error ? err.message : String(err)}\n`);
      process.stderr.write(
        '[temporal-cli] install the Temporal CLI (https://docs.temporal.io/cli) or Go 1.21+ (which fetches the Go release it needs from the module proxy), or set TEMPORAL_CLI_PATH\n',
      );
      process.exit(1);
    });
}
