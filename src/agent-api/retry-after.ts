/**
 * `Retry-After` parsing (RFC 9110 section 10.2.3). The header is either a number of seconds or an
 * HTTP date; anything else is ignored rather than trusted, because a garbage value must never turn
 * into a zero wait (a retry storm) or an enormous one (a stuck workflow).
 */

const DELTA_SECONDS = /^\d+$/;

/**
 * The three HTTP-date forms (IMF-fixdate, RFC 850, asctime) all start with a day name. Checking that
 * keeps `Date.parse`, which accepts almost anything, from reading a stray number as a year.
 */
const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /i;

/**
 * Milliseconds to wait according to a `Retry-After` header value.
 *
 * @param value the header value, or undefined when the header is absent
 * @param now epoch ms to measure an HTTP date against (tests pass a fixed clock)
 * @returns the wait in ms; 0 for a date in the past; null when absent or not parseable
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
