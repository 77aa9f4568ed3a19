/**
 * The mark that lets a keyed worker refuse an input that arrived unsealed (decision 0021): the
 * codec marks on decode what arrived unsealed and nothing sealed, never seals a mark, and the
 * workflow bundle's converter turns the mark into one `arrivedUnsealed` reads. No server.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { defaultPayloadConverter } from '@temporalio/common';
import {
  AesGcmPayloadCodec,
  staticKeyRing,
  UnsealedMarkingCodec,
  payloadDataConverter,
} from '../../src/payload-codec/index.js';
import {
  arrivedUnsealed,
  payloadConverter,
  UNSEALED_METADATA_KEY,
} from '../../src/workflows/unsealed-input.js';

const codec = new UnsealedMarkingCodec(
  new AesGcmPayloadCodec(staticKeyRing([{ id: 'k1', key: randomBytes(32) }])),
);
const input = { projectId: 'docs', prompt: 'Document the billing export' };

test('an input that arrived unsealed opens, marked; the converter gives the same value, marked', async () => {
  const [decoded] = await codec.decode([defaultPayloadConverter.toPayload(input)]);
  assert.ok(decoded?.metadata?.[UNSEALED_METADATA_KEY], 'marked');
  const value = payloadConverter.fromPayload(decoded);
  assert.deepEqual(value, input);
  assert.equal(arrivedUnsealed(value), true);
  // The mark is not the value's: it is not serialized when the value is sent on.
  assert.deepEqual(Object.keys(value as object), ['projectId', 'prompt']);
  assert.equal(JSON.stringify(value), JSON.stringify(input));
});

test('a sealed input opens unmarked, and so does anything without a ring', async () => {
  const [sealed] = await codec.encode([defaultPayloadConverter.toPayload(input)]);
  const [decoded] = await codec.decode([sealed!]);
  assert.equal(decoded?.metadata?.[UNSEALED_METADATA_KEY], undefined);
  assert.equal(arrivedUnsealed(payloadConverter.fromPayload(decoded!)), false);
  // No ring: no codec, the converter sees the payload as sent.
  assert.equal(payloadDataConverter(null), undefined);
  assert.equal(
    arrivedUnsealed(payloadConverter.fromPayload(defaultPayloadConverter.toPayload(input))),
    false,
  );
});

test('a mark is never sealed: a marked payload sent on opens unmarked', async () => {
  const [marked] = await codec.decode([defaultPayloadConverter.toPayload(input)]);
  const [resealed] = await codec.encode([marked!]);
  const [decoded] = await codec.decode([resealed!]);
  assert.equal(decoded?.metadata?.[UNSEALED_METADATA_KEY], undefined);
  assert.equal(arrivedUnsealed(payloadConverter.fromPayload(decoded!)), false);
});

test('values that cannot carry a mark decode as the default converter does', async () => {
  for (const value of ['a follow-up prompt', 42, null, [1, 2]]) {
    const [decoded] = await codec.decode([defaultPayloadConverter.toPayload(value)]);
    assert.deepEqual(payloadConverter.fromPayload(decoded!), value);
  }
});
