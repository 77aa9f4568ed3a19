/**
 * The simulator program: flags and environment, the printed URL, create and get against it, a clean
 * exit on SIGTERM, and exit 2 with a usage line on a bad flag.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { parseCommandLine, UsageError } from '../../src/simulator/cli.js';
import { uniqueId, waitFor } from '../harness.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = 'src/simulator/main.ts';

/** Starts the program with tsx; collects its output. */
function spawnSimulator(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk: Buffer) => (output.stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output.stderr += chunk.toString()));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  return { child, output, exited };
}

async function stopChild(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await exited;
}

describe('the program', () => {
  test('port 0 prints the real URL; create and get work; SIGTERM exits 0', async () => {
    const key = uniqueId('cli-key');
    const { child, output, exited } = spawnSimulator(['--port', '0', '--duration', '100ms'], {
      SIMULATOR_API_KEYS: `other, ${key}`,
    });
    try {
      const url = await waitFor(
        () => /agent job API simulator listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output.stdout)?.[1],
        { what: 'the listening line', timeoutMs: 30_000 },
      );
      assert.doesNotMatch(url, /:0$/);
      const projectId = uniqueId('proj');
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const created = await fetch(`${url}/v2/agent/${projectId}/job`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ prompt: 'Document the CLI' }),
      });
      assert.equal(created.status, 201);
      const { id } = (await created.json()) as { id: string };
      const read = await fetch(`${url}/v2/agent/${projectId}/job/${id}`, { headers });
      assert.equal(read.status, 200);
      assert.equal(((await read.json()) as { id: string }).id, id);
      await waitFor(() => output.stdout.includes(`/v2/agent/${projectId}/job/${id}`), {
        what: 'the log line',
      });
      assert.ok(!output.stdout.includes(key), 'the log never shows the key');

      child.kill('SIGTERM');
      const [code] = await exited;
      assert.equal(code, 0, output.stderr);
    } finally {
      await stopChild(child, exited);
    }
  });

  test('a bad flag: exit 2, one usage line, no stack trace', async () => {
    const { child, output, exited } = spawnSimulator(['--port', 'eighty']);
    try {
      const [code] = await exited;
      assert.equal(code, 2);
      assert.match(output.stderr, /--port: "eighty" is not a whole number/);
      assert.equal(output.stderr.split('\n').filter((line) => line.startsWith('usage: ')).length, 1);
      assert.doesNotMatch(output.stderr, /\n\s+at /);
      assert.equal(output.stdout, '');
    } finally {
      await stopChild(child, exited);
    }
  });
});

