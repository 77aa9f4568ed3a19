/**
 * The codec server's peak memory under the worst load its limits allow: the process as the pod runs
 * it (plain JavaScript, `--max-old-space-size=64`, deploy/k8s/codec-server.yaml), 34 requests at
 * once (2 coded, 32 waiting), each the largest body (4 MiB, one payload to seal). Its peak resident
 * set (`VmHWM`) must stay under the pod's 256 Mi limit. Under tsx the loader's own thread and
 * transforms add ~40 MiB idle and more at the peak, so the entry point is compiled first (esbuild,
 * packages left to node_modules). Linux only (it reads /proc). No Temporal server.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { build } from 'esbuild';
import { MAX_BODY_BYTES, MAX_IN_FLIGHT, MAX_WAITING } from '../../src/payload-codec/codec-server.js';

const LIMIT_MIB = 256;
const TOKEN = 'memory-test-local-token';

test(`${MAX_IN_FLIGHT + MAX_WAITING} of the largest requests at once keep the codec server under ${LIMIT_MIB} MiB`, async (t) => {
  const root = mkdtempSync(join(tmpdir(), 'codec-memory-'));
  // Beside package.json, so that the bundle's imports resolve in node_modules.
  const compiled = mkdtempSync(join(process.cwd(), '.codec-memory-'));
  t.after(() => {
    rmSync(root, { recursive: true, force: true });
    rmSync(compiled, { recursive: true, force: true });
  });
  const entry = join(compiled, 'codec-server.mjs');
  await build({
    entryPoints: ['src/codec-server.ts'],
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    outfile: entry,
  });
  const ring = join(root, 'ring');
  writeFileSync(ring, `k1 ${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  const server = spawn(process.execPath, ['--max-old-space-size=64', entry], {
    env: {
      ...process.env,
      TEMPORAL_PAYLOAD_KEYS_FILE: ring,
      CODEC_SERVER_ADDRESS: '127.0.0.1:0',
      CODEC_SERVER_LOCAL_TOKEN: TOKEN,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.after(() => server.kill('SIGTERM'));
  let out = '';
  server.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const deadline = Date.now() + 60_000;
  while (!/"endpoint":"(http:[^"]+)"/.test(out)) {
    assert.ok(Date.now() < deadline && server.exitCode === null, `the codec server did not start:\n${out}`);
    await Promise.race([once(server.stdout, 'data'), once(server, 'exit')]);
  }
  const endpoint = `${/"endpoint":"(http:[^"]+)"/.exec(out)?.[1]}/${TOKEN}/encode`;
  const peakMiB = () =>
    Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))?.[1]) / 1024;
  const idle = peakMiB();
  // The largest body the limit allows: one payload of as many base64 bytes as fit.
  const data = Buffer.alloc(Math.floor(((MAX_BODY_BYTES - 64) * 3) / 4), 7).toString('base64');
  const body = JSON.stringify({ payloads: [{ data }] });
  assert.ok(body.length <= MAX_BODY_BYTES);
  const statuses = await Promise.all(
    Array.from({ length: MAX_IN_FLIGHT + MAX_WAITING }, () =>
      fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then(
        async (res) => (await res.arrayBuffer(), res.status),
      ),
    ),
  );
  const peak = peakMiB();
  t.diagnostic(`idle ${idle.toFixed(0)} MiB, peak ${peak.toFixed(0)} MiB`);
  assert.deepEqual(new Set(statuses), new Set([200]), 'every request is answered');
  assert.ok(peak < LIMIT_MIB, `peak ${peak.toFixed(0)} MiB`);
});
