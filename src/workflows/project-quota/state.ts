/**
 * What the budget of one project holds (plain JSON, carried across continue-as-new) and its
 * read-only views; the decisions that change it are ./budget.ts. Pure: `now` is passed (epoch ms).
 */
import { defineQuery } from '@temporalio/workflow';
import type { QueuePlace } from '../../contract.js';
import type { QuotaLimit, QuotaTake } from '../../quota/messages.js';
import { clamp, MAX_USES, MAX_WINDOW_MS } from '../../quota/messages.js';

/** One queued take; `requeued`: it asks again after a 429, ahead of every other request. */
export type QueueEntry = Pick<QuotaTake, 'requestId' | 'workflowId' | 'kind' | 'leaseMs'> & {
  enqueuedAt: number;
  requeued?: true;
};

/** A grant held for a queued take until it takes it (or it expires). `owed`: its grant signal. */
export interface Lease extends QueueEntry {
  grantedAt: number;
  expiresAt: number;
  owed?: true;
}

/** A request ID done with, hashed (`idHash`); `taken`: its use counts in the window at `at`, by run `run` (hashed). */
export interface RememberedRequest {
  id: string;
  at: number;
  how: 'taken' | 'released' | 'refused';
  run?: string;
}

/** The state of a project nothing has been asked of yet. */
export function initialState(projectId: string, limit: QuotaLimit, now: number) {
  return {
    projectId,
    limit: clampLimit(limit),
    /** Uses the API accepted last time it refused one: the budget learnt from 429s; null when none came. */
    learntUses: null as number | null,
    /** When the learnt budget last changed: it grows back each quiet window. */
    learntAt: now,
    /** What the next quiet window adds to the learnt budget: 1 after a 429, doubled by each quiet window since. */
    learntStep: 1,
    /** The learnt budget before the 429s of the current pause: the refusals of one burst lower it from there. */
    learntBeforePause: null as number | null,
    queue: [] as QueueEntry[],
    /** Times of the uses within the last window, ascending. */
    window: [] as number[],
    leases: [] as Lease[],
    pausedUntil: null as number | null,
    /** 429s in a row without a use known to have gone through since: the pause grows with it. */
    refusalsInARow: 0,
    /**
     * After a 429 the queue grants one use at a time (a probe); once the probe was taken, no refusal
     * heard by this time means it went through, and grants go on as usual. Null while none is out.
     */
    probeSettlesAt: null as number | null,
    remembered: [] as RememberedRequest[],
    /** Takes a full queue declined (hashed), in order: until `until`, the room that frees is theirs. */
    heldRooms: [] as Array<{ id: string; until: number }>,
    totals: { taken: 0, queued: 0, granted: 0, refused: 0, released: 0, expired: 0, declined: 0 },
  };
}

/** Everything the budget holds: plain JSON, carried across continue-as-new. */
export type BudgetState = ReturnType<typeof initialState>;

/** A limit the budget can hold: whole uses from 1 to {@link MAX_USES}, a window from 1 s to 7 days. */
export function clampLimit(limit: QuotaLimit): QuotaLimit {
  return {
    uses: clamp(Math.floor(limit.uses), 1, MAX_USES),
    windowMs: clamp(Math.floor(limit.windowMs), 1_000, MAX_WINDOW_MS),
  };
}

/** Added to every window edge for the skew between Temporal's clock and the API's: 1 ms per s, at most 1 s. */
export function edgeMarginMs(limit: QuotaLimit): number {
  return Math.min(1_000, Math.ceil(limit.windowMs / 1_000));
}

/**
 * How far ahead of the take a taken use is counted, and so by when its call must be sent: a
 * twentieth of the window, 1 s to 10 s (docs/project-quota.md, "The margin").
 */
export function takeMarginMs(limit: QuotaLimit): number {
  return clamp(Math.round(limit.windowMs / 20), 1_000, 10_000);
}

/** How long a use counts: the window and its edge margin. */
export function spanMs(limit: QuotaLimit): number {
  return limit.windowMs + edgeMarginMs(limit);
}

