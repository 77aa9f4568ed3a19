/**
 * The project quota's messages: the quota workflow's type and IDs, the take (an update, the one way
 * in), the grant (a signal to a queued job), the release (a signal from a job that gives up) and the
 * status query, with the schemas their payloads are checked by: a value from a message must never
 * make a handler throw, or the quota workflow would stop. docs/project-quota.md tells the protocol.
 *
 * Importable from workflow code: no Node modules, no I/O, no clocks (zod/mini is plain functions).
 */
import * as z from 'zod/mini';
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { QueuePlace } from '../contract.js';
import { boundedWorkflowId, encodeUriPart, MAX_WORKFLOW_ID_BYTES, utf8ByteLength } from '../ids.js';
import type { QuotaLimit } from './settings.js';
import { MAX_RETRY_AFTER_MS } from '../failure-policy/backoff.js';

export type { QuotaLimit } from './settings.js';

/** The project quota's grants unblock waiting jobs, so its tasks go first (a task-queue priority key). */
export const QUOTA_PRIORITY_KEY = 1;

/**
 * The memo key set on a quota workflow started by a versioned worker: the workflow then follows
 * rollouts (AUTO_UPGRADE) instead of staying pinned to the version it was born on. In the memo, not
 * the input, because the SDK asks for a workflow's versioning behavior before it runs the function.
 */
export const FOLLOWS_ROLLOUTS_MEMO = 'followsRollouts';

/**
 * Workflow type of the per-project quota workflow. Not the `projectQuotaWorkflow` of 1.0 and 1.1,
 * whose protocol differed and whose code left after 1.2.0 (docs/decisions/0015-quota-one-way-in.md,
 * 0022-upgrades-with-jobs-in-flight.md): a run of that type would replay on no later build.
 */
export const PROJECT_QUOTA_WORKFLOW_TYPE = 'projectQuota';

/** What comes before the project in a quota workflow's ID; 1.0's and 1.1's was `agent-api-quota/`. */
const ID_PREFIX = 'agent-quota/';

/**
 * The quota workflow's ID for a project: one per project in the namespace, whichever worker asks.
 * The project ID is percent-encoded so that any project ID gives one readable, unambiguous ID; one
 * too long for the server keeps its start and ends with a hash of the project ID (the one builder,
 * src/ids.ts). Never throws: a lone surrogate, refused at input, would be hashed too.
 */
export function projectQuotaWorkflowId(projectId: string): string {
  return boundedWorkflowId([projectId], encodeUriPart, ([encoded]) => `${ID_PREFIX}${encoded}`);
}

/** What a use is for. Follow-up messages go ahead of queued creates (docs/project-quota.md). */
export type QuotaUseKind = 'create' | 'message';

/** Uses per window, at most: the window keeps one time per use, and the API's own budget is 100 an hour. */
export const MAX_USES = 10_000;

/** A request ID is its workflow ID, `/`, and a short use name: longer ones are malformed. */
export const MAX_REQUEST_ID_BYTES = MAX_WORKFLOW_ID_BYTES + 65;

/** The longest window a limit may have: 7 days. */
export const MAX_WINDOW_MS = 7 * 24 * 60 * 60_000;

/** The bounds of a lease: 1 s to a day. */
export const MIN_LEASE_MS = 1_000;
export const MAX_LEASE_MS = 24 * 60 * 60_000;

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
    requestId: id(MAX_REQUEST_ID_BYTES),
    workflowId: id(MAX_WORKFLOW_ID_BYTES),
    runId: z.optional(id(MAX_WORKFLOW_ID_BYTES)),
    kind: z.enum(['create', 'message']),
    limit: z.object({ uses: bounded(1, MAX_USES, true), windowMs: bounded(1_000, MAX_WINDOW_MS, true) }),
    leaseMs: bounded(MIN_LEASE_MS, MAX_LEASE_MS),
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

/**
 * A take of one use, asked by a create or message activity just before it sends, with
 * update-with-start ({@link quotaTakeUpdate}). Idempotent by request ID: a repeat of a queued take
 * hears its place again, of a granted one (the same run) its grant again, without a second use.
 */
export interface QuotaTake {
  /** `<workflow ID>/<kind>-<turn>-<n>`, with `.2`, `.3`... after a 429 or a `used-before` answer. */
  requestId: string;
  /** Where the grant of a queued take is signalled. */
  workflowId: string;
  /**
   * The run of the asking workflow. A reset run reuses its request IDs under a new run ID: a take
   * of another run's used ID (whose call may have been sent) is `used-before`; one of this run's
   * (a retried attempt, an answer that came too late) is granted again. Absent: none is told apart.
   */
  runId?: string;
  kind: QuotaUseKind;
  /** The budget the asking worker is configured with; the newest take's wins. */
  limit: QuotaLimit;
  /** How long a grant from the queue waits for this take again before its use returns, in ms. */
  leaseMs: number;
  /**
   * Set when this take asks again for a use the API refused (429): the refused take's ID and the
   * 429's Retry-After (ms, null without one). The refused use leaves the window, the project pauses
   * and learns, and this take goes to the head of the queue. Counted once however often it repeats.
   */
  refused?: { requestId: string; retryAfterMs: number | null };
}

