/**
 * `npm run demo`, exactly as a newcomer runs it: it starts its own Temporal server with the UI,
 * the simulator and a worker, runs one agent job, prints the final record with its prLink and the
 * UI link, and stops everything it started.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { TEMPORAL_SERVER_VERSION, TEMPORAL_UI_VERSION } from '../../dev/temporal-versions.js';
import { ROOT } from '../harness.js';

/** Runs `npm run demo -- <args>` from nothing (no server, no API settings) and returns its exit code and output. */
async function runDemo(args: string[]): Promise<{ code: number | null; out: string }> {
  const env = { ...process.env };
  // The suite's server and any API settings would make the demo reuse them: start from nothing.
  for (const name of [
    'TEMPORAL_ADDRESS',
    'TEMPORAL_NAMESPACE',
    'AGENT_API_BASE_URL',
    'AGENT_API_KEY',
    'AGENT_API_KEY_FILE',
  ]) {
    delete env[name];
  }
  const demo = spawn('npm', ['run', '--silent', 'demo', ...(args.length > 0 ? ['--', ...args] : [])], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  demo.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  demo.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const killer = setTimeout(() => demo.kill('SIGKILL'), 120_000);
  const [code] = (await once(demo, 'exit')) as [number | null];
  clearTimeout(killer);
  return { code, out };
}

test('npm run demo prints a final record with a prLink and stops what it started', async () => {
  const { code, out } = await runDemo([]);
  assert.equal(code, 0, out);
  // The releases the compose file deploys, and the Node the Dockerfile runs.
  const server = TEMPORAL_SERVER_VERSION.replaceAll('.', '\\.');
  const ui = TEMPORAL_UI_VERSION.replaceAll('.', '\\.');
  assert.match(
    out,
    new RegExp(
      `started Temporal Server ${server} pid \\d+ on 127\\.0\\.0\\.1:\\d+ with Temporal UI ${ui} on http://127`,
    ),
  );
  assert.match(
    out,
    new RegExp(
      `versions: Temporal Server ${server}, Temporal UI ${ui}, TypeScript SDK \\d+\\.\\d+\\.\\d+, Node v24\\.`,
    ),
  );
  assert.match(out, /"status": "completed"/);
  assert.match(out, /prLink: https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+/);
  assert.match(out, /workflow in the UI: http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\//);
  assert.match(out, /stopped Temporal Server pid \d+/);
});

test('npm run demo -- --jobs 4 --budget 2/10s shows jobs queued for the project quota, and no 429', async () => {
  const { code, out } = await runDemo(['--jobs', '4', '--budget', '2/10s']);
  assert.equal(code, 0, out);
  assert.match(out, /job \d: queued for the project's API budget: position \d of \d, earliest start \d{4}-/);
  assert.equal(out.match(/job \d: prLink: https:\/\/github\.com\//g)?.length, 4, out);
  assert.match(out, /the simulator saw 4 creates and 0 refused \(429\) for a budget of 2\/10s/);
  assert.match(out, /stopped Temporal Server pid \d+/);
});
