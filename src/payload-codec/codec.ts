/**
 * A Temporal `PayloadCodec` that seals every payload with AES-256-GCM, so that prompts, agent job
 * records and results are not stored in plain text wherever Temporal keeps payloads. The sealed
 * layout is Temporal's encryption samples' (docs/decisions/0017-payload-codec.md); format 2 adds
 * the key ID and the encoding as authenticated data, and a payload without its format entry is
 * format 1 and opens as it always did (docs/decisions/0023-sealed-payloads-bound-and-named.md).
 *
 * Unsealed payloads are passed through by `decode`: histories written before the codec was turned
 * on must still replay, and the SDK hands the codec nothing else in the clear. Refusing a workflow
 * whose input arrived unsealed is the workflow's decision, not the codec's (a codec error fails the
 * workflow task, which is retried): decision 0021.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import proto from '@temporalio/proto';
import { AgentJobError, ErrorName } from '../errors.js';
import { isKeyId, type KeyRing, type KeyRingSource } from './key-ring.js';

/** The `encoding` of a sealed payload. */
export const SEALED_ENCODING = 'binary/encrypted';

/** The metadata key naming the key that sealed a payload. */
export const KEY_ID_METADATA_KEY = 'encryption-key-id';

/** The metadata key of the format; absent on format 1 (no authenticated data). */
export const FORMAT_METADATA_KEY = 'encryption-format';

/** Format 2: key ID and encoding authenticated. */
const FORMAT = '2';

/**
 * The format new payloads are sealed in: 1 unless TEMPORAL_PAYLOAD_SEAL_FORMAT=2, because 1.2.0
 * opens no format 2 payload (decision 0023, "Upgrading from 1.2.0").
 */
function sealFormat(): '1' | '2' {
  const value = process.env.TEMPORAL_PAYLOAD_SEAL_FORMAT ?? '1';
  if (value === '1' || value === '2') return value;
  throw new Error('TEMPORAL_PAYLOAD_SEAL_FORMAT must be 1 or 2');
}

/** A sealed payload's key ID, or null when it has none or one no ring allows (the sender's text: never named). */
export function keyIdOf(metadata: Payload['metadata']): string | null {
  const keyId = text(metadata?.[KEY_ID_METADATA_KEY]);
  return keyId !== undefined && isKeyId(keyId) ? keyId : null;
}

/** Whether `payload` is sealed: its encoding says so. */
export function isSealed(payload: Payload): boolean {
  return text(payload.metadata?.encoding) === SEALED_ENCODING;
}

/** GCM's recommended nonce length; random per payload (2^32 payloads per key keep collisions negligible). */
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

const { Payload: PayloadMessage } = proto.temporal.api.common.v1;

const utf8 = (text: string) => new Uint8Array(Buffer.from(text, 'utf8'));
const text = (bytes: Uint8Array | null | undefined) =>
  bytes == null ? undefined : Buffer.from(bytes).toString('utf8');

/** Why a sealed payload does not open: the `reason` of a {@link SealedPayloadError}. */
export type UnopenedReason = 'unknown-key' | 'authentication-failed' | 'truncated' | 'malformed';

/**
 * A sealed payload that does not open: altered, truncated, sealed with another key of its ID, or
 * without a usable key ID or format. `keyId` is null when the payload's is missing or not a key ID
 * (never named then: it is the sender's text).
 */
export class SealedPayloadError extends AgentJobError {
  constructor(
    readonly reason: UnopenedReason,
    readonly keyId: string | null,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(reason === 'unknown-key' ? ErrorName.UnknownPayloadKey : ErrorName.SealedPayload, message, options);
  }
}

/**
 * The names of the errors on a payload that does not open: read by name where the error may come
 * from another copy of this module (the SDK `require()`s the failure converter) or another codec.
 */
export const UNOPENED_ERROR_NAMES: ReadonlySet<string> = new Set([
  ErrorName.SealedPayload,
  ErrorName.UnknownPayloadKey,
]);

/** A sealed payload whose key ID the ring lacks, even after a fresh read of the key file. */
export class UnknownPayloadKeyError extends SealedPayloadError {
  constructor(keyId: string) {
    super(
      'unknown-key',
      keyId,
      `a payload is sealed with key ${keyId}, which this process's payload key ring (TEMPORAL_PAYLOAD_KEYS_FILE) does not hold: add that key to the ring`,
    );
  }
}

