/**
 * The failure converters with the codec on (decision 0021): a process with the ring moves a
 * failure's message into `encodedAttributes`; the workflow bundle's converter sends a failure that
 * arrived that way on as it arrived, and seals one built around it, while the SDK's default sends
 * the opened message on. No server; the payloads stay unsealed here, the codec seals
 * `encodedAttributes` like any payload.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ApplicationFailure,
  defaultFailureConverter,
  defaultPayloadConverter,
  type ProtoFailure,
} from '@temporalio/common';
import { failureConverter as sealing } from '../../src/payload-codec/failure-converter.js';
import { failureConverter as bundled } from '../../src/workflows/sealed-failures.js';

const MARKER = 'the prompt "marker-91c2" is not allowed';
const pc = defaultPayloadConverter;

/** What an activity with the ring sends: its message sealed away. */
function sealedActivityFailure(): ProtoFailure {
  const failure = sealing.errorToFailure(
    ApplicationFailure.create({ type: 'InvalidRequest', message: MARKER, nonRetryable: true }),
    pc,
  );
  assert.equal(failure.message, 'Encoded failure');
  assert.ok(failure.encodedAttributes);
  return failure;
}

/** The text of a failure proto outside `encodedAttributes`, causes included. */
function plainText(failure: ProtoFailure | null | undefined): string {
  if (!failure) return '';
  return `${failure.message ?? ''} ${failure.stackTrace ?? ''} ${plainText(failure.cause)}`;
}

test('the workflow reads the message opened, and sends the failure on as it arrived', () => {
  const err = bundled.failureToError(sealedActivityFailure(), pc);
  assert.equal(err.message, MARKER, 'the workflow code reads the message');
  const again = bundled.errorToFailure(err, pc);
  assert.ok(!plainText(again).includes('marker-91c2'), plainText(again));
  // The SDK's default sends the opened message on: the gap this converter closes.
  const byDefault = defaultFailureConverter.errorToFailure(
    defaultFailureConverter.failureToError(sealedActivityFailure(), pc),
    pc,
  );
  assert.ok(plainText(byDefault).includes('marker-91c2'));
});

test('a failure the workflow builds around a sealed one is sealed too; a client opens it', () => {
  const cause = bundled.failureToError(sealedActivityFailure(), pc);
  const built = ApplicationFailure.create({
    type: 'InvalidRequest',
    message: `Failed while creating the agent job: ${cause.message}`,
    cause,
  });
  const failure = bundled.errorToFailure(built, pc);
  assert.equal(failure.message, 'Encoded failure');
  assert.ok(!plainText(failure).includes('marker-91c2'), plainText(failure));
  const opened = defaultFailureConverter.failureToError(failure, pc);
  assert.equal(opened.message, `Failed while creating the agent job: ${MARKER}`);
  assert.equal((opened.cause as Error | undefined)?.message, MARKER);
});

test('a failure of its own with no sealed cause stays readable', () => {
  const failure = bundled.errorToFailure(
    ApplicationFailure.create({ type: 'AgentJobFailed', message: 'Agent job "job_1" failed' }),
    pc,
  );
  assert.equal(failure.message, 'Agent job "job_1" failed');
  assert.equal(failure.encodedAttributes, undefined);
});
