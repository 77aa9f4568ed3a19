/**
 * A Temporal `PayloadCodec` that seals every payload with AES-256-GCM, so that prompts, agent job
 * records and results are not stored in plain text wherever Temporal keeps payloads.
 *
 * A sealed payload is the whole original payload (metadata and data, serialized as the
 * `temporal.api.common.v1.Payload` protobuf message) encrypted: `data` is a 12-byte random nonce,
 * the ciphertext, and the 16-byte GCM tag; `metadata` says `encoding: binary/encrypted` and
 * `encryption-key-id: <ID of the key that sealed it>`. That is the layout of Temporal's
 * encryption samples (TypeScript and Python), so a codec server or a caller in another language
 * written after them opens these payloads.
 *
 * Unsealed payloads are passed through by `decode`: histories written before the codec was turned
 * on must still replay, and the SDK hands the codec nothing else in the clear. Refusing a
 * workflow whose input arrived unsealed is a decision for the workflow, not for the codec (a codec
 * error fails the workflow task, which is retried, not the workflow): see
 * docs/decisions/0017-payload-codec.md.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { AgentJobError, ErrorName } from '../errors.js';
import type { KeyRing, KeyRingSource } from './key-ring.js';

/** The `encoding` of a sealed payload. */
export const SEALED_ENCODING = 'binary/encrypted';

/** The metadata key naming the key that sealed a payload. */
export const KEY_ID_METADATA_KEY = 'encryption-key-id';

/** GCM's recommended nonce length; random per payload (2^32 payloads per key keep collisions negligible). */
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

const { Payload: PayloadMessage } = proto.temporal.api.common.v1;

/** A sealed payload whose key ID the ring lacks, even after a fresh read of the key file. */
export class UnknownPayloadKeyError extends AgentJobError {
  constructor(readonly keyId: string) {
    super(
      ErrorName.UnknownPayloadKey,
      `a payload is sealed with key ${keyId}, which this process's payload key ring (TEMPORAL_PAYLOAD_KEYS_FILE) does not hold: add that key to the ring`,
    );
  }
}

/** A sealed payload that does not open: altered, truncated, or without a key ID. */
export class SealedPayloadError extends AgentJobError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorName.SealedPayload, message, options);
  }
}

const utf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
const text = (bytes: Uint8Array | null | undefined) =>
  bytes == null ? undefined : Buffer.from(bytes).toString('utf8');

/** The AES-256-GCM codec over the keys of `keys`. */
export class AesGcmPayloadCodec implements PayloadCodec {
  readonly #keys: KeyRingSource;

  constructor(keys: KeyRingSource) {
    this.#keys = keys;
  }

  // node:crypto's AES-GCM is synchronous (microseconds per kilobyte); the interface is a promise
  // for codecs that call a key service. A throw in the executor becomes the rejection.
  encode(payloads: Payload[]): Promise<Payload[]> {
    return new Promise((resolve) => {
      const { current } = this.#keys.current();
      resolve(payloads.map((payload) => seal(payload, current.id, current.key)));
    });
  }

  decode(payloads: Payload[]): Promise<Payload[]> {
    return new Promise((resolve) => resolve(payloads.map((payload) => this.#open(payload))));
  }

  #open(payload: Payload): Payload {
    const metadata = payload.metadata ?? {};
    if (text(metadata.encoding) !== SEALED_ENCODING) return payload;
    const keyId = text(metadata[KEY_ID_METADATA_KEY]);
    if (keyId === undefined) throw new SealedPayloadError(`a sealed payload has no ${KEY_ID_METADATA_KEY}`);
    // A key made current on another process first is in the file already: read it once before failing.
    const key = keyOf(this.#keys.current(), keyId) ?? keyOf(this.#keys.refreshed(), keyId);
    if (key === undefined) throw new UnknownPayloadKeyError(keyId);
    return open(payload.data ?? new Uint8Array(), keyId, key);
  }
}

function keyOf(ring: KeyRing, id: string): Buffer | undefined {
  return ring.keys.find((key) => key.id === id)?.key;
}

function seal(payload: Payload, keyId: string, key: Buffer): Payload {
  const plain = PayloadMessage.encode(payload).finish();
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  const data = Buffer.concat([nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  return {
    metadata: { encoding: utf8(SEALED_ENCODING), [KEY_ID_METADATA_KEY]: utf8(keyId) },
    data: new Uint8Array(data),
  };
}

function open(data: Uint8Array, keyId: string, key: Buffer): Payload {
  if (data.length < NONCE_BYTES + TAG_BYTES)
    throw new SealedPayloadError(`a payload sealed with key ${keyId} is too short to be sealed`);
  const bytes = Buffer.from(data);
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, NONCE_BYTES));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  let plain: Buffer;
  try {
    plain = Buffer.concat([
      decipher.update(bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES)),
      decipher.final(),
    ]);
  } catch (err) {
    throw new SealedPayloadError(
      `a payload sealed with key ${keyId} does not open: it was altered, or sealed with another key of that ID`,
      { cause: err },
    );
  }
  return PayloadMessage.decode(plain);
}
