import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { test } from 'node:test';
import { startDevServer } from '../../dev/dev-server.js';
import { ALL_SEARCH_ATTRIBUTES } from '../../src/contract.js';
import { onCleanup, temporalEnv } from '../harness.js';

test('the suite runs against a real Temporal server with the custom search attributes registered', async () => {
  const env = await temporalEnv();
  const system = await env.client.connection.workflowService.getSystemInfo({});
  assert.ok(system.serverVersion, 'the server reports its version');
  const { customAttributes } = await env.client.connection.operatorService.listSearchAttributes({
    namespace: env.namespace,
  });
  for (const key of ALL_SEARCH_ATTRIBUTES) {
    assert.ok(customAttributes && key.name in customAttributes, `${key.name} is registered`);
  }
});

test('a dev server whose port is taken fails with the reason from its output, and leaves no process', async () => {
  // It hangs up on whoever connects (the start's own readiness probe can reach it before the server
  // exits): an open connection would keep close() from ever resolving.
  const holder = createServer((socket) => socket.destroy()).listen(0, '127.0.0.1');
  await once(holder, 'listening');
  onCleanup(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  const port = (holder.address() as AddressInfo).port;
  const lines: string[] = [];
  const err = await startDevServer({ port, log: (line) => lines.push(line) }).then(
    async (server) => {
      await server.stop();
      assert.fail(`a server started on port ${port}, which is taken`);
    },
    (e: unknown) => e as Error,
  );
  assert.match(err.message, /did not start: it exited with code \d+: .*address already in use/);
  assert.ok(!lines.some((line) => line.startsWith('started')), lines.join('\n'));
});