/** Hears of each sealed payload that does not open, with the SDK's context (which workflow) where it gives one. */
export type OnUnopened = (err: SealedPayloadError, context: SerializationContext | undefined) => void;

/** The AES-256-GCM codec over the keys of `keys`. */
export class AesGcmPayloadCodec implements PayloadCodec {
  readonly #keys: KeyRingSource;
  readonly #onUnopened: OnUnopened | undefined;
  readonly #bound: boolean;

  constructor(keys: KeyRingSource, onUnopened?: OnUnopened) {
    this.#keys = keys;
    this.#onUnopened = onUnopened;
    this.#bound = sealFormat() === FORMAT;
  }

  // node:crypto's AES-GCM is synchronous (microseconds per kilobyte); the interface is a promise
  // for codecs that call a key service. A throw in the executor becomes the rejection.
  encode(payloads: Payload[]): Promise<Payload[]> {
    return new Promise((resolve) => {
      const { current } = this.#keys.current();
      resolve(payloads.map((payload) => seal(payload, current.id, current.key, this.#bound)));
    });
  }

  decode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    return new Promise((resolve) => {
      try {
        resolve(payloads.map((payload) => this.#open(payload)));
      } catch (err) {
        if (err instanceof SealedPayloadError) this.#onUnopened?.(err, context);
        throw err;
      }
    });
  }

  #open(payload: Payload): Payload {
    if (!isSealed(payload)) return payload;
    const metadata = payload.metadata ?? {};
    const keyId = keyIdOf(metadata);
    if (keyId === null)
      throw new SealedPayloadError(
        'malformed',
        null,
        `a sealed payload has no usable ${KEY_ID_METADATA_KEY}`,
      );
    const format = text(metadata[FORMAT_METADATA_KEY]);
    if (format !== undefined && format !== FORMAT)
      throw new SealedPayloadError(
        'malformed',
        keyId,
        `a payload sealed with key ${keyId} has an unknown format`,
      );
    // A key made current on another process first is in the file already: read it once before failing.
    const key = keyOf(this.#keys.current(), keyId) ?? keyOf(this.#keys.refreshed(), keyId);
    if (key === undefined) throw new UnknownPayloadKeyError(keyId);
    return open(payload.data ?? new Uint8Array(), keyId, key, format === undefined ? null : aad(keyId));
  }
}

function keyOf(ring: KeyRing, id: string): Buffer | undefined {
  return ring.keys.find((key) => key.id === id)?.key;
}

/** Format 2's authenticated data: the format, the encoding and the key ID, none of which holds a space. */
function aad(keyId: string): Buffer {
  return Buffer.from(`${FORMAT} ${SEALED_ENCODING} ${keyId}`, 'utf8');
}

/** Seals `payload`: format 2 when `bound`, else format 1 (no authenticated data, no format entry). */
function seal(payload: Payload, keyId: string, key: Buffer, bound: boolean): Payload {
  const plain = PayloadMessage.encode(payload).finish();
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  if (bound) cipher.setAAD(aad(keyId));
  const data = Buffer.concat([nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  const metadata: Record<string, Uint8Array> = {
    encoding: utf8(SEALED_ENCODING),
    [KEY_ID_METADATA_KEY]: utf8(keyId),
  };
  if (bound) metadata[FORMAT_METADATA_KEY] = utf8(FORMAT);
  return { metadata, data: new Uint8Array(data) };
}

/** Opens `data`; `aad` is null for format 1, which authenticated nothing beside the data. */
function open(data: Uint8Array, keyId: string, key: Buffer, aad: Buffer | null): Payload {
  if (data.length < NONCE_BYTES + TAG_BYTES)
    throw new SealedPayloadError(
      'truncated',
      keyId,
      `a payload sealed with key ${keyId} is too short to be sealed`,
    );
  const bytes = Buffer.from(data);
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, NONCE_BYTES));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  if (aad !== null) decipher.setAAD(aad);
  let plain: Buffer;
  try {
    plain = Buffer.concat([
      decipher.update(bytes.subarray(NONCE_BYTES, bytes.length - TAG_BYTES)),
      decipher.final(),
    ]);
  } catch (err) {
    throw new SealedPayloadError(
      'authentication-failed',
      keyId,
      `a payload sealed with key ${keyId} does not open: it was altered, or sealed with another key of that ID`,
      { cause: err },
    );
  }
  return PayloadMessage.decode(plain);
}
