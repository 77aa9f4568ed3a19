/**
 * `npm run demo`, exactly as a newcomer runs it: it starts its own Temporal dev server with the UI,
 * the simulator and a worker, runs one agent job, prints the final record with its prLink and the
 * UI link, and stops everything it started.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { ROOT } from '../harness.js';

test('npm run demo prints a final record with a prLink and stops what it started', async () => {
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
  const demo = spawn('npm', ['run', '--silent', 'demo'], {
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
  assert.equal(code, 0, out);
  assert.match(out, /started Temporal dev server pid \d+ from \S+temporal/);
  assert.match(out, /"status": "completed"/);
  assert.match(out, /prLink: https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+/);
  assert.match(out, /workflow in the UI: http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\//);
  assert.match(out, /stopped Temporal dev server pid \d+/);
});
