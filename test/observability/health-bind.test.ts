/**
 * The worker as a real process when its health port is taken: the error a person sees is the bind
 * failure, naming HEALTH_ADDRESS, and not whatever the clean-up met after it.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { test } from 'node:test';
import { onCleanup, spawnTs, startSimulatedWorld } from '../harness.js';

const { workerEnv } = await startSimulatedWorld('health-bind');

test('a health port already in use: exit 1 with the bind error, naming HEALTH_ADDRESS', async () => {
  const squatter = createServer().listen(0, '127.0.0.1');
  await once(squatter, 'listening');
  onCleanup(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
  const address = squatter.address();
  assert.ok(address !== null && typeof address === 'object');
  const { vars } = await workerEnv({ HEALTH_ADDRESS: `127.0.0.1:${address.port}` });
  const worker = spawnTs('src/worker.ts', [], vars);
  assert.equal(await worker.exited, 1, worker.stdout() + worker.stderr());
  const output = worker.stdout() + worker.stderr();
  assert.match(worker.stderr(), /EADDRINUSE/);
  assert.match(worker.stderr(), new RegExp(`HEALTH_ADDRESS 127\\.0\\.0\\.1:${address.port}`));
  assert.doesNotMatch(output, /Cannot close connection/);
});
