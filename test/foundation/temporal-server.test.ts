import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ALL_SEARCH_ATTRIBUTES } from '../../src/contract.js';
import { temporalEnv } from '../harness.js';

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
