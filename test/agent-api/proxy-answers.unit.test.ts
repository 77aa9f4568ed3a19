/**
 * What an egress proxy's answer means, read from undici's real errors: a local proxy (a node http
 * server) answers CONNECT, or a request in absolute form, with a fixed status, and the project's
 * dispatcher (createDispatcher with HTTPS_PROXY or HTTP_PROXY) meets it. The classification reads
 * undici's message text, so this pins it to the undici installed.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AgentApiClient, AgentApiError, createDispatcher } from '../../src/agent-api/index.js';
import { kindOfNetworkError } from '../../src/failure-policy/kinds.js';
import { POLICY } from '../../src/failure-policy/table.js';

/** The status the proxy answers next, to a CONNECT and to an absolute-form request alike. */
let answer = 503;
const seen: string[] = [];
const proxy = createServer((req, res) => {
  seen.push(`${req.method} ${req.url}`);
  res.writeHead(answer, { 'content-type': 'text/plain' }).end(`proxy says ${answer}`);
});
proxy.on('connect', (req, socket) => {
  seen.push(`CONNECT ${req.url}`);
  socket.end(`HTTP/1.1 ${answer} Proxy Answer\r\ncontent-length: 0\r\n\r\n`);
});
proxy.listen(0, '127.0.0.1');
await once(proxy, 'listening');
const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
after(() => proxy.close());

/** Not loopback (which is never proxied), and never resolved here: only the proxy is reached. */
const HTTPS_API = 'https://agent-api.example.test';
const HTTP_API = 'http://agent-api.example.test';

const tunnel = createDispatcher({}, { HTTPS_PROXY: proxyUrl });
const absolute = createDispatcher({}, { HTTP_PROXY: proxyUrl });
after(() => Promise.all([tunnel.close(), absolute.close()]));

function client(baseUrl: string): AgentApiClient {
  return new AgentApiClient({
    baseUrl,
    apiKey: 'mint_test',
    dispatcher: baseUrl.startsWith('https') ? tunnel : absolute,
  });
}

async function createFailure(baseUrl: string, status: number): Promise<AgentApiError> {
  answer = status;
  seen.length = 0;
  const err = await client(baseUrl)
    .createJob('p', 'a prompt', { idempotencyKey: 'k' })
    .then(
      () => assert.fail('the create succeeded'),
      (e: unknown) => e,
    );
  assert.ok(err instanceof AgentApiError, String(err));
  return err;
}

test('a CONNECT answered 502, 503 or 504 is ridden out on every call, create included, and is not ambiguous', async () => {
  for (const status of [502, 503, 504]) {
    const err = await createFailure(HTTPS_API, status);
    assert.deepEqual(seen, ['CONNECT agent-api.example.test:443'], 'one CONNECT, no request sent');
    assert.equal(err.type, 'NetworkError', err.message);
    assert.equal(err.retryable, true, err.message);
    assert.equal(err.requestMayHaveTakenEffect, false, err.message);
    for (const operation of ['createJob', 'getJob', 'sendMessage'] as const) {
      assert.equal(POLICY[err.kind][operation].bound, 'deadline', `${status} on ${operation}`);
      assert.equal(POLICY[err.kind][operation].mayHaveBeenApplied, false, `${status} on ${operation}`);
    }
    assert.match(err.message, new RegExp(`proxy answered ${status}`));
    assert.match(err.message, /to the API/);
    assert.match(err.message, /nothing was sent/);
    // A notice behind the same proxy is tried again, not dropped.
    assert.equal(POLICY[err.kind].delivery.bound, 'deadline');
  }
});

test('a CONNECT answered 407 stays final: ProxyRefused, nothing sent', async () => {
  const err = await createFailure(HTTPS_API, 407);
  assert.equal(err.type, 'ProxyRefused', err.message);
  assert.equal(err.retryable, false);
  assert.equal(err.requestMayHaveTakenEffect, false);
  assert.match(err.message, /407/);
  assert.equal(POLICY[err.kind].delivery.bound, 'final');
});

test('a CONNECT answered 403 (a policy refusal) stays final too', async () => {
  const err = await createFailure(HTTPS_API, 403);
  assert.equal(err.type, 'ProxyRefused', err.message);
  assert.equal(err.retryable, false);
});

test('a request in absolute form answered 502 or 504 may have been forwarded: today’s rules', async () => {
  for (const status of [502, 504]) {
    const err = await createFailure(HTTP_API, status);
    assert.deepEqual(seen, [`POST ${HTTP_API}/v2/agent/p/job`]);
    assert.equal(err.type, 'ServiceUnavailable', err.message);
    assert.equal(err.retryable, true);
    assert.equal(err.requestMayHaveTakenEffect, true, `${status} in absolute form may have been applied`);
  }
  const unavailable = await createFailure(HTTP_API, 503);
  assert.equal(unavailable.requestMayHaveTakenEffect, false);
  const auth = await createFailure(HTTP_API, 407);
  assert.equal(auth.type, 'ProxyRefused', auth.message);
  assert.equal(auth.retryable, false);
});

test("a notice's request meets the same classification, and its text names no API", async () => {
  answer = 503;
  const err = await request('https://hooks.example.test/notice', { method: 'POST', dispatcher: tunnel }).then(
    () => assert.fail('the request succeeded'),
    (e: unknown) => e,
  );
  const { kind, what } = kindOfNetworkError(err);
  assert.equal(POLICY[kind].delivery.bound, 'deadline', what);
  assert.match(what, /proxy answered 503/);
  assert.doesNotMatch(what, /API/);
});
