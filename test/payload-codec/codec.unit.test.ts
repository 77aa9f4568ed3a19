/**
 * The payload codec over a real key file laid out as Kubernetes mounts a Secret, on a fake clock:
 * sealing and opening, rotation without a restart, tampering, an unknown key ID, what passes
 * through unsealed, and what sealing costs in bytes. No server.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { inspect } from 'node:util';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import proto from '@temporalio/proto';
import {
  AesGcmPayloadCodec,
  FileKeyRing,
  FORMAT_METADATA_KEY,
  KEY_ID_METADATA_KEY,
  parseKeyRing,
  PayloadKeyFileError,
  SEALED_ENCODING,
  SealedPayloadError,
  staticKeyRing,
  UnknownPayloadKeyError,
} from '../../src/payload-codec/index.js';
import type { WatchedFileEvent } from '../../src/agent-api/watched-file.js';
import { SecretVolume } from '../secret-volume.js';

// These tests seal format 2, which a process of this release seals once told (decision 0023).
process.env.TEMPORAL_PAYLOAD_SEAL_FORMAT = '2';

const root = mkdtempSync(join(tmpdir(), 'payload-codec-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

const MARKER = 'marker-7f3a-do-not-store';

/** A fresh 32-byte key, base64 as the file holds it. */
const newKey = () => randomBytes(32).toString('base64');

/** The file's text for `keys` ([id, base64] pairs, the current one first). */
const ringText = (...keys: [string, string][]) =>
  `# payload keys, current first\n${keys.map(([id, key]) => `${id} ${key}`).join('\n')}\n`;

const str = (bytes: Uint8Array | null | undefined) => Buffer.from(bytes ?? new Uint8Array()).toString('utf8');

/** A codec on `volume`'s file, checked at most once per second of a fake clock. */
function codecOn(volume: SecretVolume) {
  const clock = { ms: 0 };
  const events: WatchedFileEvent[] = [];
  const ring = new FileKeyRing(volume.path, {
    checkIntervalMs: 1_000,
    now: () => clock.ms,
    onEvent: (e) => events.push(e),
  });
  return { codec: new AesGcmPayloadCodec(ring), clock, events };
}

const prompt = (): Payload => defaultPayloadConverter.toPayload({ prompt: `Fix the docs. ${MARKER}` });

test('a payload sealed and opened again is the payload it was, and its sealed form holds no plain text', async () => {
  const volume = new SecretVolume(root, ringText(['k1', newKey()]));
  const { codec } = codecOn(volume);
  const original = prompt();
  const [sealed] = await codec.encode([original]);
  assert.ok(sealed);
  assert.equal(str(sealed.metadata?.encoding), SEALED_ENCODING);
  assert.equal(str(sealed.metadata?.[KEY_ID_METADATA_KEY]), 'k1');
  assert.deepEqual(Object.keys(sealed.metadata ?? {}).sort(), [
    'encoding',
    FORMAT_METADATA_KEY,
    KEY_ID_METADATA_KEY,
  ]);
  assert.ok(!str(sealed.data).includes(MARKER), 'the sealed data does not show the marker');
  assert.ok(!str(sealed.data).includes('json/plain'), 'nor the original encoding');
  const [opened] = await codec.decode([sealed]);
  assert.deepEqual(defaultPayloadConverter.fromPayload(opened!), { prompt: `Fix the docs. ${MARKER}` });
  assert.equal(str(opened!.metadata?.encoding), 'json/plain');
  // Two seals of one payload differ: the nonce is random.
  const [again] = await codec.encode([original]);
  assert.notDeepEqual(again!.data, sealed.data);
});

test('after key 2 becomes current in the file, new payloads are sealed with it and key 1 payloads still open, without a restart', async () => {
  const [k1, k2] = [newKey(), newKey()];
  const volume = new SecretVolume(root, ringText(['k1', k1]));
  const { codec, clock, events } = codecOn(volume);
  const [byKey1] = await codec.encode([prompt()]);

  volume.swap(ringText(['k2', k2], ['k1', k1]));
  clock.ms = 999;
  const [stillKey1] = await codec.encode([prompt()]);
  assert.equal(
    str(stillKey1!.metadata?.[KEY_ID_METADATA_KEY]),
    'k1',
    'no check before the interval has passed',
  );
  clock.ms = 1_000;
  const [byKey2] = await codec.encode([prompt()]);
  assert.equal(str(byKey2!.metadata?.[KEY_ID_METADATA_KEY]), 'k2');
  assert.deepEqual(events, [{ kind: 'reloaded', path: volume.path }]);

  const opened = await codec.decode([byKey1!, byKey2!]);
  assert.deepEqual(
    opened.map((p) => defaultPayloadConverter.fromPayload(p)),
    [{ prompt: `Fix the docs. ${MARKER}` }, { prompt: `Fix the docs. ${MARKER}` }],
  );
});

