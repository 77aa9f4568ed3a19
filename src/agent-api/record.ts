/**
 * Validation of the agent job record. Every 2xx body goes through {@link parseAgentJobRecord}, so the
 * rest of the project can trust the shape of what it stores in workflow history.
 */
import { z } from 'zod';
import type { AgentJobRecord } from './types.js';

/**
 * A field the API documents as optional. `null` is read as absent: a server that sends `"model": null`
 * has told us nothing, and failing every call over it would stop every workflow.
 */
function optional<T extends z.ZodType>(schema: T) {
  return schema.nullish().transform((value) => value ?? undefined);
}

/** The `source` object: both fields optional, unknown fields kept. */
const sourceSchema = z.looseObject({
  repository: optional(z.string()),
  ref: optional(z.string()),
});

/**
 * Schema of one agent job record. `status` is any non-empty string: the live service may add values
 * and the workflow, not the client, decides what an undocumented one means. Unknown fields are kept.
 */
export const agentJobRecordSchema = z.looseObject({
  // Lengths far above any real value: a record goes into workflow history, so no field may be huge.
  id: z.string().min(1).max(1_000),
  status: z.string().min(1).max(100),
  // A missing prLink means "no pull request yet", the same as null.
  prLink: z
    .url({ protocol: /^https?$/ })
    .max(4_096)
    .nullish()
    .transform((value) => value ?? null),
  source: optional(sourceSchema),
  model: optional(z.string().max(1_000)),
  createdAt: optional(z.string().max(100)),
  // archivedAt keeps null: the API documents it as "date-time or null".
  archivedAt: z.string().max(100).nullable().optional(),
});

/**
 * Largest record kept, as JSON: 16 KiB. A real record is well under 1 KiB; every record the
 * workflow reads goes into its history (a poll's marker, the status query, the result), so unknown
 * fields are kept only within this budget, and a record is never near Temporal's 2 MB payload limit.
 */
export const RECORD_BUDGET_BYTES = 16 * 1024;

/** The fields the API documents; everything else is unknown and kept only within the budget. */
const DOCUMENTED_FIELDS: ReadonlySet<string> = new Set(Object.keys(agentJobRecordSchema.shape));

/** Thrown by {@link parseAgentJobRecord}; the message lists the first problems, never body content. */
export class InvalidAgentJobRecordError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidAgentJobRecordError';
  }
}

/**
 * Checks that `body` (already JSON-decoded) is an agent job record.
 *
 * @returns the record, with a missing `prLink` set to null and unknown fields kept
 * @throws {InvalidAgentJobRecordError} when it is not one
 */
export function parseAgentJobRecord(body: unknown): AgentJobRecord {
  const result = agentJobRecordSchema.safeParse(body);
  if (result.success) return withinBudget(result.data);
  const problems = result.error.issues
    .slice(0, 3)
    .map((issue) => (issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
    .join('; ');
  throw new InvalidAgentJobRecordError(problems);
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
