/**
 * The payload codec's keys: a ring of AES-256 keys, each with an ID, the first one current (it
 * seals), every one able to open what it sealed. Read from a file (TEMPORAL_PAYLOAD_KEYS_FILE, a
 * mounted Secret; its format: docs/configuration.md, "Payload encryption") as a {@link WatchedFile},
 * so that making a new key current, or adding one, needs no restart. A key ID is written in every
 * sealed payload's metadata, in plain text, and named in errors; the key itself never is.
 */
import { statSync } from 'node:fs';
import { WatchedFile, type Parsed, type WatchedFileOptions } from '../agent-api/watched-file.js';
import { AgentJobError, ErrorName } from '../errors.js';

/** Bytes of an AES-256 key. */
const KEY_BYTES = 32;

/** What a key ID may be: it is stored in plain text in each sealed payload. */
const KEY_ID_RULE = 'a key ID is 1 to 64 of A-Z a-z 0-9 . _ -';

/** Whether `id` is a key ID by {@link KEY_ID_RULE}: checked before one read from a payload is used. */
export function isKeyId(id: string): boolean {
  return /^[A-Za-z0-9._-]{1,64}$/.test(id);
}

/** A key of the ring. */
export interface PayloadKey {
  readonly id: string;
  /** 32 bytes. */
  readonly key: Buffer;
}

/** The keys now: `current` seals, any of `keys` opens. `current` is `keys[0]`. */
export interface KeyRing {
  readonly current: PayloadKey;
  readonly keys: readonly PayloadKey[];
}

/**
 * Where the codec gets its keys. `current()` may check a file (at most once a second);
 * `refreshed()` reads it at once, for a payload sealed with a key ID the ring lacks (a new key may
 * have been mounted on another process first).
 */
export interface KeyRingSource {
  current(): KeyRing;
  refreshed(): KeyRing;
}

/** A payload key file that cannot be read at start, or holds no usable ring. Names the file, never a key. */
export class PayloadKeyFileError extends AgentJobError {
  constructor(
    readonly path: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorName.PayloadKeyFile, `${path}: ${reason}`, options);
  }
}

/** The ring of `keys` (the first current). @throws {Error} on an empty list or a bad key */
export function keyRing(keys: readonly PayloadKey[]): KeyRing {
  const parsed = checkKeys(keys);
  if ('reason' in parsed) throw new TypeError(`bad payload key ring: ${parsed.reason}`);
  return parsed.value;
}

/** A ring that never changes: for library users who hold their keys elsewhere, and for tests. */
export function staticKeyRing(keys: readonly PayloadKey[]): KeyRingSource {
  const ring = keyRing(keys);
  return { current: () => ring, refreshed: () => ring };
}

/** The ring in a key file's text. The reasons name a line number and a key ID, never key material. */
export function parseKeyRing(text: string): Parsed<KeyRing> {
  const keys: PayloadKey[] = [];
  const lines = text.split('\n');
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    const where = `line ${index + 1}`;
    if (fields.length !== 2)
      return { reason: `${where}: expected "<key ID> <base64 of ${KEY_BYTES} bytes>"` };
    const [id, encoded] = fields as [string, string];
    if (!isKeyId(id)) return { reason: `${where}: ${KEY_ID_RULE}` };
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) return { reason: `${where}: key ${id} is not base64` };
    keys.push({ id, key: Buffer.from(encoded, 'base64') });
  }
  return checkKeys(keys);
}

function checkKeys(keys: readonly PayloadKey[]): Parsed<KeyRing> {
  const [current] = keys;
  if (current === undefined) return { reason: 'it holds no key' };
  const seen = new Set<string>();
  for (const { id, key } of keys) {
    if (!isKeyId(id)) return { reason: KEY_ID_RULE };
    if (key.length !== KEY_BYTES) return { reason: `key ${id} is ${key.length} bytes, not ${KEY_BYTES}` };
    if (key.every((byte) => byte === 0))
      return { reason: `key ${id} is all zero, a placeholder: make one with openssl rand -base64 32` };
    if (seen.has(id)) return { reason: `key ID ${id} appears twice` };
    seen.add(id);
  }
  return { value: { current, keys } };
}

/** Same IDs, same keys, same order. */
function sameRing(a: KeyRing, b: KeyRing): boolean {
  return (
    a.keys.length === b.keys.length &&
    a.keys.every((key, i) => key.id === b.keys[i]?.id && key.key.equals(b.keys[i].key))
  );
}

/** A key ring kept in a file (TEMPORAL_PAYLOAD_KEYS_FILE), re-read when the file changes. */
export class FileKeyRing extends WatchedFile<KeyRing> implements KeyRingSource {
  /**
   * Reads the file once.
   * @throws {PayloadKeyFileError} when it holds no usable ring, or group or others can write it
   */
  constructor(path: string, options: WatchedFileOptions = {}) {
    checkMode(path);
    super(path, parseKeyRing, ({ reason, cause }) => new PayloadKeyFileError(path, reason, { cause }), {
      ...options,
      same: sameRing,
    });
  }

  refreshed(): KeyRing {
    this.refresh(true);
    return this.last();
  }
}

/**
 * Refuses a ring that group or others can write and warns of one that others can read (why, and the
 * override: docs/payload-codec.md, "The ring's file mode"). Here, not in one process's loader: the
 * worker, the starter, the library and the codec server all open rings.
 */
function checkMode(path: string): void {
  if (process.platform === 'win32' || process.env.TEMPORAL_PAYLOAD_KEYS_FILE_MODE_CHECK === 'off') return;
  let mode: number;
  try {
    ({ mode } = statSync(path));
  } catch {
    return; // The read that follows names what is wrong with the path.
  }
  const fix = `chmod 600 it, or set TEMPORAL_PAYLOAD_KEYS_FILE_MODE_CHECK=off where a mount cannot carry modes`;
  if (mode & 0o022) throw new PayloadKeyFileError(path, `group or others can write it: ${fix}`);
  if (mode & 0o004) process.emitWarning(`${path}: others can read the payload key ring: ${fix}`);
}
