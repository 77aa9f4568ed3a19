/**
 * What the budget of one project decides (docs/project-quota.md): a take granted, queued or
 * declined, the grants of the queue, a 429's pause and what it teaches, when the quota workflow
 * wakes; what it holds and shows is ./state.ts. No Temporal, clock or randomness of its own: `now`
 * (epoch ms) and `random` are passed, the workflow's deterministic ones or a test's fake clock.
 */
import { clamp, type QuotaTake, type QuotaTakeAnswer, type QuotaUseKind } from '../../quota/messages.js';
import {
  clampLimit,
  effectiveUses,
  placeAt,
  spanMs,
  startsOf,
  takeMarginMs,
  type BudgetState,
  type Lease,
  type QueueEntry,
  type RememberedRequest,
} from './state.js';
import { idHash, utf8ByteLength } from '../../ids.js';
import { CREATE_BACKOFF, MESSAGE_BACKOFF, RETRY_JITTER, retryDelayMs } from '../../failure-policy/backoff.js';
import { DEFAULT_QUOTA_LEASE_MS } from '../../quota/settings.js';

/**
 * Requests queued at most, further takes are declined: at 100 uses an hour, 10 hours of waiting (a
 * job's default timeout is 6); a full state stays under 1.5 MB of a continue-as-new input's 2 MB.
 */
export const MAX_QUEUE = 1_000;

/**
 * The queued IDs' JSON form, at most, in bytes: {@link MAX_QUEUE} of the longest plain IDs (579
 * bytes each) fit; fewer of IDs that JSON escapes, so a full state stays within its bound.
 */
export const MAX_QUEUE_BYTES = 600_000;

/** Grants held at once, at most: far above any API call concurrency one project needs; bounds the state. */
export const MAX_LEASES = 200;

/**
 * How long and how many taken, released or refused request IDs are remembered, so that another
 * run's take of one is `used-before`, not counted again. As hashes: 2,000 take about 120 kB.
 */
export const REMEMBER_MS = 60 * 60_000;
export const REMEMBERED = 2_000;

/** How long an idle quota workflow stays before it ends: short, as the next take starts a new one. */
export const QUOTA_IDLE_MS = 60_000;

/**
 * How long past the time a decline names its room is held: the wait's jitter (20 %) is added apart;
 * this covers the call activity and a re-ask after silence.
 */
const ROOM_HELD_MARGIN_MS = DEFAULT_QUOTA_LEASE_MS + 60_000;

/** A grant to signal: the queued take's workflow may take again. */
export type Grant = Pick<QueueEntry, 'workflowId' | 'requestId'>;

/**
 * The timer to start for a wake-up due at `dueAt` while one for `armedAt` runs: none while the armed
 * one rings no later (the loop then asks {@link ProjectBudget.wake} again), else `dueAt` in its
 * place. So a wake-up that only moves later (each take pushes the idle end on) starts no timer.
 */
export function timerToStart(armedAt: number | null, dueAt: number | null): number | null {
  if (dueAt === null) return null;
  return armedAt !== null && armedAt <= dueAt ? null : dueAt;
}

/**
 * The budget of one project: at most `uses` per rolling window, fewer after 429s taught it so;
 * grants first to takes after a 429, then messages, then creates, each first come first served.
 */
export class ProjectBudget {
  readonly #s: BudgetState;
  readonly #maxQueue: number;
  /** The queue's {@link MAX_QUEUE_BYTES} measure; null when it is to be counted again. */
  #queueBytes: number | null = null;
  /** When the loop may end if nothing more arrives, as {@link wake} last named it; null while it may not. */
  #endAt: number | null = null;

  /** `maxQueue` lowers {@link MAX_QUEUE} (tests); it is never raised above it. */
  constructor(state: BudgetState, options: { maxQueue?: number } = {}) {
    this.#s = state;
    this.#maxQueue = clamp(Math.floor(options.maxQueue ?? MAX_QUEUE), 1, MAX_QUEUE);
  }

  /** The state to carry into the next run (the object itself: plain JSON). */
  get state(): BudgetState {
    return this.#s;
  }

