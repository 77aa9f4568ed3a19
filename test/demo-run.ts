/**
 * Runs `npm run demo` as a newcomer does, for the demo's tests (test/e2e/demo*.test.ts): from a
 * shell that has none of the suite's settings, with the PATH the test gives it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, delimiter, join } from 'node:path';
import { isExecutable } from '../dev/go-install.js';
import {
  resolveTemporalServer,
  resolveTemporalUi,
  serverCacheDir,
  uiCacheDir,
} from '../dev/temporal-builds.js';
import { onCleanup, ROOT } from './harness.js';

/**
 * The environment of a demo run from nothing: none of the suite's server, API settings or key ring.
 * Unless the test says otherwise, no `temporal` CLI on PATH and a proxy that refuses at once for the
 * SDK's download (which honours HTTPS_PROXY), so the demo goes on to the build from source, the
 * pinned release CI runs, whatever this machine can reach ({@link pinnedBuildsCache} keeps it from
 * a CLI downloaded before). npm honours that proxy too: a run that installs (`predemo` in a fresh
 * clone) unsets it.
 */
export function demoEnv(overrides: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: pathWithout(['temporal']),
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    HTTPS_PROXY: 'http://127.0.0.1:1',
  };
  for (const name of [
    'TEMPORAL_ADDRESS',
    'TEMPORAL_NAMESPACE',
    'TEMPORAL_UI_URL',
    'AGENT_API_BASE_URL',
    'AGENT_API_KEY',
    'AGENT_API_KEY_FILE',
    'TEMPORAL_PAYLOAD_KEYS_FILE',
    // Proxy settings the SDK's download would read before HTTPS_PROXY.
    'https_proxy',
    'ALL_PROXY',
    'all_proxy',
  ]) {
    delete env[name];
  }
  const merged = { ...env, ...overrides };
  // An override of undefined unsets the variable (spawn would pass the word "undefined").
  for (const [name, value] of Object.entries(merged)) if (value === undefined) delete merged[name];
  return merged;
}

/**
 * A project cache (an XDG_CACHE_HOME) that holds only the pinned Server and UI server builds, linked
 * from this machine's cache, where they are built first if missing. The demo finds nothing else
 * there, not a CLI the SDK downloaded on an earlier run, so it runs on those builds, and a build it
 * started would show in its output. Removed after the file's tests.
 */
export async function pinnedBuildsCache(): Promise<string> {
  await Promise.all([resolveTemporalServer(), resolveTemporalUi()]);
  const home = mkdtempSync(join(tmpdir(), 'demo-cache-'));
  onCleanup(() => rmSync(home, { recursive: true, force: true }));
  const project = join(home, 'agent-job-orchestrator');
  mkdirSync(project);
  for (const dir of [serverCacheDir(), uiCacheDir()]) symlinkSync(dir, join(project, basename(dir)));
  return home;
}

/**
 * This process's PATH without the directories that hold any of `commands` (`go`, `temporal`), and
 * without this checkout's node_modules/.bin, which npm put there and a newcomer's shell has not.
 */
export function pathWithout(commands: string[]): string {
  return (process.env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => dir && !dir.startsWith(ROOT) && !commands.some((name) => isExecutable(join(dir, name))))
    .join(delimiter);
}

/** What a demo run printed, each line with when it arrived, and how it ended. */
export interface DemoRun {
  code: number | null;
  out: string;
  lines: Array<{ at: number; text: string }>;
  ms: number;
}

/** Options of {@link runDemo}. */
export interface DemoRunOptions {
  /** This checkout by default. */
  cwd?: string;
  /** {@link demoEnv}'s by default. */
  env?: NodeJS.ProcessEnv;
  /** When the demo is killed; 120 s by default. */
  timeoutMs?: number;
  /** Called with each line as it arrives, to look at what the demo runs while it runs. */
  onLine?: (text: string) => void;
}

/**
 * Runs `npm run demo -- <args>` and resolves once it has exited; it is killed at `timeoutMs`.
 */
export async function runDemo(args: string[], options: DemoRunOptions = {}): Promise<DemoRun> {
  const started = Date.now();
  const demo = spawn('npm', ['run', '--silent', 'demo', ...(args.length > 0 ? ['--', ...args] : [])], {
    cwd: options.cwd ?? ROOT,
    env: options.env ?? demoEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const lines: DemoRun['lines'] = [];
  // Each stream's unfinished line is its own: chunks of the two can arrive interleaved.
  const keep = (stream: NodeJS.ReadableStream) => {
    let partial = '';
    stream.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const complete = (partial + chunk.toString()).split('\n');
      partial = complete.pop() ?? '';
      for (const text of complete) {
        lines.push({ at: Date.now(), text });
        options.onLine?.(text);
      }
    });
  };
  keep(demo.stdout);
  keep(demo.stderr);
  const killer = setTimeout(() => demo.kill('SIGKILL'), options.timeoutMs ?? 120_000);
  const [code] = (await once(demo, 'exit')) as [number | null];
  clearTimeout(killer);
  return { code, out, lines, ms: Date.now() - started };
}
