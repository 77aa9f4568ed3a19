/**
 * Whether a JSON value holds a text anywhere, for checks that a sealed payload or a log line gives
 * nothing away: a payload's bytes are base64 in JSON, and a base64 slice of the text matches only
 * where the text starts at an offset divisible by 3, so each string is searched decoded as well.
 */

/** Every string of a JSON value, and what each reads as base64. */
function texts(value: unknown): string[] {
  if (typeof value === 'string') return [value, Buffer.from(value, 'base64').toString('latin1')];
  if (typeof value === 'object' && value !== null) return Object.values(value).flatMap(texts);
  return [];
}

/** Whether any string of `value` holds `text`, as it is or read as base64. */
export function holdsText(value: unknown, text: string): boolean {
  return texts(value).some((each) => each.includes(text));
}