/** Uses the budget allows per window now: the configured ones, or fewer after 429s. */
export function effectiveUses(s: BudgetState): number {
  return Math.min(s.limit.uses, s.learntUses ?? s.limit.uses);
}

/** The earliest starts of the first `count` places: the window slides one grant at a time, leases used now. */
export function startsOf(s: BudgetState, count: number, now: number): number[] {
  const uses = effectiveUses(s);
  const span = spanMs(s.limit);
  const times = [...s.window, ...s.leases.map(() => now)];
  const start = Math.max(now, s.pausedUntil ?? now);
  const starts: number[] = [];
  for (let i = 0; i < count; i++) {
    const at = times.length >= uses ? Math.max(start, (times[times.length - uses] as number) + span) : start;
    times.push(at);
    starts.push(at);
  }
  return starts;
}

/** The place of the take at `index` of the queue, and the earliest start the budget allows it. */
export function placeAt(s: BudgetState, index: number, now: number): QueuePlace {
  return {
    position: index + 1,
    queueLength: s.queue.length,
    earliestStartAt: new Date(startsOf(s, index + 1, now)[index] as number).toISOString(),
    asOf: new Date(now).toISOString(),
  };
}

/** The counts of {@link snapshotOf} without copying leases or the queue: for a report every pass. */
export function usageOf(s: BudgetState, now: number) {
  const horizon = now - spanMs(s.limit);
  const inWindow = s.window.reduce((n, t) => (t > horizon ? n + 1 : n), 0);
  const leases = s.leases.reduce((n, l) => (l.expiresAt > now ? n + 1 : n), 0);
  return { budgetUses: effectiveUses(s), usesInWindow: inWindow + leases, queued: s.queue.length };
}

/** A project quota's counts: the budget as learnt, the uses in its window (grants out included), the queue. */
export type QuotaUsage = ReturnType<typeof usageOf>;

/** What the `quotaStatus` query answers. */
export function snapshotOf(s: BudgetState, now: number) {
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    projectId: s.projectId,
    /** The configured budget; `effectiveUses`: the one learnt from 429s (lower, or equal when none came). */
    limit: s.limit,
    effectiveUses: effectiveUses(s),
    /** Uses counted in the current window, grants held for queued takes included. */
    usesInWindow: usageOf(s, now).usesInWindow,
    /** Grants held for queued takes that have not taken them yet, oldest first. */
    leases: s.leases
      .filter((l) => l.expiresAt > now)
      .map((l) => ({
        requestId: l.requestId,
        workflowId: l.workflowId,
        grantedAt: iso(l.grantedAt),
        expiresAt: iso(l.expiresAt),
      })),
    queueLength: s.queue.length,
    /** The first requests of the queue, in order (at most 20). */
    queueHead: s.queue.slice(0, 20).map((e) => ({
      requestId: e.requestId,
      workflowId: e.workflowId,
      kind: e.kind,
      enqueuedAt: iso(e.enqueuedAt),
    })),
    /** ISO time the project's budget resumes after a 429, or null. */
    pausedUntil: s.pausedUntil === null || s.pausedUntil <= now ? null : iso(s.pausedUntil),
    /** Counters across every run of the quota workflow (docs/project-quota.md, "What users see"). */
    totals: { ...s.totals },
  };
}

/** What the quota workflow's `quotaStatus` query answers. */
export type ProjectQuotaStatus = ReturnType<typeof snapshotOf>;

/** Query on the quota workflow: its state. */
export const quotaStatusQuery = defineQuery<ProjectQuotaStatus>('quotaStatus');

/** One line for the quota workflow's current details. */
export function summaryOf(s: BudgetState, now: number): string {
  const paused =
    s.pausedUntil === null || s.pausedUntil <= now
      ? ''
      : `; paused after a 429 until ${new Date(s.pausedUntil).toISOString()}`;
  return (
    `Project ${s.projectId}: ${s.window.length + s.leases.length} of ${effectiveUses(s)} uses in the window ` +
    `(configured ${s.limit.uses} per ${Math.round(s.limit.windowMs / 1000)}s), ` +
    `${s.queue.length} queued, ${s.leases.length} granted and not yet taken${paused}`
  );
}
