/**
 * The agent job record as the client reads it: drift in optional fields is tolerated (an unknown
 * field kept, a wrong-typed optional field dropped), a body that is not a record is not. No server.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidAgentJobRecordError, parseAgentJobRecord, readableJobId } from '../../src/agent-api/index.js';

const base = { id: 'job_1', status: 'active', prLink: null };

describe('record drift', () => {
  test('a wrong-typed optional field is dropped; the rest of the record stays', () => {
    const record = parseAgentJobRecord({
      ...base,
      model: 42,
      createdAt: { at: 'now' },
      archivedAt: 7,
      source: { repository: 'org/docs', ref: 12, mirror: 'kept' },
      region: 'eu-west-1',
    });
    assert.equal(record.id, 'job_1');
    assert.equal(record.status, 'active');
    assert.equal(record.model, undefined);
    assert.equal(record.createdAt, undefined);
    assert.equal(record.archivedAt, undefined);
    assert.deepEqual(record.source, { repository: 'org/docs', mirror: 'kept' });
    assert.equal(record.region, 'eu-west-1', 'an unknown field is kept');
    assert.ok(!('model' in JSON.parse(JSON.stringify(record))), 'nothing of the dropped field is stored');
  });

  test('a source that is not an object is dropped', () => {
    const record = parseAgentJobRecord({ ...base, source: 'org/docs' });
    assert.equal(record.source, undefined);
  });

  test('an over-long optional string is dropped rather than failing the record', () => {
    const record = parseAgentJobRecord({ ...base, model: 'm'.repeat(5_000) });
    assert.equal(record.model, undefined);
  });

  test('a record without id or status, or with a prLink that is not a URL, is still refused', () => {
    for (const body of [
      { status: 'active', prLink: null },
      { id: 'job_1', prLink: null },
      { id: 'job_1', status: 7, prLink: null },
      { ...base, prLink: 'not a url' },
      { ...base, prLink: 42 },
      'a string',
      [base],
    ]) {
      assert.throws(() => parseAgentJobRecord(body), InvalidAgentJobRecordError, JSON.stringify(body));
    }
  });

  test('an id that is not well-formed Unicode, or over 1,000 UTF-8 bytes, is refused', () => {
    assert.throws(() => parseAgentJobRecord({ ...base, id: 'job_\ud800' }), InvalidAgentJobRecordError);
    assert.throws(
      () => parseAgentJobRecord({ ...base, id: '\u4e00'.repeat(400) }),
      InvalidAgentJobRecordError,
    );
    assert.equal(parseAgentJobRecord({ ...base, id: '\u4e00'.repeat(300) }).id.length, 300);
  });
});

describe('prLink: a plain absolute http(s) URL, normalized, or the body is not a record', () => {
  const refused = (prLink: unknown): InvalidAgentJobRecordError => {
    let caught: unknown;
    assert.throws(
      () => parseAgentJobRecord({ ...base, status: 'completed', prLink }),
      (err: unknown) => {
        caught = err;
        return err instanceof InvalidAgentJobRecordError;
      },
      JSON.stringify(prLink),
    );
    return caught as InvalidAgentJobRecordError;
  };

  test('an ordinary link is kept as the URL parser writes it', () => {
    const link = 'https://github.com/sim-org/docs_site/pull/42?tab=files#diff-1';
    assert.equal(parseAgentJobRecord({ ...base, prLink: link }).prLink, link);
    assert.equal(
      parseAgentJobRecord({ ...base, prLink: 'http://x.example/pr/1' }).prLink,
      'http://x.example/pr/1',
    );
    assert.equal(
      parseAgentJobRecord({ ...base, prLink: 'HTTPS://GitHub.COM/o/r/pull/1' }).prLink,
      'https://github.com/o/r/pull/1',
    );
    assert.equal(
      parseAgentJobRecord({ ...base, prLink: 'https://b\u00fccher.example/pr/\u00e9' }).prLink,
      'https://xn--bcher-kva.example/pr/%C3%A9',
    );
    assert.equal(parseAgentJobRecord({ ...base, prLink: undefined }).prLink, null);
  });

  test('a markdown link, an escape sequence, white space, quotes or brackets: refused, never trimmed', () => {
    for (const prLink of [
      'https://x.example/pr/1 [Approve](https://evil.example)',
      'https://x.example/pr/1)[Approve](https://evil.example',
      'https://x.example/pr/1\u001b]8;;https://evil.example\u001b\\Approve\u001b]8;;\u001b\\',
      'https://x.example/pr/1\u001b[31m',
      'https://x.example/pr/1\u009b31m',
      ' https://x.example/pr/1',
      'https://x.example/pr/1\n',
      'https://x.example/pr/1\t',
      'https://x.example/pr/\u202e1',
      'https://x.example/pr/\u200b1',
      'https://x.example/pr/1\u00a0',
      "https://x.example/pr/'1'",
      'https://x.example/pr/"1"',
      'https://x.example/<b>1</b>',
      'https://x.example/pr/`1`',
      'https:\\\\x.example\\pr\\1',
    ]) {
      refused(prLink);
    }
  });

  test('not an absolute http(s) URL, or one with a user before the host: refused', () => {
    for (const prLink of [
      'not a url',
      '/pr/1',
      'javascript:alert(1)',
      'ftp://x.example/pr/1',
      'data:text/html,hi',
      'https://github.com@evil.example/pr/1',
      'https://user:pass@x.example/pr/1',
      `https://x.example/${'a'.repeat(4_100)}`,
      `https://x.example/${'\u00e9'.repeat(1_500)}`,
      '',
      42,
    ]) {
      refused(prLink);
    }
  });

  test('the message names what is wrong, never the link', () => {
    const err = refused('https://x.example/pr/1 [Approve](https://evil.example)\u001b]8;;x\u001b\\');
    assert.match(err.message, /^prLink: has U\+0020 at position 23; /);
    assert.ok(!err.message.includes('evil.example'), err.message);
    assert.ok(!err.message.includes('\u001b'), err.message);
    assert.match(refused('https://x.example/\u001b[31m').message, /U\+001B at position 19/);
    assert.ok(!refused('javascript:alert(1)').message.includes('alert'));
  });
});

describe('the job ID of an answer that is not a record', () => {
  test('a JSON object with a usable id, whatever else is wrong', () => {
    assert.equal(readableJobId(JSON.stringify({ id: 'job_7', status: 12 })), 'job_7');
  });

  test('the start of a cut JSON body, when the id comes first', () => {
    const body = JSON.stringify({ id: 'job_\u00e9"8', status: 'active', prLink: null });
    assert.equal(readableJobId(body.slice(0, 25)), 'job_\u00e9"8');
  });

  test('a cut JSON body whose top-level id arrived whole, wherever it stands', () => {
    assert.equal(readableJobId('{"status":"active","id":"job_9"'), 'job_9');
    assert.equal(readableJobId('{"source":{"id":"x","n":[1,{"id":"y"}]}, "id" : "job_\\"10","pr'), 'job_"10');
    assert.equal(readableJobId('{"prompt":"say \\"id\\":\\"no\\"","id":"job_11"'), 'job_11');
  });

  test('nothing when no id can be read for sure', () => {
    for (const text of [
      '<html><body>200 OK</body></html>',
      '{"source":{"id":"job_9"}}',
      '{"source":{"id":"job_9"',
      '{"prompt":"a \\"id\\":\\"job_9\\"',
      '{"status":"id","other":1',
      '{"id":"job_9',
      '{"id":42}',
      '{"id":""}',
      '{"id":".."}',
      '',
    ]) {
      assert.equal(readableJobId(text), null, text);
    }
  });
});
