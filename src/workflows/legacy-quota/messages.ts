/**
 * The project quota's messages: the quota workflow's names, the signals, update and query that
 * workflows and activities send it, their payloads, and how a payload is read: every field
 * checked and clamped to what the budget can hold, because a value from a signal must never make
 * a handler throw (the quota workflow would stop). docs/project-quota.md tells the protocol.
 *
 * Importable from workflow code: no Node modules, no I/O, no clocks.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { QueuePlace } from '../../contract.js';
import { fitPart, isWellFormed, MAX_WORKFLOW_ID_BYTES, utf8ByteLength } from '../../ids.js';
import { MAX_RETRY_AFTER_MS } from '../../agent-api/failure-policy.js';

/** The project quota's grants unblock waiting jobs, so its tasks go first (a task-queue priority key). */
export const QUOTA_PRIORITY_KEY = 1;

/**
 * The memo key set on a quota workflow started by a versioned worker: the workflow then follows
 * rollouts (AUTO_UPGRADE) instead of staying pinned to the version it was born on. In the memo, not
 * the input, because the SDK asks for a workflow's versioning behavior before it runs the function.
 */
export const FOLLOWS_ROLLOUTS_MEMO = 'followsRollouts';

/** Workflow type of the per-project quota workflow. */
export const PROJECT_QUOTA_WORKFLOW_TYPE = 'projectQuotaWorkflow';

/**
 * The quota workflow's ID for a project: one per project in the namespace, whichever worker asks.
 * The project ID is percent-encoded so that any project ID gives one readable, unambiguous ID.
 * An ID longer than {@link MAX_WORKFLOW_ID_BYTES} (27 CJK characters are 243 bytes encoded) keeps
 * its start and ends with a hash of the project ID (`fitPart`), so it always fits the server.
 * Never throws: a lone surrogate, refused at input, would be hashed too.
 */
export function projectQuotaWorkflowId(projectId: string): string {
  const prefix = 'agent-api-quota/';
  const wellFormed = isWellFormed(projectId);
  const encoded = encodeURIComponent(wellFormed ? projectId : projectId.replace(/\p{Cs}/gu, '\ufffd'));
  const budget = MAX_WORKFLOW_ID_BYTES - prefix.length;
  // A replaced surrogate must never read as the project whose ID holds U+FFFD: force the hash.
  return prefix + fitPart(encoded, projectId, wellFormed ? budget : Math.min(budget, encoded.length - 1));
}

/** A budget: `uses` API uses per rolling `windowMs`. */
export interface QuotaLimit {
  uses: number;
  windowMs: number;
}

/** What a use is for. Follow-up messages go ahead of queued creates (docs/project-quota.md). */
export type QuotaUseKind = 'create' | 'message';

/** A workflow's request for one use, sent by the enqueue activity. */
export interface QuotaRequest {
  /**
   * Unique per ask: `<workflow ID>/<kind>-<turn>-<n>` (`.../create-0-1`, `.../message-2-3`), with
   * `.2`, `.3`... when it asks again after a 429 or after a `used-before` answer. A repeat is
   * recognised; a repeat of a request already spent, released or refused is declined, not granted.
   */
  requestId: string;
  /** Where the grant is signalled: the workflow ID, so a continued run still gets it. */
  workflowId: string;
  kind: QuotaUseKind;
  /** The budget the asking worker is configured with; the newest request's wins. */
  limit: QuotaLimit;
  /** How long the grant may stay unconfirmed before its use returns to the budget, in ms. */
  leaseMs: number;
  /**
   * Epoch ms by which the granted call has surely ended (the requesting workflow's deadline and one
   * attempt more). Until then a lease that runs out unconfirmed is renewed while the requester
   * still runs: a call retrying through an outage keeps its use. Absent: the lease alone.
   */
  holdUntil?: number;
  /**
   * Set when this request asks again for a use the API refused (429): the refused request's ID
   * and the 429's Retry-After (ms, null without one). The project pauses, the refused grant is
   * dropped (if its lease still runs), and this request takes the head of the queue. A request of
   * its own, not a signal to the refused one, so that a repeat is recognised by its ID and a quota
   * workflow that ended in between is started again.
   */
  refused?: { requestId: string; retryAfterMs: number | null };
  /**
   * The run of the asking workflow, as {@link QuotaTake.runId}: a request under the ID of a take
   * that the same run made comes from a call that queued without sending (the take's answer was
   * lost or came too late), so the take's use becomes this request's and is not counted twice.
   */
  runId?: string;
}

/**
 * What the enqueue activity answers: the request was signalled to the project's quota workflow
 * (a grant signal follows), or the asking worker has the quota off for this project.
 */
