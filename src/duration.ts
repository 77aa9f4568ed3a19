/**
 * Durations as people write them ('30s', '1.5h', '2 days') or as milliseconds. The same words the
 * Temporal SDK accepts for its own durations, parsed here so that the SDK's internal `lib/time`
 * module stays out of the project (and a workflow can use it: it is pure).
 */

const UNIT_MS: Record<string, number> = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
  y: 31_557_600_000,
};

/** Each unit's spellings, longest first so that 'minutes' is not read as 'm' + 'inutes'. */
const UNIT_WORDS: Array<[RegExp, keyof typeof UNIT_MS]> = [
  [/^(milliseconds?|msecs?|ms)$/, 'ms'],
  [/^(seconds?|secs?|s)$/, 's'],
  [/^(minutes?|mins?|m)$/, 'm'],
  [/^(hours?|hrs?|h)$/, 'h'],
  [/^(days?|d)$/, 'd'],
  [/^(weeks?|w)$/, 'w'],
  [/^(years?|yrs?|y)$/, 'y'],
];

/**
 * The milliseconds of `value`, or undefined when it is not a finite duration. A number is already
 * milliseconds, as is text without a unit. The caller says what was wrong in its own error type
 * (an input, a setting, an environment variable).
 */
export function durationMs(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  const match = /^(-?(?:\d+)?\.?\d+) *([a-z]*)$/i.exec(value.trim());
  if (match === null) return undefined;
  const amount = Number(match[1]);
  const word = (match[2] as string).toLowerCase();
  const unit = word === '' ? 'ms' : UNIT_WORDS.find(([spelling]) => spelling.test(word))?.[1];
  if (unit === undefined) return undefined;
  const millis = amount * UNIT_MS[unit]!;
  return Number.isFinite(millis) ? millis : undefined;
}
