/**
 * TEMPORAL_API_KEY_FILE rotated without a restart, at the seam the Temporal dev server cannot show
 * (it checks no key): the worker's follower over a real key file swapped by rename, and a real
 * client `Connection` against a local HTTP/2 endpoint that records each request's Authorization
 * header. No Temporal server.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import { Connection } from '@temporalio/client';
import type { ApiKeySource } from '../src/agent-api/api-key.js';
import { createJsonLogger, logKeyFileEvents } from '../src/observability/logger.js';
import { clientConnectionOptions, followApiKey, temporalApiKeySource } from '../src/temporal-api-key.js';
import { SecretVolume } from './secret-volume.js';

const root = mkdtempSync(join(tmpdir(), 'temporal-key-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

function newKey(): string {
  return `temporal-key-${randomUUID()}`;
}

/** Replaces `path` as a writer that never shows half a file does: a new file renamed over it. */
function swapByRename(path: string, key: string): void {
  const next = `${path}.${randomUUID()}.tmp`;
  writeFileSync(next, `${key}\n`);
  renameSync(next, path);
}

/** Waits until `check` holds, every 10 ms, or fails after 5 s (the file is checked once a second). */
async function waitUntil(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The worker's JSON log lines, as it writes them for TEMPORAL_API_KEY_FILE's events. */
function capturedLog(): { lines: string[]; onEvent: ReturnType<typeof logKeyFileEvents> } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  const logger = createJsonLogger('DEBUG', stream);
  return { lines, onEvent: logKeyFileEvents(logger, 'TEMPORAL_API_KEY_FILE', 'Temporal API key') };
}

/** A connection like the worker's `NativeConnection`, recording each key it is given. */
function recordingConnection(): { keys: string[]; setApiKey: (key: string) => Promise<void> } {
  const keys: string[] = [];
  return {
    keys,
    setApiKey: (key) => {
      keys.push(key);
      return Promise.resolve();
    },
  };
}

/** For checks that must not fail. */
function failOnError(err: unknown): void {
  assert.fail(`a check failed: ${String(err)}`);
}

test('the worker follows a key file renamed over: setApiKey once per new key, one log line each, no key in it', async () => {
  const [first, second, third] = [newKey(), newKey(), newKey()];
  const path = join(root, 'temporal-api-key');
  writeFileSync(path, `${first}\n`);
  const log = capturedLog();
  const source = temporalApiKeySource(path, log.onEvent);
  assert.ok(source !== null);
  const connection = recordingConnection();
  const errors: unknown[] = [];
  const follower = followApiKey(source, connection, source.current(), {
    intervalMs: 20,
    onError: (err) => errors.push(err),
  });
  try {
    assert.equal(await follower.check(), false, 'nothing to give while the key is the one connected with');
    swapByRename(path, second);
    await waitUntil(() => connection.keys.length === 1, 'the second key');
    swapByRename(path, third);
    await waitUntil(() => connection.keys.length === 2, 'the third key');
    assert.equal(await follower.check(), false);
  } finally {
    follower.stop();
  }
  assert.deepEqual(connection.keys, [second, third]);
  assert.deepEqual(errors, []);
  const messages = log.lines.map((line) => (JSON.parse(line) as { msg: string; path: string }).msg);
  assert.deepEqual(messages, [
    'Temporal API key reloaded from TEMPORAL_API_KEY_FILE',
    'Temporal API key reloaded from TEMPORAL_API_KEY_FILE',
  ]);
  assert.ok(log.lines.every((line) => line.includes(path)));
  for (const key of [first, second, third]) {
    assert.ok(!log.lines.some((line) => line.includes(key)), 'no key in the log');
  }
});

test('the worker follows a Kubernetes Secret volume, whose symlink swap a file watcher would miss', async () => {
  const [first, second] = [newKey(), newKey()];
  const volume = new SecretVolume(root, `${first}\n`);
  const source = temporalApiKeySource(volume.path);
  assert.ok(source !== null);
  const connection = recordingConnection();
  const follower = followApiKey(source, connection, first, { intervalMs: 20, onError: failOnError });
  try {
    volume.swap(second);
    await waitUntil(() => connection.keys.length > 0, 'the swapped key');
  } finally {
    follower.stop();
  }
  assert.deepEqual(connection.keys, [second]);
});

