/**
 * The failure converter bundled with the workflow code (`failureConverterPath` in
 * src/worker/bundle-options.ts): a failure that arrived sealed stays sealed when the workflow
 * passes it on, and so does a failure the workflow builds around one. The two gaps of the SDK's
 * default converter it closes, and why it reads the history, not the worker's settings:
 * docs/decisions/0021-payload-codec-edges.md. Without a ring it is the default converter.
 *
 * Workflow code: no Node modules, no state.
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
    // The default keeps the failure with the message it opened, and would send that on.
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
