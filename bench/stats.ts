/**
 * Order statistics for the benchmark: percentiles of one run's samples, and the median and spread
 * of a figure over repeated runs. Shared machines are noisy, so every figure the report prints is a
 * {@link Spread}, never a single reading.
 */

/** A figure over repeats: the median, the lowest and the highest reading, and how many there were. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}

/**
 * The `p`-th percentile (0 to 100) of `values`, by linear interpolation between the closest ranks,
 * so that p50 of an even-sized sample is the mean of the two middle values. NaN for no values.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lower = Math.floor(rank);
  const upper = Math.ceil(rank);
  const low = sorted[lower] as number;
  const high = sorted[upper] as number;
  return low + (high - low) * (rank - lower);
}

/** The median and min–max of the finite values among `values`; null when there is none. */
export function spread(values: readonly (number | null | undefined)[]): Spread | null {
  const finite = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  if (finite.length === 0) return null;
  return {
    median: percentile(finite, 50),
    min: Math.min(...finite),
    max: Math.max(...finite),
    n: finite.length,
  };
}

/** The sum of `values`: 0 for none. */
export function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** The mean of `values`: NaN for none. */
export function mean(values: readonly number[]): number {
  return sum(values) / values.length;
}

/** `a / b` when both are known and `b` is not zero, else null. */
export function ratio(a: number | null | undefined, b: number | null | undefined): number | null {
  if (typeof a !== 'number' || typeof b !== 'number' || !Number.isFinite(a) || !Number.isFinite(b)) {
    return null;
  }
  return b === 0 ? null : a / b;
}

// How figures print, in the tables and in the aims' sentences.

/** `value` ÷ `unit` with `digits` decimals, then `suffix`; "?" when unknown. */
export function fixed(value: number | null | undefined, digits: number, suffix = '', unit = 1): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '?';
  const v = value / unit;
  return `${digits === 0 ? Math.round(v) : v.toFixed(digits)}${suffix}`;
}

/** A spread as "median (min–max)", or the median alone for one reading; values ÷ `unit`; blank when unknown. */
export function spreadText(s: Spread | null | undefined, digits: number, unit = 1): string {
  if (!s) return '';
  const v = (x: number) => (x / unit).toFixed(digits);
  return s.n > 1 && s.min !== s.max ? `${v(s.median)} (${v(s.min)}–${v(s.max)})` : v(s.median);
}

/** A table's number: two decimals below 100, none from there; blank when unknown. */
export function num(value: number | null): string {
  if (value === null || !Number.isFinite(value)) return '';
  return Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(2);
}

/** A ratio as "1.23×"; blank when unknown. */
export function times(value: number | null): string {
  return value === null ? '' : `${value.toFixed(2)}×`;
}

/** `items` in groups of equal `key`, in the order each key first comes. */
export function groupBy<T>(items: readonly T[], key: (item: T) => string): T[][] {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return [...groups.values()];
}