/** A source whose key a test sets. */
function settableSource(key: string): ApiKeySource & { key: string } {
  const source = {
    key,
    current: () => source.key,
    afterRefusal: () => null,
    known: () => [source.key],
  };
  return source;
}

/** A connection whose first `failures` calls of setApiKey fail; `given` holds every key it was given. */
function busyConnection(failures: number): { given: string[]; setApiKey(key: string): Promise<void> } {
  const given: string[] = [];
  return {
    given,
    setApiKey: (key: string) => {
      given.push(key);
      if (failures-- > 0) return Promise.reject(new Error('the connection is busy'));
      return Promise.resolve();
    },
  };
}

test('a setApiKey that fails is given again at the next check; two checks at once give the key once', async () => {
  const source = settableSource('key-one');
  const connection = busyConnection(1);
  const { given } = connection;
  // An hour: only the checks this test makes run.
  const follower = followApiKey(source, connection, 'key-one', {
    intervalMs: 3_600_000,
    onError: failOnError,
  });
  try {
    source.key = 'key-two';
    await assert.rejects(follower.check(), /the connection is busy/);
    const [a, b] = await Promise.all([follower.check(), follower.check()]);
    assert.deepEqual([a, b], [true, true]);
    assert.equal(await follower.check(), false);
  } finally {
    follower.stop();
  }
  assert.deepEqual(given, ['key-two', 'key-two']);
});

test('a failed periodic check goes to onError, and the key is given at a later one', async () => {
  const source = settableSource('key-one');
  const errors: unknown[] = [];
  const connection = busyConnection(1);
  const { given } = connection;
  const follower = followApiKey(source, connection, 'key-one', {
    intervalMs: 10,
    onError: (err) => errors.push(err),
  });
  try {
    source.key = 'key-two';
    await waitUntil(() => given.length === 2, 'the second attempt');
  } finally {
    follower.stop();
  }
  assert.equal(errors.length, 1);
  assert.match(String(errors[0]), /the connection is busy/);
});

/**
 * A plain-text HTTP/2 endpoint that answers every gRPC call UNIMPLEMENTED and records the
 * Authorization header it came with: what a client `Connection` sends, without a server that
 * checks keys.
 */
async function recordingEndpoint(): Promise<{ address: string; seen: string[]; server: Http2Server }> {
  const seen: string[] = [];
  const server = createServer();
  server.on('stream', (stream, headers) => {
    seen.push(String(headers.authorization));
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '12', 'grpc-message': 'test' }));
    stream.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { address: `127.0.0.1:${port}`, seen, server };
}

test('a client Connection sends the file\u2019s current key with each request after a rename', async () => {
  const [first, second] = [newKey(), newKey()];
  const path = join(root, 'client-key');
  writeFileSync(path, first);
  const endpoint = await recordingEndpoint();
  const source = temporalApiKeySource(path);
  const options = clientConnectionOptions(
    // What loadTemporalSettings gives for the file, with TLS off for the plain-text endpoint.
    { address: endpoint.address, apiKey: first, tls: false },
    source,
  );
  const connection = Connection.lazy(options);
  const call = () => connection.workflowService.getSystemInfo({}).catch(() => undefined);
  try {
    await call();
    assert.deepEqual(endpoint.seen, [`Bearer ${first}`]);
    swapByRename(path, second);
    await waitUntil(async () => {
      await call();
      return endpoint.seen.at(-1) === `Bearer ${second}`;
    }, 'a request with the new key');
  } finally {
    await connection.close();
    await new Promise((resolve) => endpoint.server.close(resolve));
  }
  assert.ok(endpoint.seen.every((header) => header === `Bearer ${first}` || header === `Bearer ${second}`));
});

test('without a key file the connection options are the configured ones', () => {
  const connectionOptions = { address: 'localhost:7233', apiKey: 'fixed' };
  assert.equal(temporalApiKeySource(null), null);
  assert.equal(clientConnectionOptions(connectionOptions, null), connectionOptions);
});
