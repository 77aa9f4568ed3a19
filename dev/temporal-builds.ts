/**
 * The Temporal releases this repository runs, built from source through the Go module proxy and
 * cached per machine (dev/go-install.ts): Temporal Server with its SQL tool and PostgreSQL schema
 * (the dev server of the tests, the demo and the benchmark, and `npm run test:cluster`), and the
 * Temporal UI server (the demo's UI). The CLI has its own resolver (dev/temporal-cli.ts).
 *
 * Run directly to build what is named, side by side, and print the paths:
 * `npx tsx dev/temporal-builds.ts [server] [ui] [cli]` (all three by default).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { allSettledOrThrow, cacheDir, goInstall, isExecutable, type Log } from './go-install.js';
import { resolveTemporalCli } from './temporal-cli.js';
import { TEMPORAL_SERVER_VERSION, TEMPORAL_UI_VERSION } from './temporal-versions.js';

export { TEMPORAL_SERVER_VERSION, TEMPORAL_UI_VERSION };
const SERVER_MODULE = 'go.temporal.io/server';
/** The Go module of the Temporal UI server, whose binary embeds the UI's built assets. */
const UI_MODULE = 'github.com/temporalio/ui-server/v2';

/** The built server: its binaries and the PostgreSQL schema files of the same release. */
export interface TemporalServerBuild {
  server: string;
  sqlTool: string;
  /** `schema/postgresql/v12` of the release, the directory the admin-tools image ships. */
  postgresSchemaDir: string;
}

/** The cache directory of the server build, shared by every clone on the machine. */
export function serverCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return cacheDir(`temporal-server-${TEMPORAL_SERVER_VERSION}`, env);
}

function serverBuildIn(dir: string): TemporalServerBuild {
  return {
    server: join(dir, 'temporal-server'),
    sqlTool: join(dir, 'temporal-sql-tool'),
    postgresSchemaDir: join(dir, 'schema', 'postgresql', 'v12'),
  };
}

/**
 * The cached server build, or a fresh `go install` of the server command and the SQL tool (a few
 * minutes the first time), with the release's PostgreSQL schema files copied from the module
 * cache beside them. One build serves the dev server and the cluster.
 */
export async function resolveTemporalServer(
  env: NodeJS.ProcessEnv = process.env,
  log: Log = defaultLog,
): Promise<TemporalServerBuild> {
  const target = serverCacheDir(env);
  const build = serverBuildIn(target);
  if (isExecutable(build.server) && isExecutable(build.sqlTool) && existsSync(build.postgresSchemaDir)) {
    log(`using cached Temporal Server v${TEMPORAL_SERVER_VERSION}: ${target}`);
    return build;
  }
  const version = `@v${TEMPORAL_SERVER_VERSION}`;
  await goInstall(
    {
      what: `Temporal Server v${TEMPORAL_SERVER_VERSION} and its SQL tool`,
      target,
      packages: [`${SERVER_MODULE}/cmd/server${version}`, `${SERVER_MODULE}/cmd/tools/sql${version}`],
      binaries: { server: 'temporal-server', sql: 'temporal-sql-tool' },
      // The module cache holds the release's schema files: the ones the admin-tools image ships.
      addFiles: (dir, modCache) =>
        cpSync(
          join(modCache, `${SERVER_MODULE}${version}`, 'schema', 'postgresql', 'v12'),
          serverBuildIn(dir).postgresSchemaDir,
          { recursive: true },
        ),
    },
    env,
    log,
  );
  return build;
}

/** The cache directory of the UI server build. */
export function uiCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return cacheDir(`temporal-ui-server-${TEMPORAL_UI_VERSION}`, env);
}

/**
 * The cached Temporal UI server, or a fresh `go install` of it at the compose file's UI release
 * (a minute or two the first time): the same UI the `temporalio/ui` image serves, with its assets
 * embedded in the binary.
 */
export async function resolveTemporalUi(
  env: NodeJS.ProcessEnv = process.env,
  log: Log = defaultLog,
): Promise<string> {
  const target = uiCacheDir(env);
  const binary = join(target, 'ui-server');
  if (isExecutable(binary)) {
    log(`using cached Temporal UI server v${TEMPORAL_UI_VERSION}: ${target}`);
    return binary;
  }
  await goInstall(
    {
      what: `Temporal UI server v${TEMPORAL_UI_VERSION}`,
      target,
      packages: [`${UI_MODULE}/cmd/server@v${TEMPORAL_UI_VERSION}`],
      binaries: { server: 'ui-server' },
    },
    env,
    log,
  );
  return binary;
}

/**
 * The server's own check of a dynamic config file: its output when it finds a problem, else null.
 * The server logs an unknown key or a value of the wrong type as a warning and runs on without it,
 * so a warning counts as a problem here.
 */
export function dynamicConfigProblems(server: string, file: string): string | null {
  const result = spawnSync(server, ['validate-dynamic-config', file], { encoding: 'utf8' });
  const output = `${result.stdout}${result.stderr}`;
  return result.status !== 0 || /warning|error/i.test(output) ? output : null;
}

function defaultLog(line: string): void {
  process.stderr.write(`[temporal-builds] ${line}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const named = process.argv.slice(2);
  const known = ['server', 'ui', 'cli'];
  const unknown = named.filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    process.stderr.write(`[temporal-builds] unknown: ${unknown.join(' ')} (known: ${known.join(' ')})\n`);
    process.exit(2);
  }
  const wanted = new Set(named.length > 0 ? named : known);
  // Side by side: two builds overlap their downloads with each other's compiling.
  allSettledOrThrow([
    wanted.has('server') ? resolveTemporalServer().then((build) => build.server) : Promise.resolve(null),
    wanted.has('ui') ? resolveTemporalUi() : Promise.resolve(null),
    wanted.has('cli') ? resolveTemporalCli().then((cli) => cli.path) : Promise.resolve(null),
  ])
    .then((paths) => {
      for (const path of paths) if (path) process.stdout.write(`${path}\n`);
    })
    .catch((err: unknown) => {
      process.stderr.write(`[temporal-builds] ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    });
}