  /**
   * A take of one use, idempotent by request ID (docs/project-quota.md, "One way in" and "The
   * margin"); `refused` is heard first, once.
   */
  take(take: QuotaTake, now: number, random: () => number): QuotaTakeAnswer {
    const s = this.#s;
    s.limit = clampLimit(take.limit);
    if (take.refused) this.#refuse(take.refused, take.kind, now, random);
    const seen = this.#rememberedAt(take.requestId, now);
    if (seen !== null) {
      if (seen.how !== 'taken' || seen.run === undefined || seen.run !== runHash(take)) {
        return { outcome: 'used-before' };
      }
      s.remembered.splice(s.remembered.indexOf(seen), 1);
      const index = s.window.lastIndexOf(seen.at);
      if (index >= 0) {
        s.window.splice(index, 1);
        s.totals.taken--;
        return this.#count(take, now, false);
      }
      // Its use left the window meanwhile (retries further apart than a window): a take anew.
    }
    if (this.#takeLease(take.requestId)) return this.#count(take, now, true);
    const queued = s.queue.findIndex((e) => e.requestId === take.requestId);
    if (queued >= 0) return { outcome: 'queued', place: placeAt(s, queued, now) };
    if (!take.refused && !this.#busy(now)) return this.#count(take, now, false);
    return this.#enqueue(take, seen?.at ?? now, now);
  }

  /** Counts a granted take's use, due by its margin, and remembers it as this run's. */
  #count(take: QuotaTake, now: number, fromQueue: boolean): QuotaTakeAnswer {
    const s = this.#s;
    const margin = takeMarginMs(s.limit);
    this.#prune(now);
    this.#insertUse(now + margin);
    s.totals.taken++;
    // The probe after a 429 goes out now: a refusal of it would be heard within twice the margin.
    if (fromQueue && s.refusalsInARow > 0) s.probeSettlesAt = now + 2 * margin;
    this.#remember(take.requestId, 'taken', now + margin, runHash(take));
    return { outcome: 'granted', sendWithinMs: margin, fromQueue };
  }

  /** Whether a new take must queue: something queued, a pause, a probe, or no room. */
  #busy(now: number): boolean {
    const s = this.#s;
    if (s.queue.length > 0 || s.refusalsInARow > 0) return true;
    if (s.pausedUntil !== null && now < s.pausedUntil) return true;
    const horizon = now - spanMs(s.limit);
    const inWindow = s.window.reduce((n, t) => (t > horizon ? n + 1 : n), 0);
    // Every lease counts, even one past its expiry the workflow has not dropped yet: never over.
    return inWindow + s.leases.length >= effectiveUses(s);
  }

