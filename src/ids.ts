/**
 * The IDs this project accepts and builds: their UTF-8 length, whether they are well-formed Unicode,
 * and workflow IDs that always fit the server's limit, readable when short (docs/starting-jobs.md,
 * "Workflow IDs"). Pure: workflow code imports it (the quota workflow's ID is computed there).
 */

/**
 * Longest workflow ID built here, in UTF-8 bytes: the compose server's `limit.maxIDLength` (its SQL
 * schema's 255-character columns), stricter than Temporal's default, so an ID fits everywhere.
 */
export const MAX_WORKFLOW_ID_BYTES = 255;

/**
 * What marks a cut part. Parts are percent-encoded before they are cut, where a `%` always starts
 * `%XX`: no uncut part holds `%~`, so a cut part never equals an uncut one.
 */
export const CUT_MARK = '%~';

/** Hex digits of {@link idHash}. */
const HASH_LENGTH = 16;

/** The one encoder: the workflow sandbox has `TextEncoder` too, and no `Buffer`. */
const UTF8 = new TextEncoder();

/** UTF-8 length of `text` in bytes; a lone surrogate counts 3, as the U+FFFD an encoder writes. */
export function utf8ByteLength(text: string): number {
  return UTF8.encode(text).length;
}

/**
 * Whether `text` is well-formed Unicode: no lone UTF-16 surrogate, which has no UTF-8 form (gRPC and
 * JSON carry it as U+FFFD or an escape: two strings become one) and `encodeURIComponent` throws on.
 */
export function isWellFormed(text: string): boolean {
  // With the `u` flag a surrogate pair is one code point: only a lone surrogate matches.
  return !/\p{Cs}/u.test(text);
}

/** The longest start of `text` of at most `maxBytes` UTF-8 bytes that does not split a code point. */
export function utf8Prefix(text: string, maxBytes: number): string {
  return text.slice(0, UTF8.encodeInto(text, new Uint8Array(Math.max(0, maxBytes))).read);
}

/**
 * A stable 64-bit FNV-1a hash of `text`'s UTF-16 code units (so lone surrogates hash apart), as 16
 * hex digits. Not cryptographic: it tells apart IDs people choose, not IDs crafted to collide.
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
 * A part of an agent-job workflow ID: only `%` and `/` percent-encoded, so it holds no separator
 * (nor {@link CUT_MARK}) and a part without them reads unchanged. Stable and injective.
 */
export function encodeIdPart(part: string): string {
  return part.replaceAll('%', '%25').replaceAll('/', '%2F');
}

/**
 * A part of the quota workflow's ID: a URI component, a lone surrogate as U+FFFD (which
 * {@link boundedWorkflowId} then always cuts).
 */
export function encodeUriPart(part: string): string {
  return encodeURIComponent(part.replace(/\p{Cs}/gu, '\ufffd'));
}

/**
 * The one way a workflow ID is built here: parts encoded by `encode` (which must map distinct parts
 * to distinct texts without `/` or `%~`), joined by `build`. It reads as it is when it fits
 * {@link MAX_WORKFLOW_ID_BYTES}; else every part over an equal share of the bytes left is cut by
 * {@link fitPart}. A part that is not well-formed Unicode is always cut: its encoding is not
 * faithful (a lone surrogate reads as U+FFFD), the hash of the part itself is.
 */
export function boundedWorkflowId(
  parts: readonly string[],
  encode: (part: string) => string,
  build: (encoded: readonly string[]) => string,
): string {
  const encoded = parts.map(encode);
  const readable = build(encoded);
  if (parts.every(isWellFormed) && utf8ByteLength(readable) <= MAX_WORKFLOW_ID_BYTES) return readable;
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

/** The workflow ID for a project and an idempotency key: `agent-job/<project>/<key>`, never shared. */
export function agentJobWorkflowId(projectId: string, key: string): string {
  return boundedWorkflowId([projectId, key], encodeIdPart, ([p, k]) => `agent-job/${p}/${k}`);
}

/**
 * The ID of the workflow that drives an existing agent job (follow-ups, watching), one per job so
 * that one workflow sends it messages: `agent-job/<project>/job/<jobId>`, a `/` more than a key's.
 */
export function agentJobIdWorkflowId(projectId: string, jobId: string): string {
  return boundedWorkflowId([projectId, jobId], encodeIdPart, ([p, j]) => `agent-job/${p}/job/${j}`);
}

/** The `followUp` update's ID for a key: the key itself when it fits 255 bytes, else cut as a part. */
export function followUpUpdateId(key: string): string {
  if (utf8ByteLength(key) <= MAX_WORKFLOW_ID_BYTES) return key;
  return fitPart(encodeIdPart(key), key, MAX_WORKFLOW_ID_BYTES);
}
