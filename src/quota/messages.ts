/**
 * The project quota's messages (docs/project-quota.md), with the schemas their payloads are checked
 * by: a value from a message must never make a handler throw, or the quota workflow would stop.
 * Importable from workflow code: no Node modules, no I/O, no clocks (zod/mini is plain functions).
 */
import * as z from 'zod/mini';
import { defineSignal, defineUpdate } from '@temporalio/workflow';
import type { QueuePlace } from '../contract.js';
import { boundedWorkflowId, encodeUriPart, MAX_WORKFLOW_ID_BYTES, utf8ByteLength } from '../ids.js';
import { MAX_RETRY_AFTER_MS } from '../failure-policy/backoff.js';

export type { QuotaLimit } from './settings.js';

/** The project quota's grants unblock waiting jobs, so its tasks go first (a task-queue priority key). */
export const QUOTA_PRIORITY_KEY = 1;

/**
 * The memo key of a quota workflow that follows rollouts (AUTO_UPGRADE), started by a versioned worker:
 * in the memo, as the SDK asks for a workflow's versioning behavior before it runs the function.
 */
export const FOLLOWS_ROLLOUTS_MEMO = 'followsRollouts';

/** The quota workflow's type; why not 1.1's `projectQuotaWorkflow`: docs/decisions/0015-quota-one-way-in.md. */
export const PROJECT_QUOTA_WORKFLOW_TYPE = 'projectQuota';

/**
 * The quota workflow's ID for a project, one per namespace (1.0's and 1.1's began `agent-api-quota/`):
 * percent-encoded, so readable and unambiguous; cut and hashed when too long (src/ids.ts). Never throws.
 */
export function projectQuotaWorkflowId(projectId: string): string {
  return boundedWorkflowId([projectId], encodeUriPart, ([encoded]) => `agent-quota/${encoded}`);
}

/** What a use is for. Follow-up messages go ahead of queued creates (docs/project-quota.md). */
export type QuotaUseKind = QuotaTake['kind'];

/** Uses per window, at most: the window keeps one time per use, and the API's own budget is 100 an hour. */
export const MAX_USES = 10_000;

/** A request ID is its workflow ID, `/`, and a short use name: longer ones are malformed. */
export const MAX_REQUEST_ID_BYTES = MAX_WORKFLOW_ID_BYTES + 65;

/** The longest window a limit may have: 7 days. */
export const MAX_WINDOW_MS = 7 * 24 * 60 * 60_000;

/**
 * A string ID of at most `maxBytes` UTF-8 bytes, as Temporal measures a workflow ID, whose JSON
 * form (a control character is six bytes there) is at most twice that: a full carried state stays
 * within its bound (a unit test checks it).
 */
function id(maxBytes: number) {
  return z
    .string()
    .check(
      z.refine(
        (value) =>
          value.length > 0 &&
          utf8ByteLength(value) <= maxBytes &&
          utf8ByteLength(JSON.stringify(value)) - 2 <= 2 * maxBytes,
        `must be a string of 1 to ${maxBytes} bytes`,
      ),
    );
}

/** A finite number, clamped into `[min, max]` (whole when `whole`): a limit the budget can hold. */
function bounded(min: number, max: number, whole = false) {
  return z.pipe(
    z.number().check(z.refine(Number.isFinite, 'must be a finite number')),
    z.transform((value) => clamp(whole ? Math.floor(value) : value, min, max)),
  );
}