export type QuotaTicket =
  /** `leaseMs`: the worker's lease, which also paces the check that the quota workflow still runs. */
  { state: 'requested'; requestId: string; leaseMs?: number } | { state: 'off' };

/**
 * Signal (with start) to the quota workflow: queue a request for one use. Idempotent by request ID:
 * a repeat of a queued request gets its place again, of a granted one its grant again. A signal,
 * not an update: a thousand requests arriving at once must all be taken, and the server limits the
 * updates in flight per workflow (10 by default) where it buffers signals.
 */
export const quotaRequestSignal = defineSignal<[QuotaRequest]>('quotaRequest');

/** Signal to the quota workflow: the granted use was spent (the API answered other than 429). */
export const quotaSpentSignal = defineSignal<[{ requestId: string; at: number }]>('quotaSpent');

/** Signal to the quota workflow: a queued or granted request is withdrawn unused (cancellation). */
export const quotaReleaseSignal = defineSignal<[{ requestId: string }]>('quotaRelease');

/**
 * Signal to the quota workflow from a workflow still waiting in its queue, every lease without a
 * word: it fails when no quota workflow runs (one was terminated), and a run that does not hold the
 * request (a new one, started by another job's ask after a termination) answers `not-queued`, so
 * that the waiting workflow asks again at once instead of at its estimated start. A run holding it
 * says nothing. Requesters from before the answer send no `workflowId`, and are not answered.
 */
export const quotaWaitingSignal = defineSignal<[QuotaWaiting]>('quotaWaiting');

/** The body of {@link quotaWaitingSignal}. */
export interface QuotaWaiting {
  requestId: string;
  /** Where to answer `not-queued`; absent from requesters that do not read that answer. */
  workflowId?: string;
}

/**
 * A take of one use now, asked by a create or message activity just before it sends, with
 * update-with-start ({@link quotaTakeUpdate}). Idempotent by request ID: a repeat of a granted take
 * (a retried activity attempt) is granted again without counting a second use.
 */
export interface QuotaTake {
  /** Built as {@link QuotaRequest.requestId}; the update ID too. */
  requestId: string;
  kind: QuotaUseKind;
  /** The budget the asking worker is configured with; the newest one wins, as for a request. */
  limit: QuotaLimit;
  /**
   * The asking activity's attempt. Only a retried attempt (after one that surely did not reach the
   * API) may take a granted ID again; a first attempt that finds its ID taken comes from the
   * workflow's past (a reset) and queues under a new ID. Absent: 1.
   */
  attempt?: number;
  /**
   * The run of the asking workflow. A reset run reuses its request IDs under a new run ID, so the
   * budget tells a take of this run's past (its call may have been sent) from one whose answer
   * this run never saw ({@link QuotaRequest.runId}). Absent: none is told apart.
   */
  runId?: string;
}

/** Why a take was not granted: the caller queues (the quota's state did not change). */
export type QuotaTakeRefusal = 'queue-not-empty' | 'no-room' | 'paused' | 'after-429' | 'used-before';

/**
 * What a take answers: `granted` (the use is counted in the window as spent: send now) or `queue`
 * (nothing changed: ask through the queue, {@link quotaRequestSignal}).
 */
export type QuotaTakeAnswer =
  /** `sendWithinMs`: the use counts from this long after the take; a call not sent by then queues. */
  { outcome: 'granted'; sendWithinMs: number } | { outcome: 'queue'; reason: QuotaTakeRefusal };

/**
 * Update (with start) to the quota workflow: take one use now, if the budget has room, nothing is
 * queued ahead and no 429 pause runs. An update, not a signal, because the activity needs the
 * answer before it sends; a busy quota (or one running code without this handler, or draining for
 * continue-as-new) rejects it or answers `queue`, and the job queues as before.
 */
export const quotaTakeUpdate = defineUpdate<QuotaTakeAnswer, [QuotaTake]>('quotaTake');

/** Signal from the quota workflow to a requesting workflow: its use is granted. */
export const quotaGrantSignal = defineSignal<[{ requestId: string; leaseExpiresAt: string }]>('quotaGrant');

/** Signal from the quota workflow to a queued workflow: its place when it joined, and again after a 429 pause. */
export const quotaPlaceSignal = defineSignal<[{ requestId: string } & QueuePlace]>('quotaPlace');

/**
 * Why the quota workflow did not queue a request: `queue-full` (ask again with the same request ID
 * at `retryAt`), `used-before` (the ID was spent, released or refused: ask under a new ID) or
 * `not-queued` (the answer to a {@link quotaWaitingSignal} for a request this run does not hold:
 * ask again now, with the same ID). Requesters ignore a reason they do not know.
 */
