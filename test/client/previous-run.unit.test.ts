import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { temporal } from '@temporalio/proto';
import { previousRun } from '../../src/client/previous-run.js';

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
