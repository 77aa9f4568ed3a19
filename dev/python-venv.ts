/**
 * The Python caller's virtual environment (examples/python-caller/): the machine's `python3` with
 * the example's requirements installed from PyPI with `pip --require-hashes`, made once per
 * requirements and interpreter and kept under ~/.cache/agent-job-orchestrator/ (or
 * $XDG_CACHE_HOME), like the Temporal builds. The tests that run Python use it.
 *
 * `python3 -m venv` needs Debian's python3-venv (ensurepip) on Debian's own Python:
 * dev/ensure-installed.mjs installs it for `npm test`; without it this module says so.
 *
 * Run directly to make it (or find it) and print its interpreter: `npx tsx dev/python-venv.ts`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { cacheDir, findOnPath, type Log } from './go-install.js';

/** The example's directory: its package, requirements and tool settings. */
export const PYTHON_CALLER_DIR = fileURLToPath(new URL('../examples/python-caller/', import.meta.url));

/** The requirement files installed, in this order: the package's, then its lint tool's. */
const REQUIREMENTS = ['requirements.txt', 'requirements-dev.txt'];

/** The example's floor: `typing.NotRequired` (temporalio's own is 3.10). The lock was compiled on 3.11. */
const MIN_PYTHON: readonly [number, number] = [3, 11];

/** A file written last into a complete venv: a venv without it was left half-made. */
const COMPLETE = '.agent-job-orchestrator-complete';

/** The venv made for the example. */
export interface PythonVenv {
  /** The venv's interpreter: run everything as `<python> -m <module>` (see {@link resolvePythonVenv}). */
  python: string;
  dir: string;
}

/** Raised when the venv cannot be made; the message is the one line a person needs. */
export class PythonVenvError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PythonVenvError';
  }
}

/**
 * The venv for the example's requirements, made now when this machine has none for them (a pip
 * install of wheels: seconds with a warm pip cache, longer cold). It is made in a private directory
 * and renamed into place whole, so two test files making it at once never see half of one; the
 * renamed venv's `bin/python` still finds its packages (Python locates a venv from `pyvenv.cfg`
 * beside its own path), but its console scripts keep the old path in their first line, so tools
 * are run as `python -m`.
 */
export async function resolvePythonVenv(
  env: NodeJS.ProcessEnv = process.env,
  log: Log = defaultLog,
): Promise<PythonVenv> {
  const base = basePython(env);
  const digest = createHash('sha256');
  for (const file of REQUIREMENTS) digest.update(readFileSync(join(PYTHON_CALLER_DIR, file)));
  digest.update(`${base.path}\n${base.version}`);
  const dir = cacheDir(`python-caller-venv-${digest.digest('hex').slice(0, 12)}`, env);
  const venv = { dir, python: join(dir, 'bin', 'python') };
  if (existsSync(join(dir, COMPLETE))) return venv;

  const parent = join(dir, '..');
  mkdirSync(parent, { recursive: true });
  const scratch = mkdtempSync(join(parent, '.python-venv-'));
  const started = Date.now();
  log(`making the Python caller's venv with ${base.path} (Python ${base.version}; first time only)`);
  try {
    const made = join(scratch, 'venv');
    const venvRun = spawnSync(base.path, ['-m', 'venv', made], { encoding: 'utf8', env });
    if (venvRun.status !== 0) {
      throw new PythonVenvError(
        `${base.path} -m venv failed (on Debian: apt-get install python3-venv): ${venvRun.stderr.trim()}`,
      );
    }
    const pip = [
      '-m',
      'pip',
      'install',
      '--quiet',
      '--require-hashes',
      '--no-input',
      '--disable-pip-version-check',
      ...REQUIREMENTS.flatMap((file) => ['-r', join(PYTHON_CALLER_DIR, file)]),
    ];
    const code = await exitCode(join(made, 'bin', 'python'), pip, env);
    if (code !== 0)
      throw new PythonVenvError(`pip install of the Python caller's requirements exited with ${code}`);
    writeFileSync(join(made, COMPLETE), `${new Date().toISOString()}\n`);
    try {
      renameSync(made, dir);
    } catch (err) {
      // Another test file finished first: its venv holds the same requirements.
      if (!existsSync(join(dir, COMPLETE))) throw err;
    }
    log(`made the Python caller's venv in ${Math.round((Date.now() - started) / 1000)}s: ${dir}`);
    return venv;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The machine's `python3`: its path and version, at least {@link MIN_PYTHON}. */
function basePython(env: NodeJS.ProcessEnv): { path: string; version: string } {
  const path = findOnPath('python3', env);
  if (!path) throw new PythonVenvError('no python3 on PATH: the Python caller needs Python 3.11 or newer');
  const run = spawnSync(path, ['-c', 'import sys; print("%d.%d.%d" % sys.version_info[:3])'], {
    encoding: 'utf8',
    env,
  });
  const version = run.stdout.trim();
  const [major = 0, minor = 0] = version.split('.').map(Number);
  if (run.status !== 0 || major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
    throw new PythonVenvError(
      `${path} is Python ${version || 'unknown'}: the Python caller needs ${MIN_PYTHON.join('.')} or newer`,
    );
  }
  return { path, version };
}

function exitCode(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<number | null> {
  return new Promise((resolve, reject) => {
    // pip's progress goes to stderr, as the Go builds' does: a first run shows what it waits on.
    const child = spawn(command, args, { env, stdio: ['ignore', 'ignore', 'inherit'] });
    child.once('error', reject);
    child.once('exit', (code) => resolve(code));
  });
}

function defaultLog(line: string): void {
  process.stderr.write(`[python-venv] ${line}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  resolvePythonVenv().then(
    (venv) => process.stdout.write(`${venv.python}\n`),
    (err: unknown) => {
      process.stderr.write(`[python-venv] ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
