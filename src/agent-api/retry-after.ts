const DELTA_SECONDS = /^\d+$/;

/**
 * The three HTTP-date forms (IMF-fixdate, RFC 850, asctime) all start with a day name. Checking that
 * keeps `Date.parse`, which accepts almost anything, from reading a stray number as a year.
 */
const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /i;

/**
 * Milliseconds to wait as a `Retry-After` value says (RFC 9110 10.2.3: seconds or an HTTP date,
 * measured from `now`); 0 for a date in the past; null when absent or anything else, which is
 * ignored rather than trusted: garbage must never turn into a zero wait or an enormous one.
 */
export function parseRetryAfter(value: string | undefined, now: number = Date.now()): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (DELTA_SECONDS.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds * 1000) ? seconds * 1000 : null;
  }
  if (!HTTP_DATE.test(text)) return null;
  const at = Date.parse(text);
  if (!Number.isFinite(at)) return null;
  return Math.max(0, at - now);
}
