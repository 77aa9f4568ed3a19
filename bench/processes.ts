/**
 * The processes the benchmark measures: the worker under test and the two baselines, each a child
 * process of its own so that its CPU time and memory can be read from /proc without the
 * benchmark's own work (the simulator, the client) mixed in.
 */
import { spawn } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import { createInterface } from 'node:readline';
import { ROOT } from './build.js';

/** A JSON log line of a child, as the project's JSON logger writes it. */
export type LogLine = Record<string, unknown> & { msg?: string };

/**
 * The lines the benchmark waits for: a worker's start-up line, and the plain loop's protocol
 * (bench/baselines/plain-loop.ts). The first of each is kept, so a wait that starts after it came
 * still sees it; no other line is kept, since a worker logs one line per agent job.
 */
const CONTROL_LINES: ReadonlySet<string> = new Set(['worker running', 'ready', 'result']);

/** A child process that writes JSON lines on stdout. */
export type MeasuredProcess = ReturnType<typeof spawnMeasured>;

/** Spawns `node [nodeArgs] <args>` from the repository root with `env` (the parent's is not passed on). */
export function spawnMeasured(
  nodeArgs: string[],
  env: NodeJS.ProcessEnv,
  options: { stdin?: 'pipe' | 'ignore' } = {},
) {
  const spawnedAt = Date.now();
  const child = spawn(process.execPath, nodeArgs, {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: [options.stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`could not spawn node ${nodeArgs.join(' ')}`);
  /** Exit code, or the signal name. */
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  const tailLines: string[] = [];
  const keep = (text: string) => {
    tailLines.push(text);
    if (tailLines.length > 30) tailLines.shift();
  };
  /** The last lines of stderr and non-JSON stdout, for error messages. */
  const tail = () => tailLines.join('\n');
  const firsts = new Map<string, { line: LogLine; at: number }>();
  const control = new EventEmitter();
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
    if (line.msg !== undefined && CONTROL_LINES.has(line.msg) && !firsts.has(line.msg)) {
      firsts.set(line.msg, { line, at });
      control.emit(line.msg, { line, at });
    }
  });
  createInterface({ input: child.stderr! }).on('line', keep);

  /** Resolves with the first line whose `msg` is `message`, with the time it was read. */
  const waitForLine = async (message: string, timeoutMs: number): Promise<{ line: LogLine; at: number }> => {
    const early = firsts.get(message);
    if (early) return early;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const [hit] = (await Promise.race([
        once(control, message, { signal }),
        exited.then((code) => {
          throw new Error(`process exited (${code}) before "${message}":\n${tail()}`);
        }),
      ])) as [{ line: LogLine; at: number }];
      return hit;
    } catch (err) {
      if (!signal.aborted) throw err;
      throw new Error(`no "${message}" within ${timeoutMs}ms:\n${tail()}`, { cause: err });
    }
  };

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process has exited. */
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
    pid: child.pid,
    /** `Date.now()` just before the spawn. */
    spawnedAt,
    child,
    waitForLine,
    exited,
    tail,
    /** Workflow code that threw so far ("Workflow failed" lines): never expected in a benchmark. */
    failures: () => failures,
    stop,
  };
}

/**
 * Starts the plain loop's run (bench/baselines/plain-loop.ts: `go` on its stdin) and resolves with
 * its result line, the outcome of every job.
 */
export async function runPlainLoop(proc: MeasuredProcess, timeoutMs: number): Promise<LogLine> {
  const stdin = proc.child.stdin;
  if (!stdin) throw new Error('the plain loop has no stdin pipe');
  if (!stdin.write('go\n')) await once(stdin, 'drain');
  return (await proc.waitForLine('result', timeoutMs)).line;
}