test('a process meeting a key ID it lacks reads its file at once, before the interval, and opens the payload', async () => {
  const [k1, k2] = [newKey(), newKey()];
  const writer = codecOn(new SecretVolume(root, ringText(['k2', k2], ['k1', k1])));
  const readerVolume = new SecretVolume(root, ringText(['k1', k1]));
  const reader = codecOn(readerVolume);
  const [byKey2] = await writer.codec.encode([prompt()]);
  // The Secret reached the reader's mount, but its next check is up to a second away.
  readerVolume.swap(ringText(['k2', k2], ['k1', k1]));
  const [opened] = await reader.codec.decode([byKey2!]);
  assert.deepEqual(defaultPayloadConverter.fromPayload(opened!), { prompt: `Fix the docs. ${MARKER}` });
});

test('a payload sealed with a key the ring lacks fails naming the key ID, never a key', async () => {
  const [k1, k9] = [newKey(), newKey()];
  const [sealed] = await new AesGcmPayloadCodec(
    staticKeyRing([{ id: 'k9', key: Buffer.from(k9, 'base64') }]),
  ).encode([prompt()]);
  const { codec } = codecOn(new SecretVolume(root, ringText(['k1', k1])));
  await assert.rejects(codec.decode([sealed!]), (err: unknown) => {
    assert.ok(err instanceof UnknownPayloadKeyError);
    assert.equal(err.name, 'UnknownPayloadKeyError');
    assert.equal(err.keyId, 'k9');
    assert.match(err.message, /sealed with key k9/);
    assert.match(err.message, /TEMPORAL_PAYLOAD_KEYS_FILE/);
    for (const secret of [k1, k9]) assert.ok(!inspect(err).includes(secret), 'no key in the error');
    return true;
  });
});

test('an altered payload does not open, and says why: its data, tag or nonce, its key ID (same key or not), its format, its length', async () => {
  const k1 = newKey();
  // k1 again under the ID k1-copy: relabelling opens only if the key ID is authenticated in nothing.
  const { codec } = codecOn(new SecretVolume(root, ringText(['k1', k1], ['k1-copy', k1], ['k2', newKey()])));
  const heard: [string, string | null, unknown][] = [];
  const listening = new AesGcmPayloadCodec(
    staticKeyRing([{ id: 'k1', key: Buffer.from(k1, 'base64') }]),
    (err, context) => heard.push([err.reason, err.keyId, context]),
  );
  const [sealed] = await codec.encode([prompt()]);
  const data = sealed!.data!;
  const flipped = (at: number) => {
    const copy = Uint8Array.from(data);
    copy[at]! ^= 1;
    return { metadata: sealed!.metadata, data: copy };
  };
  const withMetadata = (entries: Record<string, string | undefined>) => ({
    metadata: Object.fromEntries(
      Object.entries({ ...sealed!.metadata, ...entries }).flatMap(([k, v]) =>
        v === undefined ? [] : [[k, typeof v === 'string' ? Buffer.from(v) : v]],
      ),
    ),
    data,
  });
  const longId = 'x'.repeat(1_000_000);
  for (const [altered, reason, keyId] of [
    [flipped(20), 'authentication-failed', 'k1'], // ciphertext
    [flipped(data.length - 1), 'authentication-failed', 'k1'], // tag
    [flipped(0), 'authentication-failed', 'k1'], // nonce
    [withMetadata({ [KEY_ID_METADATA_KEY]: 'k1-copy' }), 'authentication-failed', 'k1-copy'],
    [withMetadata({ [KEY_ID_METADATA_KEY]: 'k2' }), 'authentication-failed', 'k2'],
    [withMetadata({ [FORMAT_METADATA_KEY]: undefined }), 'authentication-failed', 'k1'],
    [withMetadata({ [FORMAT_METADATA_KEY]: '9' }), 'malformed', 'k1'],
    [withMetadata({ [KEY_ID_METADATA_KEY]: undefined }), 'malformed', null],
    [withMetadata({ [KEY_ID_METADATA_KEY]: longId }), 'malformed', null],
    [{ metadata: sealed!.metadata, data: data.subarray(0, 20) }, 'truncated', 'k1'],
  ] as const) {
    await assert.rejects(codec.decode([altered]), (err: unknown) => {
      assert.ok(err instanceof SealedPayloadError);
      assert.deepEqual([err.reason, err.keyId], [reason, keyId]);
      assert.ok(!err.message.includes(longId.slice(0, 100)), 'a key ID that is not one is not named');
      return true;
    });
  }
  const context = { type: 'workflow', namespace: 'default', workflowId: 'wf-1' } as const;
  await assert.rejects(listening.decode([flipped(20)], context));
  await assert.rejects(listening.decode([withMetadata({ [KEY_ID_METADATA_KEY]: 'k9' })]));
  assert.deepEqual(heard, [
    ['authentication-failed', 'k1', context],
    ['unknown-key', 'k9', undefined],
  ]);
});

