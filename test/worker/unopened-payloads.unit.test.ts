/**
 * The worker's report of a payload that does not open (src/worker/runtime.ts): a line
 * per payload with the reason, key ID and owner, and each workflow counted once.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Logger, MetricMeter } from '@temporalio/common';
import { SealedPayloadError, UnknownPayloadKeyError } from '../../src/payload-codec/index.js';
import { reportUnopenedPayloads } from '../../src/worker/runtime.js';

test('one line per payload naming workflow, key ID and reason; each workflow counted once, by reason', () => {
  const lines: [string, unknown][] = [];
  const counts: [number, unknown][] = [];
  const logger = {
    error: (message: string, meta: unknown) => lines.push([message, meta]),
  } as unknown as Logger;
  const meter = {
    createCounter: () => ({ add: (n: number, tags: unknown) => counts.push([n, tags]) }),
  } as unknown as MetricMeter;
  const report = reportUnopenedPayloads(logger, meter);
  const wf = { type: 'workflow', namespace: 'default', workflowId: 'agent-job/docs/k' } as const;
  const altered = new SealedPayloadError(
    'authentication-failed',
    'k1',
    'a payload sealed with key k1 does not open',
  );
  report(altered, wf);
  report(altered, wf);
  report(new UnknownPayloadKeyError('k9'), {
    type: 'activity',
    namespace: 'default',
    workflowId: 'w2',
    activityId: '7',
    isLocal: false,
  });
  report(new SealedPayloadError('malformed', null, 'no usable key ID'), undefined);
  const line = (meta: object) => ['payload does not open', meta];
  const first = {
    reason: 'authentication-failed',
    keyId: 'k1',
    owner: 'workflow',
    namespace: 'default',
    workflowId: 'agent-job/docs/k',
    activityId: undefined,
  };
  assert.deepEqual(lines, [
    // Every payload is a line; only the count is once per workflow.
    line(first),
    line(first),
    line({
      reason: 'unknown-key',
      keyId: 'k9',
      owner: 'activity',
      namespace: 'default',
      workflowId: 'w2',
      activityId: '7',
    }),
    line({
      reason: 'malformed',
      keyId: null,
      owner: 'unknown',
      namespace: undefined,
      workflowId: undefined,
      activityId: undefined,
    }),
  ]);
  assert.deepEqual(
    counts,
    [[1, { reason: 'authentication-failed' }]],
    'the workflow once; activities are not workflows',
  );
});