/** The schema of a {@link QuotaTake}: every field checked, numbers clamped to what the budget holds. */
const takeSchema = z
  .object({
    /** `<workflow ID>/<kind>-<turn>-<n>`, with `.2`, `.3`... after a 429 or a `used-before` answer. */
    requestId: id(MAX_REQUEST_ID_BYTES),
    /** Where the grant of a queued take is signalled. */
    workflowId: id(MAX_WORKFLOW_ID_BYTES),
    /** The asking run: a reset run's reused request ID is `used-before`, this run's repeat is granted again. */
    runId: z.optional(id(MAX_WORKFLOW_ID_BYTES)),
    kind: z.enum(['create', 'message']),
    /** The budget the asking worker is configured with; the newest take's wins. */
    limit: z.object({ uses: bounded(1, MAX_USES, true), windowMs: bounded(1_000, MAX_WINDOW_MS, true) }),
    /** How long a grant from the queue waits for this take again before its use returns: 1 s to a day. */
    leaseMs: bounded(1_000, 24 * 60 * 60_000),
    /** This take asks again for a use the API refused (429): the refused take's ID, Retry-After in ms or null. */
    refused: z.optional(
      z.object({
        requestId: id(MAX_REQUEST_ID_BYTES),
        retryAfterMs: z.nullable(bounded(0, MAX_RETRY_AFTER_MS)),
      }),
    ),
  })
  // A request ID is its workflow's ID and a use name: a grant goes to no other workflow.
  .check(
    z.refine(
      (take) => take.requestId.startsWith(`${take.workflowId}/`),
      'requestId is not one of workflowId',
    ),
  );

/** A take of one use, from a create or message activity just before it sends ({@link quotaTakeUpdate}). */
export type QuotaTake = z.infer<typeof takeSchema>;

/**
 * What a take answers (docs/project-quota.md, "One way in"). `sendWithinMs`: the call must be sent
 * by then, or the use may leave the window before the API counts it.
 */
export type QuotaTakeAnswer =
  | { outcome: 'granted'; sendWithinMs: number; fromQueue: boolean }
  | { outcome: 'queued'; place: QueuePlace }
  | { outcome: 'declined'; retryAt: string; queueLength: number }
  | { outcome: 'used-before' };

/** A message's payload read: the value, or why it is malformed. */
function read<T>(schema: z.ZodMiniType<T>, raw: unknown): { value: T } | { problem: string } {
  const result = schema.safeParse(raw);
  return result.success ? { value: result.data } : { problem: z.prettifyError(result.error) };
}

/** Reads a take's payload, as the update's validator and handler do. */
export const readTake = (raw: unknown) => read(takeSchema, raw);

const releaseSchema = z.object({ requestId: id(MAX_REQUEST_ID_BYTES) });

/** Reads a release's payload. */
export const readRelease = (raw: unknown) => read(releaseSchema, raw);

/**
 * Update (with start) to the quota workflow, the one way in: take one use now, or queue for it. An
 * update, because the activity needs the answer before it sends; a rejected one leaves no event.
 */
export const quotaTakeUpdate = defineUpdate<QuotaTakeAnswer, [QuotaTake]>('quotaTake');

/** Signal from the quota workflow to a queued workflow: take again, a use is held for this request. */
export const quotaGrantSignal = defineSignal<[{ requestId: string }]>('quotaGrant');

/** Signal to the quota workflow: a queued or granted take is withdrawn unused (deadline, cancellation). */
export const quotaReleaseSignal = defineSignal<[{ requestId: string }]>('quotaRelease');

/** `value` within `[min, max]`. */
export function clamp(value: number, min: number, max: number): number {
  return Math.min(Math.max(value, min), max);
}

/**
 * Why a create or message activity sent nothing: the details of its `ProjectQuotaQueue` failure,
 * which src/workflows/project-quota/requester.ts acts on. The take's own answer, or `late` (granted,
 * but the answer came after its `sendWithinMs`: take again, the same ID), or `unanswered` (the quota
 * workflow did not answer: take again after a while).
 */
export type QuotaMiss =
  | Exclude<QuotaTakeAnswer, { outcome: 'granted' | 'queued' }>
  /** `reaskInMs`: the worker's lease, by when a lost grant would be back; the job takes again by then. */
  | { outcome: 'queued'; place: QueuePlace; reaskInMs?: number }
  | { outcome: 'late' }
  | { outcome: 'unanswered'; reason: string };
