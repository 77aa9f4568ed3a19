/**
 * The processes the benchmark measures: the worker under test and the two baselines, each a child
 * process of its own so that its CPU time and memory can be read from /proc without the
 * benchmark's own work (the simulator, the client) mixed in.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { ROOT } from './build.js';
import { withTimeout } from './wait.js';

/** A JSON log line of a child, as the project's JSON logger writes it. */
export type LogLine = Record<string, unknown> & { msg?: string };

/** A child process that writes JSON lines on stdout. */
export interface MeasuredProcess {
  pid: number;
  /** `Date.now()` just before the spawn. */
  spawnedAt: number;
  child: ChildProcess;
  /** Resolves with the first line whose `msg` is `message`, with the time it was read. */
  waitForLine(message: string, timeoutMs: number): Promise<{ line: LogLine; at: number }>;
  /** Exit code, or the signal name. */
  exited: Promise<number | string>;
  /** The last lines of stderr and non-JSON stdout, for error messages. */
  tail(): string;
  /** Workflow code that threw so far ("Workflow failed" lines): never expected in a benchmark. */
  failures(): number;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
  stop(graceMs?: number): Promise<number | string>;
}

/** Spawns `node [nodeArgs] <args>` from the repository root with `env` (the parent's is not passed on). */
export function spawnMeasured(
  nodeArgs: string[],
  env: NodeJS.ProcessEnv,
  options: { stdin?: 'pipe' | 'ignore' } = {},
): MeasuredProcess {
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, nodeArgs, {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`could not spawn node ${nodeArgs.join(' ')}`);
  const pid = child.pid;
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  const tailLines: string[] = [];
  const keep = (text: string) => {
    tailLines.push(text);
    if (tailLines.length > 30) tailLines.shift();
  };
  const waiters: Array<{ message: string; resolve: (hit: { line: LogLine; at: number }) => void }> = [];
  const seen: Array<{ line: LogLine; at: number }> = [];
  let failures = 0;
  createInterface({ input: child.stdout! }).on('line', (text) => {
    const at = Date.now();
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      // Not one of our JSON lines (a warning from Node, say): keep it for the error message.
      keep(text);
      return;
    }
    if (line.level === 'ERROR' || line.level === 'WARN') keep(text);
    if (line.msg === 'Workflow failed') failures++;
    // Only the lines someone waits for are kept; a worker logs one line per agent job.
    const waiting = waiters.filter((w) => w.message === line.msg);
    if (waiting.length === 0 && seen.length < 100 && isControlLine(line)) seen.push({ line, at });
    for (const w of waiting) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve({ line, at });
    }
  });
  createInterface({ input: child.stderr! }).on('line', keep);

  const waitForLine = async (message: string, timeoutMs: number) => {
    const early = seen.find((hit) => hit.line.msg === message);
    if (early) return early;
    return withTimeout(
      Promise.race([
        new Promise<{ line: LogLine; at: number }>((resolve) => waiters.push({ message, resolve })),
        exited.then((code) => {
          throw new Error(`process exited (${code}) before "${message}":\n${tailLines.join('\n')}`);
        }),
      ]),
      timeoutMs,
      () => new Error(`no "${message}" within ${timeoutMs}ms:\n${tailLines.join('\n')}`),
    );
  };

  const stop = async (graceMs = 20_000) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    }
    return exited;
  };

  return {
    pid,
    spawnedAt,
    child,
    waitForLine,
    exited,
    tail: () => tailLines.join('\n'),
    failures: () => failures,
    stop,
  };
}

/** Lines the benchmark may wait for before it starts waiting: start-up and result lines. */
function isControlLine(line: LogLine): boolean {
  return line.msg === 'worker running' || line.msg === 'ready' || line.msg === 'result';
}

/** Writes `text` to the child's stdin (spawned with `stdin: 'pipe'`). */
export async function writeStdin(proc: MeasuredProcess, text: string): Promise<void> {
  const stdin = proc.child.stdin;
  if (!stdin) throw new Error('the process has no stdin pipe');
  if (!stdin.write(text)) await once(stdin, 'drain');
}
