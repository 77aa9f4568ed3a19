/** Validation of the agent job record, which every 2xx body goes through before it reaches history. */
import { z } from 'zod';
import { MAX_JOB_ID_BYTES, type AgentJobRecord } from './types.js';
import { AgentJobError, ErrorName } from '../errors.js';

/**
 * A field the API documents as optional: `null`, a wrong type or a value over its bound read as
 * absent. The workflow decides nothing from it, and failing every call over it would stop every
 * workflow when the service's record drifts.
 */
function optional<T extends z.ZodType>(schema: T) {
  return schema
    .nullish()
    .transform((value) => value ?? undefined)
    .catch(undefined);
}

/** The `source` object: both fields optional, unknown fields kept; anything but an object is dropped. */
const sourceSchema = z.looseObject({
  repository: optional(z.string().max(1_000)),
  ref: optional(z.string().max(1_000)),
});

/**
 * An agent job ID the project can use: a path segment other than `.` and `..` (URL parsing would
 * turn those into another path), well-formed Unicode, at most {@link MAX_JOB_ID_BYTES} bytes.
 */
const jobIdSchema = z
  .string()
  .min(1)
  .refine((id) => id !== '.' && id !== '..', 'must not be "." or ".."')
  // The workflow's input check refuses the same: a job ID the API sent is passed back as `jobId`.
  .refine((id) => id.trim() === id, 'must not have leading or trailing white space')
  .refine((id) => !/\p{Cc}/u.test(id), 'must not hold control characters')
  // With the `u` flag a surrogate pair is one code point: only a lone surrogate is `Cs`.
  .refine((id) => !/\p{Cs}/u.test(id), 'must be well-formed Unicode (no lone surrogate)')
  .refine(
    (id) => new TextEncoder().encode(id).length <= MAX_JOB_ID_BYTES,
    `must be at most ${MAX_JOB_ID_BYTES} UTF-8 bytes`,
  );

/** Longest pull request link kept, normalized. */
const MAX_PR_LINK_LENGTH = 4_096;

/**
 * What a pull request link never holds, and what would let it act where it is shown (the Temporal
 * UI's markdown, a terminal): white space, control and format characters (ESC, bidi overrides),
 * quotes, and what markdown and HTML build links, code and escapes with: `<>[]()`, backtick,
 * backslash.
 */
const NOT_IN_PR_LINK = /[\s\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}'"<>[\]()`\\]/u;

/**
 * A `prLink` as kept: an absolute http(s) URL as the WHATWG parser writes it (`url.href`), with none
 * of {@link NOT_IN_PR_LINK} and no user before the host (`https://github.com@evil`); else the body
 * is not a record (nothing trimmed). An issue names the position and code point, never the link.
 */
