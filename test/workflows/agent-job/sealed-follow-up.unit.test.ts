/**
 * A follow-up whose message failed, carried by continue-as-new to a caller re-attaching in the next
 * run: with the payload codec on (the failure arrived sealed) the rebuilt failure keeps the API's
 * message in its details, a payload the codec seals, not in its message (decision 0021); without
 * it, as before. No server.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApplicationFailure, defaultPayloadConverter } from '@temporalio/common';
import { failureConverter as sealing } from '../../../src/payload-codec/failure-converter.js';
import { earlierRunFailure, FollowUps } from '../../../src/workflows/agent-job/follow-ups.js';
import { failureConverter as bundled } from '../../../src/workflows/sealed-failures.js';

const API_TEXT = 'the prompt "marker-5e1d" is not allowed';

/** The failure a follow-up's message met, carried by continue-as-new. */
function carriedFailure(error: Error) {
  const followUps = new FollowUps();
  followUps.track({ updateId: 'u1', prompt: 'p', key: 'k', turn: 2, ended: null, failed: null, error });
  const [carried] = followUps.carried();
  assert.ok(carried?.failed);
  return carried.failed;
}

test('a failure that arrived sealed is carried as sealed, and rebuilt with its message in the details', () => {
  const activity = ApplicationFailure.create({
    type: 'InvalidRequest',
    message: API_TEXT,
    nonRetryable: true,
  });
  const arrived = bundled.failureToError(
    sealing.errorToFailure(activity, defaultPayloadConverter),
    defaultPayloadConverter,
  );
  const error = ApplicationFailure.create({
    type: 'InvalidRequest',
    message: `Failed: ${API_TEXT}`,
    cause: arrived,
  });
  const failed = carriedFailure(error);
  assert.equal(failed.sealed, true);
  const rebuilt = earlierRunFailure(failed);
  assert.equal(rebuilt.type, 'InvalidRequest');
  assert.ok(!rebuilt.message.includes('marker-5e1d'), rebuilt.message);
  assert.deepEqual(rebuilt.details, [{ message: `Failed: ${API_TEXT}` }]);
});

test('without the codec the carried failure is as before: its message in the message', () => {
  const failed = carriedFailure(ApplicationFailure.create({ type: 'InvalidRequest', message: API_TEXT }));
  assert.deepEqual(failed, { type: 'InvalidRequest', message: API_TEXT });
  assert.equal(
    earlierRunFailure(failed).message,
    `${API_TEXT} (the message failed in an earlier run of this workflow)`,
  );
});
