/**
 * The failure converter of a process with a payload key ring (`failureConverterPath` of
 * `payloadDataConverter`): the SDK's, with `encodeCommonAttributes`, so a failure's message and
 * stack trace travel in `encodedAttributes`, a payload the codec seals, and the history shows
 * `Encoded failure` in their place. On the worker this covers the failures of activities and of the
 * Nexus handler, whose messages may quote an API answer (decision 0021); a client with the codec
 * reads them opened. The workflow code has its own (src/workflows/sealed-failures.ts).
 *
 * Two failures stay readable: the Nexus handler's `UnsealedInput` refusal, whose caller has no ring
 * (that is why it is refused) and could not open it; and a workflow task's failure on a payload that
 * does not open, which the callers waiting on the workflow read to report it (src/payload-codec/
 * unopened.ts), often without the key it would be sealed with: its type and text name only a key ID
 * and why, as the worker's log line does (decision 0021), and its cause (the cipher's) is left out.
 *
 * Loaded by the SDK with `require()`, by path: a module of its own, with this one export.
 */
import {
  ApplicationFailure,
  DefaultFailureConverter,
  type PayloadConverter,
  type ProtoFailure,
  type SerializationContext,
} from '@temporalio/common';
import { FailureType } from '../contract.js';
import { UNOPENED_ERROR_NAMES } from './codec.js';

const readable = new DefaultFailureConverter();

/** The SDK's converter with `encodeCommonAttributes`, but for a refusal of unsealed input. */
class SealingFailureConverter extends DefaultFailureConverter {
  override errorToFailure(
    err: unknown,
    payloadConverter: PayloadConverter,
    context?: SerializationContext,
  ): ProtoFailure {
    for (let cause = err; cause instanceof Error; cause = cause.cause) {
      if (cause instanceof ApplicationFailure && cause.type === FailureType.UnsealedInput)
        return readable.errorToFailure(err, payloadConverter, context);
      if (UNOPENED_ERROR_NAMES.has(cause.name)) {
        const named = ApplicationFailure.retryable(cause.message, cause.name);
        named.stack = '';
        return readable.errorToFailure(named, payloadConverter, context);
      }
    }
    return super.errorToFailure(err, payloadConverter, context);
  }
}

/** The converter `failureConverterPath` names. */
export const failureConverter = new SealingFailureConverter({ encodeCommonAttributes: true });
