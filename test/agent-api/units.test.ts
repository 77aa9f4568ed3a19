/** Unit tests that need no server: Retry-After, the record schema, and the failure tables. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  AgentApiClient,
  AgentApiError,
  InvalidAgentJobRecordError,
  parseAgentJobRecord,
  parseRetryAfter,
  RECORD_BUDGET_BYTES,
} from '../../src/agent-api/index.js';
import { FailureKind, kindOfNetworkError, kindOfStatus } from '../../src/failure-policy/kinds.js';
import { verdictOf } from '../../src/failure-policy/table.js';
import { FailureType } from '../../src/contract.js';

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');

  test('delta-seconds', () => {
    assert.equal(parseRetryAfter('0', now), 0);
    assert.equal(parseRetryAfter('120', now), 120_000);
    assert.equal(parseRetryAfter(' 5 ', now), 5_000);
  });

  test('HTTP dates in all three forms', () => {
    assert.equal(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Thursday, 01-Jan-26 00:00:30 GMT', now), 30_000);
    assert.equal(parseRetryAfter('Thu Jan  1 00:00:30 2026', now) !== null, true);
  });

  test('a date in the past clamps to 0', () => {
    assert.equal(parseRetryAfter('Wed, 31 Dec 2025 23:59:00 GMT', now), 0);
  });

  test('absent or garbage is null', () => {
    for (const value of [undefined, '', 'soon', '-5', '1.5', 'NaN', '1e3', 'Thu, garbage']) {
      assert.equal(parseRetryAfter(value, now), null, String(value));
    }
  });
});

describe('parseAgentJobRecord', () => {
  const record = {
    id: 'job_1',
    status: 'completed',
    source: { repository: 'org/docs', ref: 'main' },
    model: 'm',
    prLink: 'https://github.com/org/docs/pull/1',
    createdAt: '2026-01-01T00:00:00Z',
    archivedAt: null,
  };

  test('a full record passes unchanged', () => {
    assert.deepEqual(parseAgentJobRecord(record), record);
  });

  test('unknown fields are kept; undocumented statuses pass; a missing prLink is null', () => {
    const parsed = parseAgentJobRecord({
      id: 'j',
      status: 'queued',
      extra: { a: 1 },
      source: { repository: 'r', x: 1 },
    });
    assert.equal(parsed.status, 'queued');
    assert.equal(parsed.prLink, null);
    assert.deepEqual(parsed.extra, { a: 1 });
    assert.deepEqual(parsed.source, { repository: 'r', x: 1 });
  });

  test('null optional fields are read as absent', () => {
    const parsed = parseAgentJobRecord({
      id: 'j',
      status: 'active',
      model: null,
      source: null,
      prLink: null,
    });
    assert.equal(parsed.model, undefined);
    assert.equal(parsed.source, undefined);
  });

  test('what is not a record is refused with the problem named', () => {
    const bad: unknown[] = [
      null,
      [],
      'text',
      { status: 'active' },
      { id: '', status: 'active' },
      { id: 'j', status: '' },
      { id: 'j', status: 'completed', prLink: 'github.com/org/docs/pull/1' },
      { id: 'j', status: 'completed', prLink: 'ftp://example.com/x' },
      { id: 'j', status: 'completed', prLink: 42 },
    ];
    for (const body of bad) {
      assert.throws(() => parseAgentJobRecord(body), InvalidAgentJobRecordError, JSON.stringify(body));
    }
    assert.throws(() => parseAgentJobRecord({ id: 'j', status: 'x', prLink: 'nope' }), /prLink/);
    // An optional field of the wrong type is drift, not a reason to refuse the record.
    assert.deepEqual(parseAgentJobRecord({ id: 'j', status: 'active', archivedAt: 5 }), {
      id: 'j',
      status: 'active',
      prLink: null,
    });
  });

  test('unknown fields are kept within the record budget; past it the largest go first', () => {
    const small = { id: 'j', status: 'active', prLink: null, note: 'kept' };
    assert.deepEqual(parseAgentJobRecord(small), small);
    const parsed = parseAgentJobRecord({
      ...small,
      huge: 'x'.repeat(RECORD_BUDGET_BYTES),
      source: { repository: 'r', ref: 'main', blob: 'y'.repeat((RECORD_BUDGET_BYTES * 3) / 4) },
      trace: 'z'.repeat(RECORD_BUDGET_BYTES / 4),
    });
    assert.equal(parsed.huge, undefined, 'the largest unknown field is dropped');
    assert.equal(parsed.source?.blob, undefined);
    assert.equal(parsed.source?.repository, 'r');
    assert.equal(parsed.note, 'kept');
    assert.equal((parsed.trace as string).length, RECORD_BUDGET_BYTES / 4, 'what fits stays');
    assert.ok(JSON.stringify(parsed).length <= RECORD_BUDGET_BYTES);
  });

  test('documented fields are bounded: a megabyte ID is not a record', () => {
    assert.throws(
      () => parseAgentJobRecord({ id: 'j'.repeat(1_000_001), status: 'active', prLink: null }),
      InvalidAgentJobRecordError,
    );
  });
});

describe('what the client reports of a status or a network error', () => {
  const rows: [number, 'createJob' | 'getJob', FailureType, boolean][] = [
    [400, 'createJob', FailureType.InvalidRequest, false],
    [422, 'createJob', FailureType.InvalidRequest, false],
    [401, 'getJob', FailureType.Unauthorized, false],
    [403, 'getJob', FailureType.Unauthorized, false],
    [404, 'createJob', FailureType.ProjectNotFound, false],
    [404, 'getJob', FailureType.JobNotFound, false],
    [408, 'createJob', FailureType.ServiceUnavailable, false],
    [425, 'createJob', FailureType.ServiceUnavailable, false],
    [429, 'createJob', FailureType.RateLimited, false],
    [500, 'createJob', FailureType.ServiceUnavailable, true],
    [502, 'createJob', FailureType.ServiceUnavailable, true],
    [503, 'createJob', FailureType.ServiceUnavailable, false],
    [504, 'createJob', FailureType.ServiceUnavailable, true],
    [409, 'createJob', FailureType.InvalidRequest, false],
    [507, 'createJob', FailureType.ServiceUnavailable, true],
    [302, 'createJob', FailureType.Redirected, false],
    [308, 'getJob', FailureType.Redirected, false],
    [303, 'createJob', FailureType.UnexpectedResponse, true],
    [304, 'getJob', FailureType.UnexpectedResponse, true],
  ];
  for (const [status, operation, type, ambiguous] of rows) {
    test(`${status} on ${operation} → ${type}${ambiguous ? ', ambiguous' : ''}`, () => {
      const verdict = verdictOf(kindOfStatus(status), operation);
      assert.equal(verdict.type, type);
      assert.equal(verdict.mayHaveBeenApplied, ambiguous);
      assert.equal(verdict.readsRetryAfter, status === 429 || status === 503);
    });
  }

  test('network codes: whether the request can have left', () => {
    const code = (c: string) => Object.assign(new Error(c), { code: c });
    const of = (err: unknown) => {
      const verdict = verdictOf(kindOfNetworkError(err).kind, 'createJob');
      return [verdict.type, verdict.mayHaveBeenApplied];
    };
    assert.deepEqual(of(code('ECONNREFUSED')), [FailureType.NetworkError, false]);
    assert.deepEqual(of(code('ENOTFOUND')), [FailureType.NetworkError, false]);
    assert.deepEqual(of(code('UND_ERR_CONNECT_TIMEOUT')), [FailureType.RequestTimeout, false]);
    assert.deepEqual(of(code('UND_ERR_HEADERS_TIMEOUT')), [FailureType.RequestTimeout, true]);
    assert.deepEqual(of(code('UND_ERR_BODY_TIMEOUT')), [FailureType.RequestTimeout, true]);
    assert.deepEqual(of(code('ECONNRESET')), [FailureType.NetworkError, true]);
    assert.deepEqual(of(code('UND_ERR_SOCKET')), [FailureType.NetworkError, true]);
    assert.deepEqual(of(new Error('what')), [FailureType.NetworkError, true]);
    for (const tls of ['DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_HAS_EXPIRED', 'ERR_TLS_CERT_ALTNAME_INVALID']) {
      assert.deepEqual(of(code(tls)), [FailureType.TlsHandshakeFailed, false], tls);
    }
    const aggregate = new AggregateError([code('ECONNREFUSED'), code('ECONNREFUSED')]);
    assert.deepEqual(of(aggregate), [FailureType.NetworkError, false]);
  });

  test('an error is retryable unless the policy says it is final', () => {
    const make = (kind: FailureKind, operation: 'getJob' | 'createJob' = 'getJob') =>
      new AgentApiError({ kind, operation, status: null, retryAfterMs: null, message: 'm' });
    assert.equal(make(FailureKind.NotFound, 'createJob').retryable, false);
    assert.equal(make(FailureKind.NotFound).retryable, true);
    assert.equal(make(FailureKind.NotARecord).retryable, true);
    assert.equal(make(FailureKind.NotARecord, 'createJob').retryable, false);
    assert.equal(make(FailureKind.KeyRefused).retryable, true);
    assert.equal(make(FailureKind.TlsRejected, 'createJob').retryable, false);
    assert.equal(make(FailureKind.Malformed).name, 'AgentApiError');
  });
});

describe('arguments', () => {
  test('a base URL that is not http(s) is refused', () => {
    assert.throws(() => new AgentApiClient({ baseUrl: 'api.mintlify.com', apiKey: 'k' }), TypeError);
    assert.throws(() => new AgentApiClient({ baseUrl: 'ftp://api.mintlify.com', apiKey: 'k' }), TypeError);
  });

  test('an empty or dot-segment project or job ID fails as InvalidRequest before any request', async () => {
    // Port 9 (discard) is never contacted: the check comes first.
    const client = new AgentApiClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k' });
    await assert.rejects(client.getJob('', 'j'), {
      type: FailureType.InvalidRequest,
      status: null,
      retryable: false,
    });
    await assert.rejects(client.getJob('p', ''), { type: FailureType.InvalidRequest });
    await assert.rejects(client.getJob('..', 'j'), { type: FailureType.InvalidRequest });
    await assert.rejects(client.sendMessage('p', '.', 'x'), { type: FailureType.InvalidRequest });
    await assert.rejects(client.createJob('p', 'x', { idempotencyKey: 'has space' }), {
      type: FailureType.InvalidRequest,
    });
  });
});
