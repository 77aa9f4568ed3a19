/**
 * The duration helper reads what the Temporal SDK's own parser (the `ms` package) reads, checked
 * here against the SDK on the spellings people use, and refuses what is not a duration.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { msToNumber } from '@temporalio/common/lib/time.js';
import { durationMs } from '../src/duration.js';

test('reads every spelling the SDK reads, to the same milliseconds', () => {
  const spellings = [
    '100',
    '100ms',
    '1.5s',
    '30s',
    '30 s',
    '10 seconds',
    '1 sec',
    '5m',
    '5 minutes',
    '2 mins',
    '1h',
    '1.5h',
    '2 hours',
    '3 hrs',
    '1d',
    '2 days',
    '1w',
    '1 week',
    '1y',
    '2 years',
    '.5h',
    '10S',
    '1H',
    ' 20s ',
    '-1s',
  ];
  for (const text of spellings) {
    assert.equal(durationMs(text), msToNumber(text.trim() as Parameters<typeof msToNumber>[0]), text);
  }
});

test('a number is milliseconds; text that is not a duration reads as undefined', () => {
  assert.equal(durationMs(2500), 2500);
  assert.equal(durationMs(Number.POSITIVE_INFINITY), undefined);
  assert.equal(durationMs(Number.NaN), undefined);
  for (const text of ['', 'soon', '10 parsecs', '1h30m', 's', '1e3', '10 m s']) {
    assert.equal(durationMs(text), undefined, text);
  }
});
