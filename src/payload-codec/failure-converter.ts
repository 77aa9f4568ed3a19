/**
 * The failure converter of a process with a payload key ring (`failureConverterPath` of
 * `payloadDataConverter`): the SDK's, with `encodeCommonAttributes`, so a failure's message and stack
 * trace travel sealed (decision 0021; the workflow code's own: src/workflows/sealed-failures.ts). Two
 * stay readable for callers without the ring (decision 0023): the Nexus handler's `UnsealedInput`
 * refusal, and a task's failure on a payload that does not open (./unopened.ts), which names only a
 * key ID and why, its cause (the cipher's) left out.
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
