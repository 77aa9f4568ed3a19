/**
 * The benchmark's detection split (bench/history.ts) on made-up histories: which events it times,
 * and the runs it leaves out rather than time wrongly.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { detectionParts, type HistoryEvent } from '../../bench/history.js';

/** An event at `ms` epoch milliseconds with the given attributes. */
function at(ms: number, attributes: Partial<HistoryEvent>): HistoryEvent {
  return {
    eventTime: { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 },
    ...attributes,
  } as HistoryEvent;
}

const T = 1_700_000_000_000;
/** A poll by retry: created, then one poll activity whose last attempt saw the end. */
const pollByRetry: HistoryEvent[] = [
  at(T, { workflowExecutionStartedEventAttributes: {} }),
  at(T + 10, { activityTaskScheduledEventAttributes: {} }),
  at(T + 50, { activityTaskStartedEventAttributes: { attempt: 1 } }),
  at(T + 90, { activityTaskCompletedEventAttributes: {} }),
  at(T + 100, { activityTaskScheduledEventAttributes: {} }),
  // The attempt that saw the end, 60 s later: only its start is recorded.
  at(T + 60_000, { activityTaskStartedEventAttributes: { attempt: 7 } }),
  at(T + 60_080, { activityTaskCompletedEventAttributes: {} }),
  at(T + 60_200, { workflowTaskScheduledEventAttributes: {} }),
  at(T + 60_300, { workflowTaskStartedEventAttributes: {} }),
  at(T + 60_320, { workflowTaskCompletedEventAttributes: {} }),
  at(T + 60_330, { workflowExecutionCompletedEventAttributes: {} }),
];

test('splits a poll by retry from the end of its job to its close', () => {
  assert.deepEqual(detectionParts(pollByRetry, T + 55_000), {
    wait: 5_000,
    attempt: 80,
    toTask: 220,
    toClose: 30,
  });
});

test('leaves out a run that has not closed, or whose reads were local activities', () => {
  assert.equal(detectionParts(pollByRetry.slice(0, -1), T + 55_000), null);
  const localReads: HistoryEvent[] = [
    ...pollByRetry.slice(0, 4),
    at(T + 20_000, { workflowTaskStartedEventAttributes: {} }),
    at(T + 20_050, { markerRecordedEventAttributes: { markerName: 'core_local_activity' } }),
    at(T + 20_060, { workflowExecutionCompletedEventAttributes: {} }),
  ];
  assert.equal(detectionParts(localReads, T + 15_000), null);
});
