/**
 * The failure converter of a process with a payload key ring (`failureConverterPath` of
 * `payloadDataConverter`): the SDK's, with `encodeCommonAttributes`, so a failure's message and
 * stack trace travel in `encodedAttributes`, a payload the codec seals, and the history shows
 * `Encoded failure` in their place. On the worker this covers the failures of activities and of the
 * Nexus handler, whose messages may quote an API answer (decision 0021); a client with the codec
 * reads them opened. The workflow code has its own (src/workflows/sealed-failures.ts).
 *
 * Loaded by the SDK with `require()`, by path: a module of its own, with this one export.
 */
import { DefaultFailureConverter } from '@temporalio/common';

/** The converter `failureConverterPath` names. */
export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