  /** Queues a take in order, or declines it when the queue is full (the room held for it aside). */
  #enqueue(take: QuotaTake, since: number, now: number): QuotaTakeAnswer {
    const s = this.#s;
    const { requestId, workflowId, kind, leaseMs } = take;
    const entry: QueueEntry = { requestId, workflowId, kind, enqueuedAt: Math.min(since, now), leaseMs };
    const bytes = queuedBytes(entry);
    let index: number;
    if (take.refused) {
      // The use the API refused asks again first, whatever the queue holds.
      index = 0;
      s.queue.unshift({ ...entry, requeued: true });
    } else {
      // A take declined before takes the room held for it; a new one only the room not held.
      const held = this.#takeHeldRoom(requestId, now);
      const places = this.#maxQueue - (held ? 0 : s.heldRooms.length);
      if (s.queue.length >= places || this.#queuedBytes() + bytes > MAX_QUEUE_BYTES) {
        return this.#decline(requestId, now);
      }
      const firstCreate = s.queue.findIndex((e) => e.kind === 'create' && !e.requeued);
      index = kind === 'create' || firstCreate < 0 ? s.queue.length : firstCreate;
      s.queue.splice(index, 0, entry);
    }
    this.#queueBytes = this.#queuedBytes() + bytes;
    s.totals.queued++;
    return { outcome: 'queued', place: placeAt(s, index, now) };
  }

  /** A full queue: take again when half of it will have been granted; a place is held till then. */
  #decline(requestId: string, now: number): QuotaTakeAnswer {
    const s = this.#s;
    s.totals.declined++;
    const starts = startsOf(s, Math.ceil(this.#maxQueue / 2), now);
    const retryAt = Math.max(now + 1_000, starts[starts.length - 1] ?? now);
    this.#holdRoom(requestId, now + (retryAt - now) * (1 + RETRY_JITTER) + ROOM_HELD_MARGIN_MS, now);
    return { outcome: 'declined', retryAt: new Date(retryAt).toISOString(), queueLength: s.queue.length };
  }

  /** A 429 for the use of take `refused.requestId`, counted once (docs/project-quota.md, "429" and "Learning"). */
  #refuse(
    refused: { requestId: string; retryAfterMs: number | null },
    kind: QuotaUseKind,
    now: number,
    random: () => number,
  ): void {
    const s = this.#s;
    const heard = this.#rememberedAt(refused.requestId, now);
    if (heard !== null && heard.how !== 'taken') return;
    const index = heard === null ? -1 : s.window.lastIndexOf(heard.at);
    if (index >= 0) s.window.splice(index, 1);
    if (heard !== null) s.totals.taken--;
    this.#remember(refused.requestId, 'refused', now);
    s.totals.refused++;
    // Uses taken together before the first 429 of a pause are one discovery, not repeats.
    const takenBeforePause = index >= 0 && s.pausedUntil !== null && (heard?.at ?? 0) < s.pausedUntil;
    if (!takenBeforePause) {
      s.refusalsInARow++;
      s.learntBeforePause = s.learntUses;
    }
    s.probeSettlesAt = null;
    this.#prune(now);
    // A use already out of the window teaches nothing.
    if (index >= 0) this.#learn(s.window.length + s.leases.length, now);
    const pauseMs = retryDelayMs({
      backoff: kind === 'message' ? MESSAGE_BACKOFF : CREATE_BACKOFF,
      failures: Math.max(1, s.refusalsInARow),
      retryAfterMs: refused.retryAfterMs,
      random,
    });
    s.pausedUntil = Math.max(s.pausedUntil ?? 0, now + pauseMs);
  }

  /**
   * Grants what the budget allows now, in queue order, each holding a use until its lease ends.
   * Returns the grants to signal and the requests whose leases expired untaken (uses back).
   */
  grant(now: number): { grants: Grant[]; expired: string[] } {
    const s = this.#s;
    const expired = s.leases.filter((l) => l.expiresAt <= now).map((l) => l.requestId);
    if (expired.length > 0) {
      s.leases = s.leases.filter((l) => l.expiresAt > now);
      s.totals.expired += expired.length;
    }
    this.#prune(now);
    this.#dropLapsedRooms(now);
    this.#relearn(now);
    if (s.pausedUntil !== null && now >= s.pausedUntil) s.pausedUntil = null;
    // No refusal within the probe's time: it went through, and the queue flows again.
    if (s.probeSettlesAt !== null && now >= s.probeSettlesAt) {
      s.refusalsInARow = 0;
      s.probeSettlesAt = null;
    }
    const probing = () => s.refusalsInARow > 0 && (s.leases.length > 0 || s.probeSettlesAt !== null);
    while (s.pausedUntil === null && s.queue.length > 0 && s.leases.length < MAX_LEASES && !probing()) {
      if (s.window.length + s.leases.length >= effectiveUses(s)) break;
      const entry = s.queue.shift() as QueueEntry;
      this.#queueBytes = null;
      s.leases.push({ ...entry, grantedAt: now, expiresAt: now + entry.leaseMs, owed: true });
      s.totals.granted++;
    }
    const grants: Grant[] = [];
    for (const lease of s.leases) {
      if (!lease.owed) continue;
      delete lease.owed;
      grants.push({ workflowId: lease.workflowId, requestId: lease.requestId });
    }
    return { grants, expired };
  }

  /** A queued or granted take is withdrawn unused (deadline, cancellation, or its workflow is gone). */
  release(requestId: string, now: number): boolean {
    this.#takeHeldRoom(requestId, now);
    if (this.#rememberedAt(requestId, now) !== null) return false;
    const index = this.#s.queue.findIndex((e) => e.requestId === requestId);
    if (index >= 0) {
      this.#s.queue.splice(index, 1);
      this.#queueBytes = null;
    }
    const found = index >= 0 || this.#takeLease(requestId) !== undefined;
    if (found) this.#s.totals.released++;
    // Remembered even when unknown: the take may still be on its way, and must not be counted.
    this.#remember(requestId, 'released', now);
    return found;
  }

  /**
   * When the quota loop must wake on its own ({@link actAt}; docs/project-quota.md, "What it costs"),
   * and whether it ends now. `busy`: its signals are unacknowledged, so it cannot end yet. Call once
   * per pass, after {@link grant}.
   */
  wake(now: number, busy: boolean): { at: number | null; end: boolean } {
    const quiet = this.#quietAt(now);
    if (quiet === null) this.#endAt = null;
    // Once quiet, the end stays where it was: pruned, the window no longer says when its last use left.
    else if (quiet > now || this.#endAt === null)
      this.#endAt = Math.max(this.#endAt ?? -Infinity, quiet + QUOTA_IDLE_MS);
    const endAt = this.#endAt;
    if (endAt !== null && quiet === now && !busy && now >= endAt) return { at: null, end: true };
    return { at: this.#actAt(endAt === null || (busy && endAt <= now) ? null : endAt), end: false };
  }

  /**
   * The earliest time something the loop acts on changes with time, or its end `endAt`; null when
   * nothing does. A use leaving the window counts only with takes queued: else a take reads it itself.
   */
  #actAt(endAt: number | null): number | null {
    const s = this.#s;
    const candidates = s.leases.map((l) => l.expiresAt);
    if (endAt !== null) candidates.push(endAt);
    if (s.queue.length > 0 && s.window.length > 0) candidates.push((s.window[0] as number) + spanMs(s.limit));
    if (s.pausedUntil !== null) candidates.push(s.pausedUntil);
    if (s.probeSettlesAt !== null) candidates.push(s.probeSettlesAt);
    if (s.learntUses !== null) candidates.push(s.learntAt + s.limit.windowMs);
    return candidates.length === 0 ? null : Math.min(...candidates);
  }

  /** When the budget is idle on its own if nothing more arrives; null while anything is queued or granted. */
  #quietAt(now: number): number | null {
    const s = this.#s;
    if (s.queue.length > 0 || s.leases.length > 0) return null;
    const last = s.window[s.window.length - 1];
    const lastOut = last === undefined ? now : last + spanMs(s.limit);
    return Math.max(now, lastOut, ...s.heldRooms.map((r) => r.until));
  }

  /** Holds a place for a declined take until `until`; a repeat keeps its first place in line. */
  #holdRoom(requestId: string, until: number, now: number): void {
    this.#dropLapsedRooms(now);
    const rooms = this.#s.heldRooms;
    const id = idHash(requestId);
    const room = rooms.find((r) => r.id === id);
    if (room) room.until = Math.max(room.until, until);
    else if (rooms.length < MAX_QUEUE) rooms.push({ id, until });
  }

  /** Whether a place was held for `requestId` (it is taken); rooms whose time ran out are dropped. */
  #takeHeldRoom(requestId: string, now: number): boolean {
    this.#dropLapsedRooms(now);
    const rooms = this.#s.heldRooms;
    const index = rooms.length === 0 ? -1 : rooms.findIndex((r) => r.id === idHash(requestId));
    if (index >= 0) rooms.splice(index, 1);
    return index >= 0;
  }

  #dropLapsedRooms(now: number): void {
    const rooms = this.#s.heldRooms;
    if (rooms.some((r) => r.until <= now)) this.#s.heldRooms = rooms.filter((r) => r.until > now);
  }

  #queuedBytes(): number {
    this.#queueBytes ??= this.#s.queue.reduce((n, e) => n + queuedBytes(e), 0);
    return this.#queueBytes;
  }

  #takeLease(requestId: string): Lease | undefined {
    const index = this.#s.leases.findIndex((l) => l.requestId === requestId);
    return index < 0 ? undefined : this.#s.leases.splice(index, 1)[0];
  }

  /** Drops window entries that have slid out (with the edge margin). */
  #prune(now: number): void {
    const horizon = now - spanMs(this.#s.limit);
    const window = this.#s.window;
    while (window.length > 0 && (window[0] as number) <= horizon) window.shift();
  }

  /** A 429 when `accepted` uses of ours were in the window (docs/project-quota.md, "Learning"). */
  #learn(accepted: number, now: number): void {
    const s = this.#s;
    const before = s.learntBeforePause;
    s.learntUses = accepted === 0 ? before : Math.max(1, Math.min(before ?? s.limit.uses, accepted));
    s.learntAt = now;
    s.learntStep = 1;
  }

  /** The learnt budget grows back each quiet window (docs/project-quota.md, "Learning"). */
  #relearn(now: number): void {
    const s = this.#s;
    if (s.learntUses === null || now - s.learntAt < s.limit.windowMs) return;
    s.learntUses = s.learntUses + s.learntStep >= s.limit.uses ? null : s.learntUses + s.learntStep;
    s.learntStep *= 2;
    s.learntAt = now;
  }

  #rememberedAt(requestId: string, now: number): RememberedRequest | null {
    this.#forget(now);
    const id = idHash(requestId);
    return this.#s.remembered.find((r) => r.id === id) ?? null;
  }

  /** Counts a use made at `when` in the window, which stays in ascending order. */
  #insertUse(when: number): void {
    const window = this.#s.window;
    let i = window.length;
    while (i > 0 && (window[i - 1] as number) > when) i--;
    window.splice(i, 0, when);
  }

  #remember(requestId: string, how: RememberedRequest['how'], at: number, run?: string): void {
    const id = idHash(requestId);
    const list = this.#s.remembered;
    const index = list.findIndex((r) => r.id === id);
    if (index >= 0) list.splice(index, 1);
    list.push({ id, at, how, ...(run !== undefined && { run }) });
  }

  #forget(now: number): void {
    const list = this.#s.remembered;
    while (list.length > REMEMBERED || (list[0]?.at ?? Infinity) <= now - REMEMBER_MS) list.shift();
  }
}

/** The {@link RememberedRequest.run} of a take's run; undefined without one. */
const runHash = ({ runId }: { runId?: string }) => (runId === undefined ? undefined : idHash(runId));

/** The bytes a queued take's IDs take in the carried JSON. */
function queuedBytes(entry: Pick<QueueEntry, 'requestId' | 'workflowId'>): number {
  return utf8ByteLength(JSON.stringify(entry.requestId)) + utf8ByteLength(JSON.stringify(entry.workflowId));
}