describe('parseCommandLine', () => {
  test('defaults', () => {
    const command = parseCommandLine([], {});
    assert.ok(!command.help);
    assert.equal(command.options.port, 8787);
    assert.equal(command.options.host, '127.0.0.1');
    assert.deepEqual(command.options.apiKeys, ['sim-local-key']);
    assert.equal(command.options.archiveAfterMs, null);
    assert.equal(command.options.log, undefined);
  });

  test('flags win over the environment, which wins over defaults', () => {
    const env = {
      SIMULATOR_PORT: '9000',
      SIMULATOR_HOST: '0.0.0.0',
      SIMULATOR_API_KEYS: 'a,b',
      SIMULATOR_CREATES_PER_HOUR: '5',
      SIMULATOR_JOB_DURATION: '2s',
      SIMULATOR_OUTCOME: 'failed',
      SIMULATOR_SCENARIOS: '{"p1": {"projectExists": false}}',
    };
    const fromEnv = parseCommandLine([], env);
    assert.ok(!fromEnv.help);
    assert.equal(fromEnv.options.port, 9000);
    assert.equal(fromEnv.options.host, '0.0.0.0');
    assert.deepEqual(fromEnv.options.apiKeys, ['a', 'b']);
    assert.equal(fromEnv.options.createsPerProjectPerHour, 5);
    assert.deepEqual(fromEnv.options.defaultScenario, { durationMs: 2000, outcome: 'failed' });
    assert.deepEqual(fromEnv.options.scenarios, { p1: { projectExists: false } });

    const fromFlags = parseCommandLine(
      ['--port', '1', '--key', 'x', '--key', 'y', '--duration', '250', '--outcome', 'no-changes'],
      env,
    );
    assert.ok(!fromFlags.help);
    assert.equal(fromFlags.options.port, 1);
    assert.deepEqual(fromFlags.options.apiKeys, ['x', 'y']);
    assert.deepEqual(fromFlags.options.defaultScenario, { durationMs: 250, outcome: 'no-changes' });
  });

  test('durations, --archive-after, --quiet and --help', () => {
    const command = parseCommandLine(['--archive-after', '10m', '--quiet', '--duration', '1.5s'], {});
    assert.ok(!command.help);
    assert.equal(command.options.archiveAfterMs, 600_000);
    assert.equal(command.options.log, false);
    assert.equal(command.options.defaultScenario?.durationMs, 1500);
    assert.deepEqual(parseCommandLine(['--help'], {}), { help: true });
  });

  test('--budget K/W in seconds and --no-retry-after, from flags or the environment', () => {
    const fromFlags = parseCommandLine(['--budget', '3/20', '--no-retry-after'], {});
    assert.ok(!fromFlags.help);
    assert.deepEqual(fromFlags.options.budget, { uses: 3, windowSeconds: 20 });
    assert.equal(fromFlags.options.retryAfter, false);
    const fromEnv = parseCommandLine([], { SIMULATOR_BUDGET: '5/2.5s', SIMULATOR_NO_RETRY_AFTER: '1' });
    assert.ok(!fromEnv.help);
    assert.deepEqual(fromEnv.options.budget, { uses: 5, windowSeconds: 2.5 });
    assert.equal(fromEnv.options.retryAfter, false);
    const plain = parseCommandLine([], {});
    assert.ok(!plain.help);
    assert.equal(plain.options.budget, undefined);
    assert.equal(plain.options.retryAfter, undefined, 'Retry-After is sent unless asked otherwise');
  });

  test('--honour-idempotency-key, from the flag or the environment; keys are ignored by default', () => {
    const fromFlag = parseCommandLine(['--honour-idempotency-key'], {});
    assert.ok(!fromFlag.help);
    assert.equal(fromFlag.options.honourIdempotencyKey, true);
    const fromEnv = parseCommandLine([], { SIMULATOR_HONOUR_IDEMPOTENCY_KEY: '1' });
    assert.ok(!fromEnv.help);
    assert.equal(fromEnv.options.honourIdempotencyKey, true);
    const plain = parseCommandLine([], { SIMULATOR_HONOUR_IDEMPOTENCY_KEY: '0' });
    assert.ok(!plain.help);
    assert.equal(plain.options.honourIdempotencyKey, undefined, 'keys are ignored unless asked otherwise');
  });

  test('--scenarios reads a JSON file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sim-scenarios-'));
    try {
      const file = join(dir, 'scenarios.json');
      writeFileSync(
        file,
        JSON.stringify({ p1: { outcome: 'failed', faults: { staleReadsAfterMessage: 1 } } }),
      );
      const command = parseCommandLine(['--scenarios', file], {});
      assert.ok(!command.help);
      assert.deepEqual(command.options.scenarios, {
        p1: { outcome: 'failed', faults: { staleReadsAfterMessage: 1 } },
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('bad values are usage errors', () => {
    for (const argv of [
      ['--nope'],
      ['extra'],
      ['--port', '70000'],
      ['--duration', 'soon'],
      ['--outcome', 'maybe'],
      ['--creates-per-hour', '-1'],
      ['--budget', '3'],
      ['--budget', '3/0'],
      ['--budget', 'three/20'],
      ['--scenarios', '{"p": {"outcome": "maybe"}}'],
      ['--scenarios', '/nonexistent/scenarios.json'],
      ['--key', 'has space'],
    ]) {
      assert.throws(() => parseCommandLine(argv, {}), UsageError, argv.join(' '));
    }
  });
});
