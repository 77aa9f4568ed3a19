/**
 * The payload converter bundled with the workflow code (`payloadConverterPath` in
 * src/worker/bundle-options.ts), so that a workflow can tell that its input arrived unsealed on a
 * worker that seals payloads: the worker's codec marks such a payload with
 * {@link UNSEALED_METADATA_KEY} (src/payload-codec/unsealed-mark.ts), and this converter gives an
 * object decoded from it a non-enumerable symbol, never serialized, that {@link arrivedUnsealed}
 * reads. Why the codec marks and the workflow decides: docs/decisions/0021-payload-codec-edges.md.
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

/** True when `value` was decoded from a payload that arrived unsealed on a worker with a key ring. */
export function arrivedUnsealed(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, ARRIVED_UNSEALED);
}
