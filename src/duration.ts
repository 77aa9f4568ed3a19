/**
 * Durations as people write them ('30s', '1.5h', '2 days') or as milliseconds, in the Temporal
 * SDK's words, parsed here to keep the SDK's internal `lib/time` out (and pure, for workflows).
 */

/** Each unit's spellings (whole words: 'minutes' is not 'm' + 'inutes') and its milliseconds. */
const UNITS: Array<[RegExp, number]> = [
  [/^(milliseconds?|msecs?|ms)$/, 1],
  [/^(seconds?|secs?|s)$/, 1_000],
  [/^(minutes?|mins?|m)$/, 60_000],
  [/^(hours?|hrs?|h)$/, 3_600_000],
  [/^(days?|d)$/, 86_400_000],
  [/^(weeks?|w)$/, 604_800_000],
  [/^(years?|yrs?|y)$/, 31_557_600_000],
];

/**
 * The milliseconds of `value` (a number or text without a unit is milliseconds), or undefined when
 * it is not a finite duration: the caller says what was wrong in its own error type.
 */
export function durationMs(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  const match = /^(-?(?:\d+)?\.?\d+) *([a-z]*)$/i.exec(value.trim());
  if (match === null) return undefined;
  const amount = Number(match[1]);
  const word = (match[2] as string).toLowerCase();
  const unitMs = word === '' ? 1 : UNITS.find(([spelling]) => spelling.test(word))?.[1];
  if (unitMs === undefined) return undefined;
  const millis = amount * unitMs;
  return Number.isFinite(millis) ? millis : undefined;
}
