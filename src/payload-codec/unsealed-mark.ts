/**
 * The sealing codec wrapped so that a workflow can refuse an input that arrived unsealed: on
 * decode, each payload that arrived without the sealed encoding gets the metadata entry
 * `UNSEALED_METADATA_KEY`, which the converter bundled with the workflow code turns into a mark on
 * the decoded value (src/workflows/unsealed-input.ts). Why a wrapper and not a second codec in the
 * list: decision 0021.
 */
import type { Payload, PayloadCodec, SerializationContext } from '@temporalio/common';
import { UNSEALED_METADATA_KEY } from '../workflows/unsealed-input.js';
import { isSealed } from './codec.js';

const MARK = new Uint8Array(Buffer.from('true', 'utf8'));

/** `payload` without the mark: one sealed inside would come out as if that payload had arrived unsealed. */
function unmarked(payload: Payload): Payload {
  if (payload.metadata?.[UNSEALED_METADATA_KEY] === undefined) return payload;
  const metadata = Object.entries(payload.metadata).filter(([key]) => key !== UNSEALED_METADATA_KEY);
  return { ...payload, metadata: Object.fromEntries(metadata) };
}

/** `inner` (the sealing codec), marking on decode every payload that arrived unsealed. */
export class UnsealedMarkingCodec implements PayloadCodec {
  readonly #inner: PayloadCodec;

  constructor(inner: PayloadCodec) {
    this.#inner = inner;
  }

  encode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    return this.#inner.encode(payloads.map(unmarked), context);
  }

  async decode(payloads: Payload[], context?: SerializationContext): Promise<Payload[]> {
    const sealed = payloads.map(isSealed);
    const opened = await this.#inner.decode(payloads, context);
    return opened.map((payload, i) =>
      sealed[i] ? payload : { ...payload, metadata: { ...payload.metadata, [UNSEALED_METADATA_KEY]: MARK } },
    );
  }
}
