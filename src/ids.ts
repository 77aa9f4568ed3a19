/**
 * The IDs this project accepts and builds: their length in UTF-8 bytes, whether they are
 * well-formed Unicode, and workflow IDs that always fit the server's limit, readable when short.
 *
 * Pure, no Node modules: the contract imports it, and through it workflow code (the quota
 * workflow's ID is computed there), as well as the client library and the API client.
 */

/**
 * Longest workflow ID built here, in UTF-8 bytes: 255, the `limit.maxIDLength` of the compose
 * file's server (its SQL schema keeps IDs in 255-character columns). Temporal's own default is
 * higher; an ID that fits the strictest common setting works everywhere.
 */
export const MAX_WORKFLOW_ID_BYTES = 255;

/**
 * What marks a cut part: `%~`. Every part is percent-encoded before it is cut, and in a
 * percent-encoded part a `%` always starts `%XX`, so no uncut part holds `%~`: a cut part never
 * equals an uncut one, whatever the inputs.
 */
export const CUT_MARK = '%~';

/** Hex digits of {@link idHash}. */
const HASH_LENGTH = 16;

/**
 * UTF-8 length of `text` in bytes, counted by hand (the same count in every sandbox). A lone
 * surrogate counts 3 bytes, as the U+FFFD an encoder writes for it.
 */
export function utf8ByteLength(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (isHighSurrogate(unit) && isLowSurrogate(text.charCodeAt(i + 1))) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

/**
 * Whether `text` is well-formed Unicode: no lone UTF-16 surrogate. A lone surrogate has no UTF-8
 * form (gRPC and JSON carry it as U+FFFD or an escape, two different strings become one) and
 * `encodeURIComponent` throws on it.
 */
export function isWellFormed(text: string): boolean {
  // With the `u` flag a surrogate pair is one code point, so only a lone surrogate matches.
  return !/\p{Cs}/u.test(text);
}

/**
 * The longest start of `text` of at most `maxBytes` UTF-8 bytes that does not split a code point.
 */
export function utf8Prefix(text: string, maxBytes: number): string {
  let bytes = 0;
  let end = 0;
  while (end < text.length) {
    const unit = text.charCodeAt(end);
    const pair = isHighSurrogate(unit) && isLowSurrogate(text.charCodeAt(end + 1));
    const size = unit < 0x80 ? 1 : unit < 0x800 ? 2 : pair ? 4 : 3;
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += pair ? 2 : 1;
  }
  return text.slice(0, end);
}

/**
 * A stable 64-bit FNV-1a hash of `text`, as 16 hex digits. Over the UTF-16 code units (two bytes
 * each), so strings that differ only in a lone surrogate hash apart. Not cryptographic: it tells
 * apart IDs that people and services choose, not IDs crafted to collide.
 */
export function idHash(text: string): string {
  const prime = 0x100000001b3n;
  const mask = 0xffffffffffffffffn;
  let hash = 0xcbf29ce484222325n;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    hash = ((hash ^ BigInt(unit & 0xff)) * prime) & mask;
    hash = ((hash ^ BigInt(unit >> 8)) * prime) & mask;
  }
  return hash.toString(16).padStart(HASH_LENGTH, '0');
}

/**
 * `encoded` (the percent-encoded form of `whole`) when it fits `maxBytes`; else its longest start
 * that leaves room, then {@link CUT_MARK} and the {@link idHash} of `whole`. The start never ends
 * inside a `%XX` escape, so it stays readable.
 */
export function fitPart(encoded: string, whole: string, maxBytes: number): string {
  if (utf8ByteLength(encoded) <= maxBytes) return encoded;
  let start = utf8Prefix(encoded, maxBytes - CUT_MARK.length - HASH_LENGTH);
  const escape = start.lastIndexOf('%');
  if (escape !== -1 && escape > start.length - 3) start = start.slice(0, escape);
  return `${start}${CUT_MARK}${idHash(whole)}`;
}

/**
 * How a part goes into a workflow ID: `%` and `/` percent-encoded, nothing else, so a part never
 * holds a separator (nor {@link CUT_MARK}). Stable, injective, and a part without `%` or `/` is
 * unchanged: what the agent-job IDs use (`agent-job/<project>/<key>`).
 */
export function encodeIdPart(part: string): string {
  return part.replaceAll('%', '%25').replaceAll('/', '%2F');
}

/**
 * How a part goes into a workflow ID as a URI component (`encodeURIComponent`, a lone surrogate as
 * U+FFFD, which {@link boundedWorkflowId} then always cuts): what the quota workflow's ID uses
 * (`agent-api-quota/<project>`).
 */
export function encodeUriPart(part: string): string {
  return encodeURIComponent(part.replace(/\p{Cs}/gu, '\ufffd'));
}

/**
 * The one way a workflow ID is built here: from parts encoded by `encode` ({@link encodeIdPart},
 * {@link encodeUriPart}), joined by `build`, within {@link MAX_WORKFLOW_ID_BYTES}. It reads as it
 * is when it fits; else every part longer than an equal share of the bytes left is cut by
 * {@link fitPart}. A part that is not well-formed Unicode is always cut: its encoding is not
 * faithful (a lone surrogate reads as U+FFFD, as a part that holds U+FFFD would), the hash of the
 * part itself is. `encode` must map distinct parts to distinct texts without `/` or `%~`.
 */
export function boundedWorkflowId(
  parts: readonly string[],
  encode: (part: string) => string,
  build: (encoded: readonly string[]) => string,
): string {
  const encoded = parts.map(encode);
  const readable = build(encoded);
  const faithful = parts.every(isWellFormed);
  if (faithful && utf8ByteLength(readable) <= MAX_WORKFLOW_ID_BYTES) return readable;
  const fixed = utf8ByteLength(build(parts.map(() => '')));
  const share = Math.floor((MAX_WORKFLOW_ID_BYTES - fixed) / parts.length);
  return build(
    encoded.map((part, index) => {
      const whole = parts[index] ?? '';
      // One byte short of the encoding forces the cut, whatever the share.
      const bytes = isWellFormed(whole) ? share : Math.min(share, utf8ByteLength(part) - 1);
      return fitPart(part, whole, bytes);
    }),
  );
}

function isHighSurrogate(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}
