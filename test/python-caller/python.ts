/**
 * Running the Python caller (examples/python-caller/) from the tests: in its venv
 * (dev/python-venv.ts, made on first use), with its package on PYTHONPATH, every process killed
 * after the test file if it still runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PYTHON_CALLER_DIR, resolvePythonVenv, type PythonVenv } from '../../dev/python-venv.js';

/** The repository root. (Not the harness's: unit tests do not load the worker it imports.) */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// Processes still running after the file's tests (a test that failed or timed out) are killed.
// Registered at import time, as the harness does, so that the hook attaches to the file's root.
const running = new Map<ChildProcess, Promise<unknown>>();
after(async () => {
  for (const [child, exited] of running) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  }
});

let venv: Promise<PythonVenv> | undefined;

/** The example's venv, made once per machine and requirements (the first call may take a while). */
export function pythonVenv(): Promise<PythonVenv> {
  venv ??= resolvePythonVenv(process.env, (line) => process.stderr.write(`[python-venv] ${line}\n`));
  return venv;
}

/** What a Python process printed and how it ended. */
export interface PythonRun {
  code: number | string;
  stdout: string;
  stderr: string;
}

/**
 * Runs `python <args>` in the venv to its end, from the repository root, with `env` (nothing else
 * inherited but PATH and HOME) and the example's package importable; `input` goes to its stdin.
 */
export async function runPython(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<PythonRun> {
  const { python } = await pythonVenv();
  const child = spawn(python, args, {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PYTHONPATH: PYTHON_CALLER_DIR,
      PYTHONDONTWRITEBYTECODE: '1',
      ...options.env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  running.set(child, exited);
  child.stdin.end(options.input ?? '');
  const code = await exited;
  running.delete(child);
  return { code, stdout, stderr };
}

/** Sends `requests` to test/python-caller/interop.py and returns its answers, one per request. */
export async function interop(requests: readonly object[]): Promise<unknown[]> {
  const run = await runPython([join(ROOT, 'test', 'python-caller', 'interop.py')], {
    input: JSON.stringify(requests),
  });
  if (run.code !== 0) throw new Error(`interop.py exited with ${run.code}:\n${run.stderr}`);
  return JSON.parse(run.stdout) as unknown[];
}
