/**
 * `redact` masks secret-named fields wherever they sit in the metadata of a log line: nested
 * objects, arrays, error causes. No server.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { createJsonLogger, formatLogLine, redact } from '../../src/observability/logger.js';

const SECRET = 'mint_nested_secret';

test('secret-named fields are masked at any depth, in arrays too; the rest is kept', () => {
  const out = redact({
    connection: { address: 'temporal:7233', apiKey: SECRET, tls: { clientKey: SECRET, serverName: 'x' } },
    headers: [{ authorization: `Bearer ${SECRET}` }, { accept: 'application/json' }],
    jobId: 'job_1',
  });
  assert.ok(!JSON.stringify(out).includes(SECRET), JSON.stringify(out));
  assert.deepEqual(out, {
    connection: {
      address: 'temporal:7233',
      apiKey: '[redacted]',
      tls: { clientKey: '[redacted]', serverName: 'x' },
    },
    headers: [{ authorization: '[redacted]' }, { accept: 'application/json' }],
    jobId: 'job_1',
  });
});

test('an error keeps its name and message only, nested or not; a cycle does not hang', () => {
  const cyclic: Record<string, unknown> = { name: 'loop' };
  cyclic.self = cyclic;
  const out = redact({ failure: { error: new TypeError('boom'), token: SECRET }, cyclic });
  assert.deepEqual(out.failure, { error: { name: 'TypeError', message: 'boom' }, token: '[redacted]' });
  assert.equal((out.cyclic as Record<string, unknown>).self, '[circular]');
});

test('without error text (the payload codec on), an error keeps its name and failure type, never its message', () => {
  const failure = ApplicationFailure.create({
    type: 'InvalidRequest',
    message: 'the prompt "marker" is refused',
  });
  const out = redact({ error: failure, cause: new TypeError('marker') }, { errorText: false });
  assert.deepEqual(out, {
    error: { name: 'ApplicationFailure', type: 'InvalidRequest' },
    cause: { name: 'TypeError' },
  });
});

test('a logger never writes a nested secret', () => {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  createJsonLogger('INFO', stream).info('connecting', { options: { apiKey: SECRET, address: 'a:1' } });
  assert.ok(!text.includes(SECRET), text);
  assert.match(text, /"address":"a:1"/);
});

test('a log line carries no raw control, C1 or bidi character, and parses back to the same value', () => {
  const hostile = 'job_1\u001b]8;;https://evil.example\u001b\\x\u009b31m\u202eabc\u2028\n';
  const line = formatLogLine(
    { level: 'WARN', message: `read ${hostile}`, meta: { jobId: hostile } },
    new Date(0),
  );
  assert.doesNotMatch(line, /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u);
  const parsed = JSON.parse(line) as { msg: string; jobId: string };
  assert.equal(parsed.msg, `read ${hostile}`);
  assert.equal(parsed.jobId, hostile);
  const plain = { level: 'INFO' as const, message: 'ok', meta: { jobId: 'job_1' } };
  assert.equal(
    formatLogLine(plain, new Date(0)),
    JSON.stringify({ time: new Date(0).toISOString(), level: 'INFO', msg: 'ok', jobId: 'job_1' }),
  );
});
