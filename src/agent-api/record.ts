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
  id: z.string().min(1),
  status: z.string().min(1),
  // A missing prLink means "no pull request yet", the same as null.
  prLink: z
    .url({ protocol: /^https?$/ })
    .nullish()
    .transform((value) => value ?? null),
  source: optional(sourceSchema),
  model: optional(z.string()),
  createdAt: optional(z.string()),
  // archivedAt keeps null: the API documents it as "date-time or null".
  archivedAt: z.string().nullable().optional(),
});

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
  if (result.success) return result.data;
  const problems = result.error.issues
    .slice(0, 3)
    .map((issue) => (issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
    .join('; ');
  throw new InvalidAgentJobRecordError(problems);
}
