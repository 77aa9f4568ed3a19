/**
 * The failure converter bundled with the workflow code (`failureConverterPath` in
 * src/worker/bundle-options.ts): a failure that arrived sealed stays sealed when the workflow
 * passes it on, and so does a failure the workflow builds around one (decision 0021).
 *
 * With a payload key ring, the worker's own failure converter (Node side: activities, the Nexus
 * handler) moves each failure's message and stack trace into `encodedAttributes`, a payload the
 * codec seals (`encodeCommonAttributes`, src/payload-codec/failure-converter.ts). The workflow
 * code cannot read the worker's settings, and its bundle must not depend on them; what it can see
 * is whether a failure it received arrived that way. Two gaps of the SDK's default converter are
 * closed here:
 *
 * - it keeps on the error the failure with the message opened, and sends that again when the
 *   workflow rethrows the error or makes it a cause: the activity's message would leave in plain
 *   text. Here the error keeps the failure as it arrived.
 * - a failure the workflow builds from an activity's (`Failed while creating the agent job: <the
 *   API's message>`) is the workflow's own, in plain text. Here a failure whose causes hold a
 *   sealed one is sealed too, so the API's text leaves sealed; a client with the codec reads it.
 *
 * Without a ring nothing arrives sealed, and this is the default converter. Whether a failure is
 * sealed follows from the history alone, so it replays the same on every worker. Workflow code:
 * no Node modules, no state.
 */
import {
  DefaultFailureConverter,
  TemporalFailure,
  type PayloadConverter,
  type ProtoFailure,
  type SerializationContext,
} from '@temporalio/common';

/** The message the SDK puts where a sealed failure's message was. */
const SEALED_MESSAGE = 'Encoded failure';

/** True when `err`, or one of its causes, is a failure that arrived sealed. */
export function wrapsSealed(err: unknown): boolean {
  for (let cause = err; cause instanceof Error; cause = cause.cause) {
    if (cause instanceof TemporalFailure && cause.failure?.encodedAttributes) return true;
  }
  return false;
}

/** The default failure converter, which keeps sealed what arrived sealed. */
class SealedStaysSealedConverter extends DefaultFailureConverter {
  override failureToError(
    failure: ProtoFailure,
    payloadConverter: PayloadConverter,
    context?: SerializationContext,
  ): Error {
    const err = super.failureToError(failure, payloadConverter, context);
    // Sent on as it arrived, sealed, not with the message the converter opened.
    if (failure.encodedAttributes && err instanceof TemporalFailure) err.failure = failure;
    return err;
  }

  override errorToFailure(
    err: unknown,
    payloadConverter: PayloadConverter,
    context?: SerializationContext,
  ): ProtoFailure {
    const failure = super.errorToFailure(err, payloadConverter, context);
    if (failure.encodedAttributes || !wrapsSealed(err)) return failure;
    const { message, stackTrace } = failure;
    return {
      ...failure,
      message: SEALED_MESSAGE,
      stackTrace: '',
      encodedAttributes: payloadConverter.toPayload({ message, stack_trace: stackTrace }, context),
    };
  }
}

/** The converter the workflow bundle uses, under the name `failureConverterPath` requires. */
export const failureConverter = new SealedStaysSealedConverter();
