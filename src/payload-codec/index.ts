/**
 * The payload codec: AES-256-GCM over a key ring read from a file, for every process that reads or
 * writes this project's payloads (worker, starter, client library, Nexus handler).
 */
import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import type { WatchedFileOptions } from '../agent-api/watched-file.js';
import { AesGcmPayloadCodec } from './codec.js';
import { FileKeyRing } from './key-ring.js';
import { UnsealedMarkingCodec } from './unsealed-mark.js';

export {
  AesGcmPayloadCodec,
  FORMAT_METADATA_KEY,
  KEY_ID_METADATA_KEY,
  SealedPayloadError,
  SEALED_ENCODING,
  UnknownPayloadKeyError,
  type OnUnopened,
  type UnopenedReason,
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
export { UnsealedMarkingCodec } from './unsealed-mark.js';

/** The failure converter a process with a ring loads by path (./failure-converter.ts). */
const FAILURE_CONVERTER_MODULE = fileURLToPath(
  new URL(`./failure-converter.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

/**
 * The data converter for a payload key file (TEMPORAL_PAYLOAD_KEYS_FILE), or undefined when there
 * is none: the codec is off and payloads are stored as the default converter writes them.
 * `onEvent` hears of a new ring and of a file that became unusable, never a key. Payloads that
 * arrive unsealed are marked on decode, so that the workflow refuses such an input; failures carry
 * their message and stack trace sealed (`encodeCommonAttributes`). Decision 0021.
 * @throws PayloadKeyFileError when the file holds no usable ring now
 */
export function payloadDataConverter(
  keysFile: string | null,
  options: WatchedFileOptions = {},
): DataConverter | undefined {
  if (keysFile === null) return undefined;
  const codec = new UnsealedMarkingCodec(new AesGcmPayloadCodec(new FileKeyRing(keysFile, options)));
  return { payloadCodecs: [codec], failureConverterPath: FAILURE_CONVERTER_MODULE };
}
