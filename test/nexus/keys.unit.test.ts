/** The Nexus operations' keys (src/nexus/handler.ts): what makes a retried request reach the same job. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentJobWorkflowId } from '../../src/client/index.js';
import { InvalidInputError } from '../../src/contract.js';
import { nexusKey } from '../../src/nexus/handler.js';

test("the caller's key wins, so Nexus and the library reach the same workflow with it", () => {
  assert.equal(nexusKey('release-42', 'b7c1a0e4-request'), 'release-42');
  assert.equal(agentJobWorkflowId('docs', nexusKey('release-42', 'any')), 'agent-job/docs/release-42');
});

test('without a key, the request ID makes it: a retry with the same request ID gets the same workflow ID', () => {
  const requestId = '3f0c9a52-6b1e-4d7a-9a0e-0b8f6c2d1e44';
  assert.equal(nexusKey(undefined, requestId), `nexus-${requestId}`);
  assert.equal(
    agentJobWorkflowId('docs', nexusKey(undefined, requestId)),
    'agent-job/docs/nexus-3f0c9a52-6b1e-4d7a-9a0e-0b8f6c2d1e44',
  );
  assert.notEqual(nexusKey(undefined, requestId), nexusKey(undefined, `${requestId.slice(0, -1)}5`));
});

test('a blank key is passed on for the library to refuse, not replaced by the request ID', () => {
  assert.equal(nexusKey('', 'request-1'), '');
  assert.equal(nexusKey('  ', 'request-1'), '  ');
});

test('no key and no request ID is refused: every such request would share one workflow', () => {
  assert.throws(
    () => nexusKey(undefined, ''),
    (err: unknown) => err instanceof InvalidInputError && err.field === 'key',
  );
  assert.throws(() => nexusKey(undefined, '  '), InvalidInputError);
});