test('unsealed payloads pass through decode unchanged (histories from before the codec); encode seals every payload', async () => {
  const { codec } = codecOn(new SecretVolume(root, ringText(['k1', newKey()])));
  const plain = [
    prompt(),
    defaultPayloadConverter.toPayload(undefined),
    defaultPayloadConverter.toPayload(null),
  ];
  assert.deepEqual(await codec.decode(plain), plain);
  assert.deepEqual(await codec.decode([]), []);
  const sealed = await codec.encode(plain);
  assert.deepEqual(
    sealed.map((p) => str(p.metadata?.encoding)),
    [SEALED_ENCODING, SEALED_ENCODING, SEALED_ENCODING],
  );
  assert.deepEqual(
    (await codec.decode(sealed)).map((p) => defaultPayloadConverter.fromPayload(p)),
    plain.map((p) => defaultPayloadConverter.fromPayload(p)),
  );
});

test('sealing adds a fixed number of bytes per payload: 28 of AES-GCM, the new metadata, and the framing', async (t) => {
  const { codec } = codecOn(new SecretVolume(root, ringText(['2026-11', newKey()])));
  const size = (p: Payload) => proto.temporal.api.common.v1.Payload.encode(p).finish().length;
  const overheads: number[] = [];
  for (const bytes of [10, 1_000, 100_000, 2_000_000]) {
    const payload = defaultPayloadConverter.toPayload('x'.repeat(bytes));
    const [sealed] = await codec.encode([payload]);
    overheads.push(size(sealed!) - size(payload));
  }
  t.diagnostic(`overhead per payload (bytes, key ID of 7 characters): ${overheads.join(', ')}`);
  // Nonce and tag (28), the sealed metadata (`encoding: binary/encrypted` 30, the key ID 23 + its
  // length, `encryption-format: 2` 24), the inner payload's framing as the data field (1 + a
  // varint of its length).
  for (const overhead of overheads)
    assert.ok(
      overhead >= 28 + 30 + (23 + 7) + 24 + 2 && overhead <= 28 + 30 + (23 + 7) + 24 + 4,
      `${overhead}`,
    );
});

test('a key file is checked whole: its reasons name a line and a key ID, never key material', () => {
  const key = newKey();
  assert.ok('value' in parseKeyRing(ringText(['a', key])));
  const reasons = [
    '',
    '# only a comment\n',
    `k1 ${key} extra`,
    `k1 ${randomBytes(16).toString('base64')}`,
    `k1 ${key}\nk1 ${newKey()}`,
    `bad/id ${key}`,
    `k1 not*base64`,
  ].map((text) => {
    const parsed = parseKeyRing(text);
    assert.ok('reason' in parsed, text);
    return parsed.reason;
  });
  assert.deepEqual(reasons, [
    'it holds no key',
    'it holds no key',
    'line 1: expected "<key ID> <base64 of 32 bytes>"',
    'key k1 is 16 bytes, not 32',
    'key ID k1 appears twice',
    'line 1: a key ID is 1 to 64 of A-Z a-z 0-9 . _ -',
    'line 1: key k1 is not base64',
  ]);
  for (const reason of reasons) assert.ok(!reason.includes(key));
  const volume = new SecretVolume(root, `k1 ${key.slice(0, 10)}`);
  assert.throws(
    () => new FileKeyRing(volume.path),
    (err: unknown) =>
      err instanceof PayloadKeyFileError &&
      err.message.includes(volume.path) &&
      !err.message.includes(key.slice(0, 10)),
  );
});