function pullRequestLink(raw: string, ctx: z.RefinementCtx): string {
  const refuse = (problem: string) => {
    ctx.addIssue({
      code: 'custom',
      message: `${problem}; a pull request link is a plain absolute http(s) URL`,
    });
    return z.NEVER;
  };
  const bad = NOT_IN_PR_LINK.exec(raw);
  if (bad !== null) {
    const codePoint = (bad[0].codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0');
    return refuse(`has U+${codePoint} at position ${bad.index + 1}`);
  }
  // Not `new URL`'s error: it quotes the input.
  const url = URL.canParse(raw) ? new URL(raw) : null;
  if (url === null) return refuse('is not an absolute URL');
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return refuse('is not an http(s) URL');
  if (url.username !== '' || url.password !== '') return refuse('names a user or password before the host');
  if (url.href.length > MAX_PR_LINK_LENGTH) return refuse(`is over ${MAX_PR_LINK_LENGTH} characters`);
  return url.href;
}

/**
 * Schema of one agent job record; unknown fields are kept. `id`, `status` and `prLink` are what
 * the workflow decides from: they must be right. `status` is any non-empty string: the workflow
 * decides what an undocumented one means.
 */
export const agentJobRecordSchema = z.looseObject({
  id: jobIdSchema,
  status: z.string().min(1).max(100),
  // A missing prLink means "no pull request yet", the same as null.
  prLink: z
    .string()
    .max(MAX_PR_LINK_LENGTH)
    .transform(pullRequestLink)
    .nullish()
    .transform((value) => value ?? null),
  source: optional(sourceSchema),
  // Lengths far above any real value: a record goes into workflow history, so no field may be huge.
  model: optional(z.string().max(1_000)),
  createdAt: optional(z.string().max(100)),
  // archivedAt keeps null: the API documents it as "date-time or null".
  archivedAt: z.string().max(100).nullable().optional().catch(undefined),
});

/**
 * Largest record kept, as JSON: 16 KiB (a real one is under 1 KiB). Every record read goes into
 * history, so unknown fields are kept only within this budget, far from Temporal's 2 MB limit.
 */
export const RECORD_BUDGET_BYTES = 16 * 1024;

/** The fields the API documents; everything else is unknown and kept only within the budget. */
const DOCUMENTED_FIELDS: ReadonlySet<string> = new Set(Object.keys(agentJobRecordSchema.shape));

/** Thrown by {@link parseAgentJobRecord}; the message lists the first problems, never body content. */
export class InvalidAgentJobRecordError extends AgentJobError {
  constructor(message: string) {
    super(ErrorName.InvalidAgentJobRecord, message);
  }
}

/** `body` (JSON-decoded) as an agent job record, a missing `prLink` null. @throws {InvalidAgentJobRecordError} */
export function parseAgentJobRecord(body: unknown): AgentJobRecord {
  const result = agentJobRecordSchema.safeParse(body);
  if (result.success) return withinBudget(withoutDropped(result.data));
  const problems = result.error.issues
    .slice(0, 3)
    .map((issue) => (issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
    .join('; ');
  throw new InvalidAgentJobRecordError(problems);
}

/**
 * The agent job ID of an answer that is not a record: the top-level `id` of a JSON object, or of a
 * body cut short once the value arrived whole; null when none can be read for sure.
 */
export function readableJobId(text: string): string | null {
  const json = parsedOrNull(text) ?? { id: parsedOrNull(topLevelId(text) ?? '') };
  if (typeof json !== 'object' || Array.isArray(json)) return null;
  const id = jobIdSchema.safeParse((json as { id?: unknown }).id);
  return id.success ? id.data : null;
}

/** A JSON string literal, escapes included. */
const STRING_LITERAL = /^"(?:[^"\\]|\\.)*"/;

/**
 * The JSON string literal of the top-level `id` field of an object, read from the start of a body
 * that may be cut anywhere: `{"status":"active","id":"job_1","cr` gives `"job_1"`. Strings are
 * skipped whole, so an `"id"` inside a value or a nested object is never taken.
 */
function topLevelId(text: string): string | null {
  const start = /^\s*\{/.exec(text);
  if (start === null) return null;
  let depth = 1;
  let expectingKey = true;
  for (let i = start[0].length; i < text.length; i++) {
    const char = text[i];
    if (char === '"') {
      const literal = STRING_LITERAL.exec(text.slice(i))?.[0];
      if (literal === undefined) return null;
      i += literal.length - 1;
      if (depth !== 1 || !expectingKey) continue;
      expectingKey = false;
      if (literal !== '"id"') continue;
      const value = /^\s*:\s*/.exec(text.slice(i + 1));
      if (value === null) return null;
      return STRING_LITERAL.exec(text.slice(i + 1 + value[0].length))?.[0] ?? null;
    }
    if (char === '{' || char === '[') depth++;
    else if (char === '}' || char === ']') depth--;
    else if (char === ',' && depth === 1) expectingKey = true;
  }
  return null;
}

/** `text` as JSON, or null when it is not JSON (or is JSON `null`). */
export function parsedOrNull(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    // Not JSON: the caller has nothing to read from it.
    return null;
  }
}

/** The record without the optional fields whose value was dropped (left undefined by the schema). */
function withoutDropped(record: AgentJobRecord): AgentJobRecord {
  const defined = <T extends object>(o: T) =>
    Object.fromEntries(Object.entries(o).filter(([, value]) => value !== undefined)) as T;
  const kept = defined(record);
  if (kept.source) kept.source = defined(kept.source);
  return kept;
}

/**
 * The record with its largest unknown fields dropped (top level first, then inside `source`) until
 * it fits {@link RECORD_BUDGET_BYTES}.
 *
 * @throws {InvalidAgentJobRecordError} when even the documented fields do not fit
 */
function withinBudget(record: AgentJobRecord): AgentJobRecord {
  if (jsonBytes(record) <= RECORD_BUDGET_BYTES) return record;
  const kept: AgentJobRecord = { ...record };
  const source = kept.source ? { ...kept.source } : undefined;
  if (source) kept.source = source;
  const unknown = [
    ...Object.keys(kept)
      .filter((field) => !DOCUMENTED_FIELDS.has(field))
      .map((field) => ({ owner: kept, field })),
    ...Object.keys(source ?? {})
      .filter((field) => field !== 'repository' && field !== 'ref')
      .map((field) => ({ owner: source as Record<string, unknown>, field })),
  ].sort((a, b) => jsonBytes(b.owner[b.field]) - jsonBytes(a.owner[a.field]));
  for (const { owner, field } of unknown) {
    delete owner[field];
    if (jsonBytes(kept) <= RECORD_BUDGET_BYTES) return kept;
  }
  throw new InvalidAgentJobRecordError(
    `the record is ${jsonBytes(kept)} bytes even without unknown fields; the limit is ${RECORD_BUDGET_BYTES}`,
  );
}

function jsonBytes(value: unknown): number {
  return new TextEncoder().encode(JSON.stringify(value) ?? '').length;
}