export interface QuotaDeclined {
  requestId: string;
  reason: 'queue-full' | 'used-before' | 'not-queued';
  /** The project's queue length when it declined. */
  queueLength: number;
  /** ISO time to ask again (`queue-full`): about when half the queue will have been granted. */
  retryAt: string;
}

/** Signal from the quota workflow to a requesting workflow: its request was not queued. */
export const quotaDeclinedSignal = defineSignal<[QuotaDeclined]>('quotaDeclined');

/** What the quota workflow's `quotaStatus` query answers. */
export interface ProjectQuotaStatus {
  projectId: string;
  /** The configured budget, and the one learnt from 429s (lower, or equal when none came). */
  limit: QuotaLimit;
  effectiveUses: number;
  /** Uses counted in the current window, granted-but-unconfirmed ones included. */
  usesInWindow: number;
  /** Grants not yet confirmed, oldest first. */
  leases: Array<{ requestId: string; workflowId: string; grantedAt: string; expiresAt: string }>;
  queueLength: number;
  /** The first requests of the queue, in order (at most 20). */
  queueHead: Array<{ requestId: string; workflowId: string; kind: QuotaUseKind; enqueuedAt: string }>;
  /** ISO time the project's budget resumes after a 429, or null. */
  pausedUntil: string | null;
  /** Counters across every run of the quota workflow. */
  totals: {
    granted: number;
    spent: number;
    refused: number;
    released: number;
    expired: number;
    /** Requests not queued: the queue was full, or the request ID was used before. */
    declined: number;
    /** Uses taken at once ({@link quotaTakeUpdate}), counted in `granted` and `spent` too. */
    taken: number;
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

/** Uses per window, at most: the window keeps one time per use, and the API's own budget is 100 an hour. */
export const MAX_USES = 10_000;

/** A request ID is its workflow ID, `/`, and a short use name: longer ones are malformed. */
export const MAX_REQUEST_ID_BYTES = MAX_WORKFLOW_ID_BYTES + 65;

/** The longest window a limit may have: 7 days. */
export const MAX_WINDOW_MS = 7 * 24 * 60 * 60_000;

/** The bounds of a lease: 1 s to a day. */
export const MIN_LEASE_MS = 1_000;
export const MAX_LEASE_MS = 24 * 60 * 60_000;

/** A signal's payload read: the value, or why it is malformed. */
export type Read<T> = { value: T } | { problem: string };

/**
 * Reads a request signal's payload: every field checked, numbers clamped to what the budget can
 * hold. A value from a signal must never make a handler throw, or the quota workflow stops.
 */
export function readQuotaRequest(raw: unknown): Read<QuotaRequest> {
  if (!isRecord(raw)) return { problem: 'not an object' };
  const use = readUse(raw);
  if ('problem' in use) return use;
  const workflowId = readId(raw.workflowId, MAX_WORKFLOW_ID_BYTES);
  if (workflowId === null)
    return { problem: `workflowId must be a string of 1 to ${MAX_WORKFLOW_ID_BYTES} bytes` };
  const leaseMs = finite(raw.leaseMs);
  if (leaseMs === null) return { problem: 'leaseMs must be a number' };
  const holdUntil = finite(raw.holdUntil);
  if (raw.holdUntil !== undefined && raw.holdUntil !== null && holdUntil === null)
    return { problem: 'holdUntil must be a time in ms' };
  const runId = readRunId(raw.runId);
  const request: QuotaRequest = {
    ...use.value,
    workflowId,
    leaseMs: clamp(leaseMs, MIN_LEASE_MS, MAX_LEASE_MS),
    ...(holdUntil !== null && { holdUntil }),
    ...(runId !== null && { runId }),
  };
  if (raw.refused === undefined || raw.refused === null) return { value: request };
  const refused = isRecord(raw.refused) ? raw.refused : {};
  const refusedId = readId(refused.requestId, MAX_REQUEST_ID_BYTES);
  if (refusedId === null) return { problem: 'refused.requestId must be a request ID' };
  return {
    value: {
      ...request,
      refused: { requestId: refusedId, retryAfterMs: readRetryAfter(refused.retryAfterMs) },
    },
  };
}

/**
 * Reads a take's payload, as the quota workflow's update validator does: the same bounds as a
 * request's (IDs in UTF-8 bytes, a known kind, a limit of numbers), so a malformed take is
 * rejected before it is accepted and leaves no trace in the quota's history.
 */
export function readQuotaTake(raw: unknown): Read<QuotaTake> {
  if (!isRecord(raw)) return { problem: 'not an object' };
  const use = readUse(raw);
  if ('problem' in use) return use;
  const attempt = finite(raw.attempt);
  const runId = readRunId(raw.runId);
  return {
    value: {
      ...use.value,
      ...(attempt !== null && { attempt: clampInt(attempt, 1, Number.MAX_SAFE_INTEGER) }),
      ...(runId !== null && { runId }),
    },
  };
}

/** What a request and a take both name: the request ID (bounded in UTF-8 bytes), the kind, the limit. */
function readUse(
  raw: Record<string, unknown>,
): Read<{ requestId: string; kind: QuotaUseKind; limit: QuotaLimit }> {
  const requestId = readId(raw.requestId, MAX_REQUEST_ID_BYTES);
  if (requestId === null)
    return { problem: `requestId must be a string of 1 to ${MAX_REQUEST_ID_BYTES} bytes` };
  if (raw.kind !== 'create' && raw.kind !== 'message')
    return { problem: 'kind must be "create" or "message"' };
  const limit = isRecord(raw.limit) ? raw.limit : {};
  const uses = finite(limit.uses);
  const windowMs = finite(limit.windowMs);
  if (uses === null || windowMs === null) return { problem: 'limit must hold numbers uses and windowMs' };
  return { value: { requestId, kind: raw.kind, limit: clampLimit({ uses, windowMs }) } };
}

/**
 * A run ID (a UUID, as Temporal makes them; at most {@link MAX_WORKFLOW_ID_BYTES} bytes taken), or
 * null when absent or odd: then the request or take is read without one, as from an older worker.
 */
function readRunId(value: unknown): string | null {
  return readId(value, MAX_WORKFLOW_ID_BYTES);
}

/** Reads a spent signal's payload; a missing or odd `at` reads as null (now). */
export function readSpent(raw: unknown): Read<{ requestId: string; at: number | null }> {
  const requestId = isRecord(raw) ? readId(raw.requestId, MAX_REQUEST_ID_BYTES) : null;
  if (requestId === null) return { problem: 'requestId must be a request ID' };
  return { value: { requestId, at: finite((raw as Record<string, unknown>).at) } };
}

/** Reads a release signal's payload. */
export function readRelease(raw: unknown): Read<{ requestId: string }> {
  const requestId = isRecord(raw) ? readId(raw.requestId, MAX_REQUEST_ID_BYTES) : null;
  return requestId === null ? { problem: 'requestId must be a request ID' } : { value: { requestId } };
}

/** Reads a waiting signal's payload; `workflowId` is absent when the requester sent none. */
export function readWaiting(raw: unknown): Read<QuotaWaiting> {
  const requestId = isRecord(raw) ? readId(raw.requestId, MAX_REQUEST_ID_BYTES) : null;
  if (requestId === null) return { problem: 'requestId must be a request ID' };
  const record = raw as Record<string, unknown>;
  if (record.workflowId === undefined) return { value: { requestId } };
  const workflowId = readId(record.workflowId, MAX_WORKFLOW_ID_BYTES);
  if (workflowId === null) return { problem: 'workflowId must be a workflow ID' };
  // A request ID is its workflow's ID and a use name: the answer goes to no other workflow.
  if (!requestId.startsWith(`${workflowId}/`)) return { problem: 'requestId is not one of workflowId' };
  return { value: { requestId, workflowId } };
}

/** A Retry-After in ms: null when absent or not a number, else within 0 and {@link MAX_RETRY_AFTER_MS}. */
function readRetryAfter(value: unknown): number | null {
  if (typeof value !== 'number' || Number.isNaN(value)) return null;
  return Math.min(Math.max(0, value), MAX_RETRY_AFTER_MS);
}

/** A limit the budget can hold: whole uses from 1 to {@link MAX_USES}, a window from 1 s to 7 days. */
export function clampLimit(limit: QuotaLimit | undefined): QuotaLimit {
  return {
    uses: clampInt(limit?.uses ?? 1, 1, MAX_USES),
    windowMs: clampInt(limit?.windowMs ?? 1_000, 1_000, MAX_WINDOW_MS),
  };
}

/**
 * A string ID of at most `maxBytes` UTF-8 bytes, as Temporal measures a workflow ID: a `"` or `\\`
 * is one byte, though the carried JSON writes it as two, so any ID Temporal accepts is read. What
 * JSON writes as `\\uXXXX` (six bytes for a control character) is bounded apart: the JSON form at
 * most twice `maxBytes`, which keeps a full state within its bound (a unit test checks it).
 */
function readId(value: unknown, maxBytes: number): string | null {
  if (typeof value !== 'string' || value.length === 0 || utf8ByteLength(value) > maxBytes) return null;
  return utf8ByteLength(JSON.stringify(value)) - 2 <= 2 * maxBytes ? value : null;
}

function finite(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

export function clamp(value: number, min: number, max: number): number {
  return Math.min(Math.max(value, min), max);
}

export function clampInt(value: number, min: number, max: number): number {
  return clamp(Number.isFinite(value) ? Math.floor(value) : min, min, max);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}
