/**
 * The payload codec: AES-256-GCM over a key ring read from a file, for every process that reads or
 * writes this project's payloads (worker, starter, client library, Nexus handler).
 */
import type { DataConverter } from '@temporalio/common';
import type { WatchedFileOptions } from '../agent-api/watched-file.js';
import { AesGcmPayloadCodec } from './codec.js';
import { FileKeyRing } from './key-ring.js';

export {
  AesGcmPayloadCodec,
  KEY_ID_METADATA_KEY,
  SealedPayloadError,
  SEALED_ENCODING,
  UnknownPayloadKeyError,
} from './codec.js';
export {
  AccessTokenVerifier,
  type AccessTokenPolicy,
  type AccessVerdict,
  type Refused,
} from './access-token.js';
export {
  MAX_BODY_BYTES,
  startCodecServer,
  type CodecServer,
  type CodecServerLogger,
  type CodecServerSettings,
} from './codec-server.js';
export {
  FileKeyRing,
  KEY_BYTES,
  keyRing,
  parseKeyRing,
  PayloadKeyFileError,
  staticKeyRing,
  type KeyRing,
  type KeyRingFileEvent,
  type KeyRingSource,
  type PayloadKey,
} from './key-ring.js';

/**
 * The data converter for a payload key file (TEMPORAL_PAYLOAD_KEYS_FILE), or undefined when there
 * is none: the codec is off and payloads are stored as the default converter writes them.
 * `onEvent` hears of a new ring and of a file that became unusable, never a key.
 * @throws PayloadKeyFileError when the file holds no usable ring now
 */
export function payloadDataConverter(
  keysFile: string | null,
  options: WatchedFileOptions = {},
): DataConverter | undefined {
  if (keysFile === null) return undefined;
  return { payloadCodecs: [new AesGcmPayloadCodec(new FileKeyRing(keysFile, options))] };
}
