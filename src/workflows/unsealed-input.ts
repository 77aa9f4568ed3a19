/**
 * The payload converter bundled with the workflow code (`payloadConverterPath` in
 * src/worker/bundle-options.ts), so that a workflow can tell that its input arrived unsealed on a
 * worker that seals payloads (decision 0021).
 *
 * Only the codec sees a payload as it arrived, and a codec error fails the workflow task (retried
 * forever), not the workflow. So the worker's codec, when a key ring is configured, marks each
 * payload it did not have to open with the metadata entry {@link UNSEALED_METADATA_KEY}
 * (src/payload-codec/unsealed-mark.ts); this converter decodes every payload as the default
 * converter does, and gives an object decoded from a marked payload a non-enumerable symbol that
 * {@link arrivedUnsealed} reads. The symbol is not serialized: a value sent on (continue-as-new, an
 * activity's input) carries no mark. Without a ring nothing is marked, and this converter is the
 * default one; it is in every bundle either way, so the bundle and the build ID do not depend on a
 * process's settings.
 *
 * Workflow code: no Node modules, no state.
 */
import {
  DefaultPayloadConverter,
  type ConverterHint,
  type Payload,
  type SerializationContext,
} from '@temporalio/common';

/**
 * The metadata entry the worker's codec adds, on decode, to a payload that arrived unsealed.
 * Never stored: the codec adds it after reading a payload and removes it before sealing one.
 */
export const UNSEALED_METADATA_KEY = 'encryption-unsealed';

/** Global, so the mark reads the same whichever copy of this module set it. */
const ARRIVED_UNSEALED = Symbol.for('agent-jobs.arrived-unsealed');

/** The default converter, which marks objects decoded from a payload that arrived unsealed. */
class UnsealedMarkingConverter extends DefaultPayloadConverter {
  override fromPayload<T>(payload: Payload, context?: SerializationContext, hint?: ConverterHint<T>): T {
    const value = super.fromPayload<T>(payload, context, hint);
    // Only objects can carry the mark; the workflow's input is one.
    if (
      payload.metadata?.[UNSEALED_METADATA_KEY] !== undefined &&
      typeof value === 'object' &&
      value !== null
    ) {
      Object.defineProperty(value, ARRIVED_UNSEALED, { value: true, enumerable: false });
    }
    return value;
  }
}

/** The converter the workflow bundle uses, under the name `payloadConverterPath` requires. */
export const payloadConverter = new UnsealedMarkingConverter();

/**
 * True when `value` was decoded from a payload that arrived unsealed on a worker with a payload
 * key ring; false when it was sealed, or the worker has no ring.
 */
export function arrivedUnsealed(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, ARRIVED_UNSEALED);
}
