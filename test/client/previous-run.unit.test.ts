import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { defaultPayloadConverter } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { openCreateOutcomes, previousRun } from '../../src/client/previous-run.js';
import { AesGcmPayloadCodec, staticKeyRing } from '../../src/payload-codec/index.js';

type Event = temporal.api.history.v1.IHistoryEvent;

/** An event ID: a Long in real histories, read with String() as a number is. */
const id = (n: number) => n as unknown as NonNullable<Event['eventId']>;

const json = (value: unknown) => ({ payloads: [{ data: Buffer.from(JSON.stringify(value)) }] });

function scheduled(eventId: number, activity = 'createAgentJob'): Event {
  return {
    eventId: id(eventId),
    activityTaskScheduledEventAttributes: { activityType: { name: activity } },
  };
}

function completed(scheduledEventId: number, result: unknown): Event {
  return {
    activityTaskCompletedEventAttributes: {
      scheduledEventId: id(scheduledEventId),
      result: json(result),
    },
  };
}

function failed(scheduledEventId: number, type: string, details: unknown): Event {
  return {
    activityTaskFailedEventAttributes: {
      scheduledEventId: id(scheduledEventId),
      failure: { applicationFailureInfo: { type, details: json(details) } },
    },
  };
}

test('the run recorded its agent job: go on with it', () => {
  assert.deepEqual(previousRun('job_1', []), { kind: 'job', jobId: 'job_1' });
});

test('a completed create names the job even when the run never recorded it', () => {
  const events = [scheduled(5), completed(5, { id: 'job_2', status: 'active' })];
  assert.deepEqual(previousRun(null, events), { kind: 'job', jobId: 'job_2' });
});

test('a create left on the wire, timed out or failed as maybe applied is uncertain', () => {
  assert.equal(previousRun(null, [scheduled(5)]).kind, 'uncertain');
  assert.equal(
    previousRun(null, [scheduled(5), { activityTaskTimedOutEventAttributes: { scheduledEventId: id(5) } }])
      .kind,
    'uncertain',
  );
  assert.deepEqual(
    previousRun(null, [scheduled(5), { activityTaskCanceledEventAttributes: { scheduledEventId: id(5) } }]),
    { kind: 'uncertain', why: 'a create that was cancelled' },
  );
  const maybe = { status: 502, retryAfterMs: null, attempt: 1, final: false, mayHaveBeenApplied: true };
  assert.deepEqual(previousRun(null, [scheduled(5), failed(5, 'ServiceUnavailable', maybe)]), {
    kind: 'uncertain',
    why: 'a create that failed with ServiceUnavailable',
  });
  const unknown = { status: null, retryAfterMs: null, attempt: 1, final: true, mayHaveBeenApplied: false };
  assert.equal(
    previousRun(null, [scheduled(5), failed(5, 'CreateOutcomeUnknown', unknown)]).kind,
    'uncertain',
  );
});

test('creates that surely failed, or none at all, leave nothing; an earlier uncertain one stays', () => {
  const notApplied = { status: 404, retryAfterMs: null, attempt: 1, final: true, mayHaveBeenApplied: false };
  assert.deepEqual(previousRun(null, [scheduled(5), failed(5, 'ProjectNotFound', notApplied)]), {
    kind: 'nothing',
  });
  assert.deepEqual(previousRun(null, [scheduled(3, 'enqueueForProjectQuota')]), { kind: 'nothing' });
  const maybe = { status: null, retryAfterMs: null, attempt: 1, final: false, mayHaveBeenApplied: true };
  const events = [
    scheduled(5),
    failed(5, 'NetworkError', maybe),
    scheduled(9),
    failed(9, 'ServiceUnavailable', { ...notApplied, status: 503, final: false }),
  ];
  assert.equal(previousRun(null, events).kind, 'uncertain');
});

test('with the payload codec on, a sealed create result still names the job, and a sealed failure detail still reads', async () => {
  const codec = new AesGcmPayloadCodec(staticKeyRing([{ id: 'k1', key: randomBytes(32) }]));
  const seal = async (value: unknown) => ({
    payloads: await codec.encode([defaultPayloadConverter.toPayload(value)]),
  });
  const sealedCompleted: Event = {
    activityTaskCompletedEventAttributes: {
      scheduledEventId: id(5),
      result: await seal({ id: 'job_9', status: 'active' }),
    },
  };
  const events = [scheduled(5), sealedCompleted];
  // Unopened, the sealed result reads as no job ID: what the restart read before it opened them.
  assert.equal(previousRun(null, events).kind, 'uncertain');
  assert.deepEqual(previousRun(null, await openCreateOutcomes(events, [codec])), {
    kind: 'job',
    jobId: 'job_9',
  });

  const surelyNot = { status: 400, retryAfterMs: null, attempt: 1, final: true, mayHaveBeenApplied: false };
  const sealedFailed: Event = {
    activityTaskFailedEventAttributes: {
      scheduledEventId: id(5),
      failure: { applicationFailureInfo: { type: 'BadRequest', details: await seal(surelyNot) } },
    },
  };
  const failedEvents = [scheduled(5), sealedFailed];
  assert.equal(previousRun(null, failedEvents).kind, 'uncertain');
  assert.deepEqual(previousRun(null, await openCreateOutcomes(failedEvents, [codec])), { kind: 'nothing' });
  // Without codecs the events are read as they are.
  assert.deepEqual(await openCreateOutcomes(events, []), events);
});
