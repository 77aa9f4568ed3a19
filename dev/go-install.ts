/**
 * One cached `go install` of a Temporal release, shared by every clone on the machine: the Temporal
 * Server, the UI server and the CLI are each built once from the Go module proxy (the only place
 * this kind of machine can get them) and kept under ~/.cache/agent-job-orchestrator/ (or
 * $XDG_CACHE_HOME). Builds run with the toolchain dev/temporal-versions.ts names.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { GO_TOOLCHAIN, goBuildEnv } from './temporal-versions.js';

/** Where a build's progress goes. */
export type Log = (line: string) => void;

/** Raised when a build cannot run or fails; the message is the one line a person needs. */
export class GoBuildError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'GoBuildError';
  }
}

/** The cache directory `name` of this project, shared by every clone on the machine. */
export function cacheDir(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'agent-job-orchestrator', name);
}

/** Whether `path` is a file this process may execute. */
export function isExecutable(path: string): boolean {
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

/** What to build and where it goes. */
export interface GoInstall {
  /** What is built, for the log: "Temporal Server v1.32.2 and its SQL tool". */
  what: string;
  /** The cache directory the build is renamed to, whole, once it is complete. */
  target: string;
  /** The `go install` arguments, each `package@version` of one module. */
  packages: string[];
  /** The binaries `go install` writes (named after their package) and their names in the target. */
  binaries: Record<string, string>;
  /** Adds files from the module cache (`modCache`) to the build directory before it is renamed. */
  addFiles?: (buildDir: string, modCache: string) => void;
}

/**
 * Builds `build` with `go install` into a private directory and renames it into place whole, so a
 * clone building at the same time never sees half a build; when another one finishes first, its
 * build (the same release) is kept. Resolves once `build.target` is complete.
 */
export async function goInstall(
  build: GoInstall,
  env: NodeJS.ProcessEnv = process.env,
  log: Log = () => {},
): Promise<void> {
  const go = findOnPath('go', env);
  if (!go) {
    throw new GoBuildError(
      `no Go toolchain on PATH to build ${build.what}: install Go 1.21 or newer (the build runs ${GO_TOOLCHAIN}, which the go command fetches from the module proxy)`,
    );
  }
  const parent = join(build.target, '..');
  mkdirSync(parent, { recursive: true });
  const scratch = mkdtempSync(join(parent, '.build-'));
  log(`building ${build.what} with ${go} and ${GO_TOOLCHAIN} (first time only; minutes)`);
  const started = Date.now();
  const ticker = setInterval(
    () => log(`still building ${build.what} (${Math.round((Date.now() - started) / 1000)}s)`),
    30_000,
  );
  try {
    const bin = join(scratch, 'bin');
    const buildEnv = goBuildEnv(env, bin);
    const code = await exitCode(
      spawn(go, ['install', ...build.packages], { env: buildEnv, stdio: ['ignore', 'inherit', 'inherit'] }),
    );
    if (code !== 0) throw new GoBuildError(`go install ${build.packages.join(' ')} exited with ${code}`);
    const out = join(scratch, 'out');
    mkdirSync(out);
    for (const [from, to] of Object.entries(build.binaries)) renameSync(join(bin, from), join(out, to));
    if (build.addFiles) {
      const modCache = spawnSync(go, ['env', 'GOMODCACHE'], {
        encoding: 'utf8',
        env: buildEnv,
      }).stdout.trim();
      build.addFiles(out, modCache);
      // Module cache files are read-only; the copies must stay removable with the cache.
      makeWritable(out);
    }
    try {
      renameSync(out, build.target);
    } catch (err) {
      // Another clone finished first; its build is the same release.
      if (!existsSync(build.target)) throw err;
    }
    log(`built ${build.what} in ${Math.round((Date.now() - started) / 1000)}s: ${build.target}`);
  } finally {
    clearInterval(ticker);
    makeWritable(scratch);
    rmSync(scratch, { recursive: true, force: true });
  }
}

function makeWritable(path: string): void {
  if (!existsSync(path)) return;
  chmodSync(path, 0o755);
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const child = join(path, entry.name);
    if (entry.isDirectory()) makeWritable(child);
    else chmodSync(child, 0o644 | (isExecutable(child) ? 0o111 : 0));
  }
}

/**
 * Waits for every promise, then resolves with their values or rejects with the first failure: a
 * build side by side with one that failed still runs to its end, so no `go install` outlives the
 * process that started it.
 */
export async function allSettledOrThrow<T extends readonly unknown[]>(
  promises: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T> {
  const results = await Promise.allSettled(promises as readonly Promise<unknown>[]);
  const values: unknown[] = [];
  for (const result of results) {
    if (result.status === 'rejected') throw result.reason;
    values.push(result.value);
  }
  return values as unknown as T;
}

/** What a binary says of its own version (`--version`), or 'version unknown'. */
export function versionOf(binary: string): string {
  const out = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  return out.status === 0 ? out.stdout.trim() : 'version unknown';
}

/** Resolves with a child's exit code, or its signal's name. */
export function exitCode(child: ChildProcess): Promise<number | string> {
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
  });
}
