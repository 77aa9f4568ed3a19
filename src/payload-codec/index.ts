/**
 * The payload codec: AES-256-GCM over a key ring read from a file, for every process that reads or
 * writes this project's payloads (worker, starter, client library, Nexus handler).
 */
import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import type { WatchedFileOptions } from '../agent-api/watched-file.js';
import { AesGcmPayloadCodec, type OnUnopened } from './codec.js';
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
} from './codec.js';
export { AccessTokenVerifier, type AccessTokenPolicy } from './access-token.js';
export {
  MAX_BODY_BYTES,
  startCodecServer,
  urlHost,
  type CodecServer,
  type CodecServerSettings,
} from './codec-server.js';
export {
  FileKeyRing,
  keyRing,
  parseKeyRing,
  PayloadKeyFileError,
  staticKeyRing,
  type KeyRing,
  type KeyRingSource,
  type PayloadKey,
} from './key-ring.js';
export { UnsealedMarkingCodec } from './unsealed-mark.js';
export { PayloadUnopenedError, unopenedPayload } from './unopened.js';

/** A module a process with a ring loads by path (the SDK `require()`s it), from src/ or lib/. */
const modulePath = (relative: string) =>
  fileURLToPath(new URL(`${relative}.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url));

/**
 * The data converter for a payload key file (TEMPORAL_PAYLOAD_KEYS_FILE), or undefined without one:
 * unsealed arrivals marked for the workflow and the Nexus handler to refuse, failures sealed
 * (decisions 0021 and 0023). `onEvent` hears of ring changes, never a key; `onUnopened` of each
 * sealed payload that does not open.
 * @throws PayloadKeyFileError when the file holds no usable ring now
 */
export function payloadDataConverter(
  keysFile: string | null,
  options: WatchedFileOptions & { onUnopened?: OnUnopened } = {},
): DataConverter | undefined {
  if (keysFile === null) return undefined;
  const ring = new FileKeyRing(keysFile, options);
  const codec = new UnsealedMarkingCodec(new AesGcmPayloadCodec(ring, options.onUnopened));
  return {
    payloadCodecs: [codec],
    payloadConverterPath: modulePath('../workflows/unsealed-input'),
    failureConverterPath: modulePath('./failure-converter'),
  };
}
