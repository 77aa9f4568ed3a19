/** JSON log lines: one object per line, secret-named fields masked. */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { createJsonLogger } from '../../src/observability/logger.js';

test('writes one JSON object per line and masks secret-named fields', () => {
  const stream = new PassThrough();
  let out = '';
  stream.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const logger = createJsonLogger('INFO', stream);
  logger.info('calling the API', {
    apiKey: 'mint_secret',
    Authorization: 'Bearer mint_secret',
    jobId: 'job_1',
  });
  logger.debug('not at INFO');
  const lines = out.trim().split('\n');
  assert.equal(lines.length, 1);
  const line = JSON.parse(lines[0] ?? '') as Record<string, unknown>;
  assert.equal(line.msg, 'calling the API');
  assert.equal(line.level, 'INFO');
  assert.equal(line.jobId, 'job_1');
  assert.equal(line.apiKey, '[redacted]');
  assert.ok(!out.includes('mint_secret'));
});