/**
 * What a take answers. `granted`: the use counts from `sendWithinMs` after the take, by when the
 * call must be sent (`fromQueue`: the grant of a queued take). `queued`: the take waits in the queue
 * at `place`; a grant signal follows. `declined`: the queue is full, take again at `retryAt`.
 * `used-before`: another run used this ID (a reset workflow): take under a new one.
 */
export type QuotaTakeAnswer =
  | { outcome: 'granted'; sendWithinMs: number; fromQueue: boolean }
  | { outcome: 'queued'; place: QueuePlace }
  | { outcome: 'declined'; retryAt: string; queueLength: number }
  | { outcome: 'used-before' };

/** A message's payload read: the value, or why it is malformed. */
export type Read<T> = { value: T } | { problem: string };

function read<T>(schema: z.ZodMiniType<T>, raw: unknown): Read<T> {
  const result = schema.safeParse(raw);
  return result.success ? { value: result.data } : { problem: z.prettifyError(result.error) };
}

/** Reads a take's payload, as the update's validator and handler do. */
export function readTake(raw: unknown): Read<QuotaTake> {
  return read(takeSchema, raw);
}

const releaseSchema = z.object({ requestId: id(MAX_REQUEST_ID_BYTES) });

/** Reads a release's payload. */
export function readRelease(raw: unknown): Read<{ requestId: string }> {
  return read(releaseSchema, raw);
}

/**
 * Update (with start) to the quota workflow, the one way in: take one use now, or queue for it. An
 * update, because the activity needs the answer before it sends; a rejected one leaves no event.
 */
export const quotaTakeUpdate = defineUpdate<QuotaTakeAnswer, [QuotaTake]>('quotaTake');

/** Signal from the quota workflow to a queued workflow: take again, a use is held for this request. */
export const quotaGrantSignal = defineSignal<[{ requestId: string }]>('quotaGrant');

/** Signal to the quota workflow: a queued or granted take is withdrawn unused (deadline, cancellation). */
export const quotaReleaseSignal = defineSignal<[{ requestId: string }]>('quotaRelease');

/** What the quota workflow's `quotaStatus` query answers. */
export interface ProjectQuotaStatus {
  projectId: string;
  /** The configured budget, and the one learnt from 429s (lower, or equal when none came). */
  limit: QuotaLimit;
  effectiveUses: number;
  /** Uses counted in the current window, grants held for queued takes included. */
  usesInWindow: number;
  /** Grants held for queued takes that have not taken them yet, oldest first. */
  leases: Array<{ requestId: string; workflowId: string; grantedAt: string; expiresAt: string }>;
  queueLength: number;
  /** The first requests of the queue, in order (at most 20). */
  queueHead: Array<{ requestId: string; workflowId: string; kind: QuotaUseKind; enqueuedAt: string }>;
  /** ISO time the project's budget resumes after a 429, or null. */
  pausedUntil: string | null;
  /** Counters across every run of the quota workflow. */
  totals: {
    /** Uses counted: taken at once or after a grant. */
    taken: number;
    /** Takes that waited in the queue. */
    queued: number;
    /** Grants of queued takes (each then taken, released or expired). */
    granted: number;
    refused: number;
    released: number;
    expired: number;
    /** Takes a full queue turned away. */
    declined: number;
  };
}

/** Query on the quota workflow: its state. */
export const quotaStatusQuery = defineQuery<ProjectQuotaStatus>('quotaStatus');

/** A project quota's counts: the budget as learnt, the uses in its window (grants out included), the queue. */
export interface QuotaUsage {
  budgetUses: number;
  usesInWindow: number;
  queued: number;
}

export function clamp(value: number, min: number, max: number): number {
  return Math.min(Math.max(value, min), max);
}

/**
 * Why a create or message activity sent nothing: the details of its benign, non-retryable
 * `ProjectQuotaQueue` failure, which the requesting workflow acts on (./requester.ts). The take's
 * own answer, or `late` (granted, but the answer came after its `sendWithinMs`: take again, the same
 * ID), or `unanswered` (the quota workflow did not answer: take again after a while).
 */
export type QuotaMiss =
  | Exclude<QuotaTakeAnswer, { outcome: 'granted' | 'queued' }>
  /** `reaskInMs`: the worker's lease, by when a lost grant would be back; the job takes again by then. */
  | { outcome: 'queued'; place: QueuePlace; reaskInMs?: number }
  | { outcome: 'late' }
  | { outcome: 'unanswered'; reason: string };
