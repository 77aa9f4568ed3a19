/**
 * The budget of API uses of one project: the queue, the rolling window of uses, the grants not yet
 * confirmed (leases) and the budget learnt from 429s. The project quota workflow
 * (src/quota/workflow.ts) holds one and sends the signals it decides.
 *
 * No Temporal and no clock or randomness of its own: every method that needs the time takes `now`
 * (epoch ms) and the pause after a 429 takes `random`, so the workflow passes its deterministic
 * clock and seeded `Math.random`, and tests a fake clock. Decisions come back as values.
 */
import type { QueuePlace } from '../../contract.js';
import type {
  ProjectQuotaStatus,
  QuotaDeclined,
  QuotaLimit,
  QuotaRequest,
  QuotaTake,
  QuotaTakeAnswer,
  QuotaTakeRefusal,
  QuotaUsage,
  QuotaUseKind,
  QuotaWaiting,
} from './messages.js';
import { clamp, clampInt, clampLimit, MAX_LEASE_MS, MAX_WINDOW_MS, MIN_LEASE_MS } from './messages.js';
import { idHash, utf8ByteLength } from '../../ids.js';
import {
  CREATE_BACKOFF,
  MESSAGE_BACKOFF,
  RETRY_JITTER,
  retryDelayMs,
} from '../../agent-api/failure-policy.js';
import { DEFAULT_QUOTA_LEASE_MS } from '../../quota/settings.js';

/**
 * Requests queued at most: at the API's 100 uses an hour, 10 hours of waiting (a job's default
 * timeout is 6). With the longest IDs a full state stays under 1.5 MB of the 2 MB a continue-as-new
 * input may hold (a unit test checks it). Further requests are declined.
 */
export const MAX_QUEUE = 1_000;

/**
 * The queued IDs' JSON form, at most, in bytes: {@link MAX_QUEUE} of the longest plain IDs (579
 * bytes each) fit; IDs with `"` or `\\`, which JSON writes in two bytes, take more room, so a
 * queue of them holds fewer and a full state stays within its bound all the same.
 */
export const MAX_QUEUE_BYTES = 600_000;

/** Grants unconfirmed at once, at most: far above any API call concurrency one project needs; bounds the state. */
export const MAX_LEASES = 200;

/**
 * How long and how many spent, released or refused request IDs are remembered, so that a late
 * repeat (a retried enqueue activity) is declined rather than granted a second use. Kept as
 * hashes: 2,000 of them take about 120 kB of the carried state.
 */
export const REMEMBER_MS = 60 * 60_000;
export const REMEMBERED = 2_000;

/**
 * How long an idle quota workflow (nothing queued, leased, in the window or owed) stays before it
 * ends. Short, because ending loses nothing: the next request starts a new one.
 */
export const QUOTA_IDLE_MS = 60_000;

/**
 * How long past the time a `queue-full` decline names its room is held: the requester's jitter is
 * within it (20 % of the wait), and this margin covers its enqueue activity and the unanswered
 * ones, which ask again after the default lease (src/quota/requester.ts).
 */
const ROOM_HELD_MARGIN_MS = DEFAULT_QUOTA_LEASE_MS + 60_000;

/** Declines owed while the workflow drains for continue-as-new, at most; a requester left unanswered asks again. */
const MAX_DECLINES_OWED = 100;

/** One queued request. */
export interface QueueEntry {
  requestId: string;
  workflowId: string;
  kind: QuotaUseKind;
  enqueuedAt: number;
  leaseMs: number;
  /** Until when a lease that runs out unconfirmed is renewed while the requester runs: see {@link QuotaRequest}. */
  holdUntil?: number;
  /** Asks again after a 429: ahead of every other request. */
  requeued?: true;
  /** Its place is owed: it joined, asked again, or a 429 moved its start. */
  owed?: true;
}

/** A grant not yet confirmed: it counts until spent, refused, released or expired. `owed`: its grant signal. */
export interface Lease extends QueueEntry {
  grantedAt: number;
  expiresAt: number;
}

/**
 * A request ID that is done with, as its {@link idHash}. `taken`: a use taken at once
 * ({@link ProjectBudget.take}) at `at`, counted in the window then; a 429 for it takes it out again.
 */
export interface RememberedRequest {
  id: string;
  at: number;
  how: 'spent' | 'released' | 'refused' | 'taken';
  /** Of a take: the {@link idHash} of the run that took it ({@link QuotaTake.runId}); absent without one. */
  run?: string;
}

/** A request a full queue declined, as its {@link idHash}: a place is held for it until `until`. */
export interface HeldRoom {
  id: string;
  until: number;
}

/** An answer owed to a request that was not queued. */
export interface OwedDecline extends QuotaDeclined {
  workflowId: string;
}

/** Everything the budget holds: plain JSON, carried across continue-as-new. */
export interface BudgetState {
  projectId: string;
  limit: QuotaLimit;
  /** Uses the API accepted last time it refused one: the budget learnt from 429s; null when none came. */
  learntUses: number | null;
  /** When the learnt budget last changed: it grows back each quiet window. */
  learntAt: number;
  /**
   * What the next quiet window adds to the learnt budget: 1 after a 429, doubled by each quiet
   * window since. Absent in states carried from before it: 1.
   */
  learntStep?: number;
  /**
   * The learnt budget before the 429s of the current pause: the refusals of one burst lower the
   * budget from it, not from each other. Absent when no 429 came yet.
   */
  learntBeforePause?: number | null;
  queue: QueueEntry[];
  /** Times of confirmed uses within the last window, ascending. */
  window: number[];
  leases: Lease[];
  pausedUntil: number | null;
  /** 429s in a row without a confirmed use between them: the pause grows with it. */
  refusalsInARow: number;
  remembered: RememberedRequest[];
  declines: OwedDecline[];
  /**
   * Requests a full queue declined, in the order declined, at most {@link MAX_QUEUE}: while they
   * are to come back, the room that frees is theirs, so that new requests cannot take every place
   * as it frees and starve them. Absent in states carried from before it.
   */
  heldRooms?: HeldRoom[];
  /** `taken` is absent in states carried from before the take: 0. */
  totals: Omit<ProjectQuotaStatus['totals'], 'taken'> & { taken?: number };
}

/** A signal the workflow is to send, with its payload. */
export type QuotaNotice =
  | { signal: 'grant'; workflowId: string; body: { requestId: string; leaseExpiresAt: string } }
  | { signal: 'place'; workflowId: string; body: { requestId: string } & QueuePlace }
  | { signal: 'declined'; workflowId: string; body: QuotaDeclined };

/** What became of a request. */
export type RequestOutcome = 'queued' | 'repeat' | 'requeued' | 'queue-full' | 'used-before';

/**
 * The timer the quota loop starts for a wake-up due at `dueAt` while one set for `armedAt` runs:
 * none while the armed one rings no later (woken early, the loop asks {@link ProjectBudget.wake}
 * again and arms for what is left), else `dueAt`, in place of the armed one. So a loop whose
 * wake-up only moves later (each take pushes its idle end on) starts no timer per take.
 */
export function timerToStart(armedAt: number | null, dueAt: number | null): number | null {
  if (dueAt === null) return null;
  return armedAt !== null && armedAt <= dueAt ? null : dueAt;
}

/**
 * Added to every window edge, for the skew between the Temporal server's clock and the API's: a use
 * is counted from the requester's clock after the API answered, which is late enough already.
 * 1 ms per second of window, at most 1 s (3.6 s would be too much for an hour).
 */
export function edgeMarginMs(limit: QuotaLimit): number {
  return Math.min(1_000, Math.ceil(limit.windowMs / 1_000));
}

/**
 * How far ahead of the take a taken use is counted, and so how long after the take its call may
 * be sent: the API counts a use when the request arrives, a moment after the quota answered the
 * take (the answer's trip back, the request's trip out), and the window must not free the use
 * before the API does. A twentieth of the window, from 1 s to 10 s: at most 0.3 % of an hour's
 * budget, and for a call that cannot go out that soon the activity queues instead.
 */
export function takeMarginMs(limit: QuotaLimit): number {
  return clamp(Math.round(limit.windowMs / 20), 1_000, 10_000);
}

/**
 * The budget of one project. Grants in order: requests asking again after a 429 first, then
 * follow-up messages, then creates, each first come first served; at most `uses` per rolling
 * window, fewer after 429s taught it that the API allows fewer.
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
    this.#maxQueue = clampInt(options.maxQueue ?? MAX_QUEUE, 1, MAX_QUEUE);
  }

  /** The state of a project nothing has been asked of yet. */
  static initial(projectId: string, limit: QuotaLimit, now: number): BudgetState {
    return {
      projectId,
      limit: clampLimit(limit),
      learntUses: null,
      learntAt: now,
      learntStep: 1,
      queue: [],
      window: [],
      leases: [],
      pausedUntil: null,
      refusalsInARow: 0,
      remembered: [],
      declines: [],
      heldRooms: [],
      totals: { granted: 0, spent: 0, refused: 0, released: 0, expired: 0, declined: 0, taken: 0 },
    };
  }

  /** The state to carry into the next run (the object itself: plain JSON). */
  get state(): BudgetState {
    return this.#s;
  }

  /** Nothing queued, granted, counted in the window or owed: ending loses nothing. */
  get idle(): boolean {
    const s = this.#s;
    return (
      s.queue.length === 0 &&
      s.leases.length === 0 &&
      s.window.length === 0 &&
      s.declines.length === 0 &&
      (s.heldRooms ?? []).length === 0
    );
  }

  /** Uses the budget allows per window now: the configured ones, or fewer after 429s. */
  get effectiveUses(): number {
    return Math.min(this.#s.limit.uses, this.#s.learntUses ?? this.#s.limit.uses);
  }

  /**
   * Takes a request. Idempotent by request ID: a repeat of a queued request is told its place again,
   * of a granted one its grant again; a repeat of one spent, released or refused is declined. A
   * request that asks again after a 429 goes through {@link refuse}.
   */
  request(request: QuotaRequest, now: number, random: () => number): RequestOutcome {
    const s = this.#s;
    s.limit = clampLimit(request.limit);
    const known = this.#held(request.requestId);
    if (known) {
      known.owed = true;
      return 'repeat';
    }
    const seen = this.#rememberedAt(request.requestId, now);
    if (seen !== null && !this.#takenUnseen(seen, request)) {
      this.#decline(request, 'used-before', now);
      return 'used-before';
    }
    const entry: QueueEntry = {
      requestId: request.requestId,
      workflowId: request.workflowId,
      kind: request.kind,
      enqueuedAt: now,
      leaseMs: clamp(request.leaseMs, MIN_LEASE_MS, MAX_LEASE_MS),
      ...(request.holdUntil !== undefined && { holdUntil: Math.min(request.holdUntil, now + MAX_WINDOW_MS) }),
      owed: true,
    };
    if (request.refused) {
      this.refuse(entry, request.refused, now, random);
      return 'requeued';
    }
    const bytes = queuedBytes(entry);
    if (seen !== null && s.queue.length < this.#maxQueue && this.#queuedBytes() + bytes <= MAX_QUEUE_BYTES) {
      this.#queueBytes = this.#queuedBytes() + bytes;
      this.#turnTakeIntoRequest(seen, entry);
      return 'queued';
    }
    // A request declined before takes the room held for it; a new one only the room not held.
    const held = this.#takeHeldRoom(request.requestId, now);
    const places = this.#maxQueue - (held ? 0 : (s.heldRooms ?? []).length);
    if (s.queue.length >= places || this.#queuedBytes() + bytes > MAX_QUEUE_BYTES) {
      this.#decline(request, 'queue-full', now);
      return 'queue-full';
    }
    this.#queueBytes = this.#queuedBytes() + bytes;
    if (entry.kind === 'create') {
      s.queue.push(entry);
    } else {
      const firstCreate = s.queue.findIndex((e) => e.kind === 'create' && !e.requeued);
      s.queue.splice(firstCreate < 0 ? s.queue.length : firstCreate, 0, entry);
    }
    return 'queued';
  }

  /**
   * A take of one use now (the fast path of a create or message that nothing makes wait): granted
   * only when the budget has room, nothing is queued (a take never goes ahead of a queued request),
   * no 429 pause runs and no 429 since the last confirmed use asks for probing one use at a time
   * (that is the queue's work). Granted, the use counts in the window as a granted and spent one
   * from {@link takeMarginMs} after `now`, by when the call must be sent: no lease, no
   * confirmation to wait for. A repeat of a granted take (an activity attempt retried after one
   * that surely did not reach the API) is granted again without a second use, as a grant covers
   * its call's retries, and its use moves to the repeat's time, as the API counts the attempt that
   * reaches it; a repeat of an ID spent, released or refused is not. Not granted, nothing changes.
   */
  take(take: QuotaTake, now: number): QuotaTakeAnswer {
    const s = this.#s;
    const seen = this.#rememberedAt(take.requestId, now);
    // Only a retried attempt holds its take; a first attempt with a taken ID is the workflow's past.
    if (seen?.how === 'taken' && (take.attempt ?? 1) > 1) return this.#retake(seen, take, now);
    if (seen !== null) return { outcome: 'queue', reason: 'used-before' };
    if (s.leases.some((l) => l.requestId === take.requestId) || this.#queued(take.requestId)) {
      return { outcome: 'queue', reason: 'queue-not-empty' };
    }
    const refusal = this.#refusal(take, now);
    if (refusal !== null) return { outcome: 'queue', reason: refusal };
    // The configured budget may change with each asker, as it does with each request.
    const limit = clampLimit(take.limit);
    s.limit = limit;
    this.#prune(now);
    const margin = takeMarginMs(limit);
    this.#insertUse(now + margin);
    s.totals.granted++;
    s.totals.spent++;
    s.totals.taken = (s.totals.taken ?? 0) + 1;
    this.#remember(take.requestId, 'taken', now + margin, runHash(take));
    return { outcome: 'granted', sendWithinMs: margin };
  }

  /**
   * A repeat of a granted take: its use moves to the repeat's time. One whose use left the window
   * meanwhile (retries further apart than a window) takes a use again, on the same terms as a new
   * take: the budget may have given that room to another call since.
   */
  #retake(seen: RememberedRequest, take: QuotaTake, now: number): QuotaTakeAnswer {
    const margin = takeMarginMs(this.#s.limit);
    const index = this.#s.window.lastIndexOf(seen.at);
    if (index < 0) {
      const refusal = this.#refusal(take, now);
      if (refusal !== null) return { outcome: 'queue', reason: refusal };
      this.#s.totals.spent++;
    } else {
      this.#s.window.splice(index, 1);
    }
    this.#insertUse(now + margin);
    this.#remember(take.requestId, 'taken', now + margin, runHash(take) ?? seen.run);
    return { outcome: 'granted', sendWithinMs: margin };
  }

  /**
   * Whether a request finds its own take, made by the same run, whose answer its call never saw (the
   * answer was lost, or came after its `sendWithinMs`): that call queued without sending, so the
   * taken use was never made. A take of another run (the past of a reset workflow, whose call may
   * have been sent) or without a run is not.
   */
  #takenUnseen(seen: RememberedRequest, request: QuotaRequest): boolean {
    return seen.how === 'taken' && seen.run !== undefined && seen.run === runHash(request);
  }

  /**
   * A take whose answer its call never saw becomes the request that call makes instead: its use
   * leaves the window and its counts are undone, and the request goes to the head of the queue, as
   * the take was granted before anything queued now, so the next grant is its. One use, counted
   * once: as a grant, and as spent when it is.
   */
  #turnTakeIntoRequest(seen: RememberedRequest, entry: QueueEntry): void {
    const s = this.#s;
    const index = s.window.lastIndexOf(seen.at);
    if (index >= 0) s.window.splice(index, 1);
    s.totals.granted--;
    s.totals.spent--;
    s.totals.taken = Math.max(0, (s.totals.taken ?? 0) - 1);
    // Forgotten, so that its release or spend is heard as for any request.
    s.remembered.splice(s.remembered.indexOf(seen), 1);
    s.queue.unshift({ ...entry, enqueuedAt: Math.min(entry.enqueuedAt, seen.at) });
  }

  /**
   * A 429: `entry` asks again for the refused use, at the head of the queue; the refused grant is
   * dropped, the project pauses as every retry waits (src/agent-api/failure-policy.ts) and the budget learns, unless
   * the grant was gone already (its lease ran out during the call): then the 429 teaches nothing.
   */
  refuse(
    entry: QueueEntry,
    refusal: { requestId: string; retryAfterMs: number | null },
    now: number,
    random: () => number,
  ): void {
    const s = this.#s;
    // A use taken at once is refused like a grant: out of the window again, and the budget learns.
    const lease = this.#takeLease(refusal.requestId) ?? this.#untake(refusal.requestId, now);
    this.#queueBytes = null;
    s.queue.unshift({
      ...entry,
      enqueuedAt: lease?.enqueuedAt ?? entry.enqueuedAt,
      requeued: true,
      owed: true,
    });
    // A refusal already heard (a request renamed after `used-before` carries it again) counts once.
    const heard = this.#remembered(refusal.requestId, now);
    if (heard !== null && heard !== 'taken') return;
    this.#remember(refusal.requestId, 'refused', now);
    s.totals.refused++;
    // Uses granted together before the first 429 of a pause are one discovery, not repeats.
    const grantedBeforePause =
      lease !== undefined && s.pausedUntil !== null && lease.grantedAt < s.pausedUntil;
    if (!grantedBeforePause) {
      s.refusalsInARow++;
      s.learntBeforePause = s.learntUses;
    }
    this.#prune(now);
    if (lease) this.#learn(s.window.length + s.leases.length, now);
    const pauseMs = retryDelayMs({
      backoff: entry.kind === 'message' ? MESSAGE_BACKOFF : CREATE_BACKOFF,
      failures: Math.max(1, s.refusalsInARow),
      retryAfterMs: refusal.retryAfterMs,
      random,
    });
    s.pausedUntil = Math.max(s.pausedUntil ?? 0, now + pauseMs);
    // The first few in line are told their start moved; further back it is within the estimate.
    for (const next of s.queue.slice(1, 11)) next.owed = true;
  }

  /**
   * Grants what the budget allows now, in queue order, and returns every signal owed: new grants
   * and grants asked for again, places of requests that joined or moved, declines. Also returns
   * the leases that expired unconfirmed (their uses are back in the budget).
   */
  grant(now: number): { notices: QuotaNotice[]; expired: string[] } {
    const s = this.#s;
    const expired = this.#expireLeases(now);
    this.#prune(now);
    this.#dropLapsedRooms(now);
    this.#relearn(now);
    if (s.pausedUntil !== null && now >= s.pausedUntil) s.pausedUntil = null;
    while (s.pausedUntil === null && s.queue.length > 0 && s.leases.length < MAX_LEASES) {
      if (s.window.length + s.leases.length >= this.effectiveUses) break;
      const { requestId, workflowId, kind, enqueuedAt, leaseMs, holdUntil } = s.queue.shift() as QueueEntry;
      this.#queueBytes = null;
      const expiresAt = now + leaseMs;
      s.leases.push({
        requestId,
        workflowId,
        kind,
        enqueuedAt,
        leaseMs,
        ...(holdUntil !== undefined && { holdUntil }),
        grantedAt: now,
        expiresAt,
        owed: true,
      });
      s.totals.granted++;
      // After a 429, one use at a time until one is confirmed: at most one more 429 per probe.
      if (s.refusalsInARow > 0) break;
    }
    const notices: QuotaNotice[] = [];
    for (const lease of s.leases) {
      if (!lease.owed) continue;
      delete lease.owed;
      const body = { requestId: lease.requestId, leaseExpiresAt: new Date(lease.expiresAt).toISOString() };
      notices.push({ signal: 'grant', workflowId: lease.workflowId, body });
    }
    const lastOwed = findLastIndex(s.queue, (e) => e.owed === true);
    const starts = this.#starts(lastOwed + 1, now);
    s.queue.forEach((entry, index) => {
      if (!entry.owed) return;
      delete entry.owed;
      const place = this.#place(index, starts[index] as number, now);
      notices.push({
        signal: 'place',
        workflowId: entry.workflowId,
        body: { requestId: entry.requestId, ...place },
      });
    });
    for (const { workflowId, ...body } of s.declines.splice(0)) {
      notices.push({ signal: 'declined', workflowId, body });
    }
    return { notices, expired };
  }

  /**
   * A granted use was spent (the API answered other than 429). Counted once: a repeat is ignored,
   * and a late one (after the lease expired or the request was released) still counts, because the
   * API did count it. `at` is when the API answered; never later than `now`.
   */
  spend(requestId: string, at: number | null, now: number): boolean {
    const s = this.#s;
    if (this.#remembered(requestId, now) === 'spent') return false;
    const lease = this.#takeLease(requestId);
    // A request asked again after its lease expired is done with too.
    this.#dropQueued(requestId);
    this.#insertUse(Math.max(Math.min(at ?? now, now), lease?.grantedAt ?? -Infinity));
    s.totals.spent++;
    s.refusalsInARow = 0;
    this.#remember(requestId, 'spent', now);
    return true;
  }

  /**
   * A requester says it still waits for `waiting.requestId`: when this budget holds it neither
   * queued nor granted (a run started after a termination never heard of it), a `not-queued`
   * answer is owed, so that it asks again now. Returns whether one is. Not a decline of a request:
   * no total counts it, no room is held.
   */
  waiting(waiting: Required<QuotaWaiting>, now: number): boolean {
    const s = this.#s;
    const { requestId, workflowId } = waiting;
    if (this.#held(requestId)) return false;
    if (s.declines.length >= MAX_DECLINES_OWED) return false;
    s.declines.push({
      workflowId,
      requestId,
      reason: 'not-queued',
      queueLength: s.queue.length,
      retryAt: new Date(now).toISOString(),
    });
    return true;
  }

  /** A queued or granted request is withdrawn unused (deadline, cancellation, or its workflow is gone). */
  release(requestId: string, now: number): boolean {
    this.#takeHeldRoom(requestId, now);
    if (this.#remembered(requestId, now)) return false;
    const found = this.#dropQueued(requestId) || this.#takeLease(requestId) !== undefined;
    if (found) this.#s.totals.released++;
    // Remembered even when unknown: the request may still be on its way, and must not be granted.
    this.#remember(requestId, 'released', now);
    return found;
  }

  /** The next time something changes on its own: a window edge, a lease expiry, a pause end, a relearn. */
  nextChangeAt(): number | null {
    const s = this.#s;
    const candidates: number[] = [];
    if (s.window.length > 0) candidates.push((s.window[0] as number) + this.#spanMs);
    for (const lease of s.leases) candidates.push(lease.expiresAt);
    if (s.pausedUntil !== null) candidates.push(s.pausedUntil);
    if (s.learntUses !== null) candidates.push(s.learntAt + s.limit.windowMs);
    return candidates.length === 0 ? null : Math.min(...candidates);
  }

  /**
   * When the quota loop must wake on its own, and whether it ends now (the one-timer loop of
   * src/quota/workflow.ts). It wakes to act only when something it acts on changes with
   * time: a lease expires, a pause ends, the learnt budget grows back, or, with requests queued, a
   * use leaves the window. A window edge with nothing queued changes nothing the loop does (a take
   * reads the window itself), so it wakes no one. With nothing to act on, it wakes once, to end:
   * {@link QUOTA_IDLE_MS} after the budget is quiet (its last use out of the window, its held rooms
   * lapsed). A later use pushes that end on without a new wake-up: the loop, woken early, asks
   * again. `busy`: signals of the loop are unacknowledged, so it cannot end yet (their
   * acknowledgement wakes it). Call once per pass, after {@link grant}: it keeps the end it named.
   */
  wake(now: number, busy: boolean): { at: number | null; end: boolean } {
    const quiet = this.#quietAt(now);
    if (quiet === null) this.#endAt = null;
    // Once quiet, the end stays where it was: pruned, the window no longer says when its last use left.
    else if (quiet > now || this.#endAt === null)
      this.#endAt = Math.max(this.#endAt ?? -Infinity, quiet + QUOTA_IDLE_MS);
    const endAt = this.#endAt;
    if (endAt !== null && quiet === now && !busy && now >= endAt) return { at: null, end: true };
    const act = this.#actAt();
    const ending = endAt === null || (busy && endAt <= now) ? null : endAt;
    const at = act === null ? ending : ending === null ? act : Math.min(act, ending);
    return { at, end: false };
  }

  /** The earliest time something the loop acts on changes with time; null when nothing does. */
  #actAt(): number | null {
    const s = this.#s;
    const candidates: number[] = [];
    if (s.queue.length > 0 && s.window.length > 0) candidates.push((s.window[0] as number) + this.#spanMs);
    for (const lease of s.leases) candidates.push(lease.expiresAt);
    if (s.pausedUntil !== null) candidates.push(s.pausedUntil);
    if (s.learntUses !== null) candidates.push(s.learntAt + s.limit.windowMs);
    return candidates.length === 0 ? null : Math.min(...candidates);
  }

  /**
   * When the budget is idle on its own if nothing more arrives (now, when it is): its last use out
   * of the window and its held rooms lapsed. Null while anything is queued, granted or owed.
   */
  #quietAt(now: number): number | null {
    const s = this.#s;
    if (s.queue.length > 0 || s.leases.length > 0 || s.declines.length > 0) return null;
    let at = now;
    const last = s.window[s.window.length - 1];
    if (last !== undefined) at = Math.max(at, last + this.#spanMs);
    for (const room of s.heldRooms ?? []) at = Math.max(at, room.until);
    return at;
  }

  /** The place of a queued request and the earliest start the budget allows it; null when not queued. */
  placeOf(requestId: string, now: number): QueuePlace | null {
    const index = this.#s.queue.findIndex((e) => e.requestId === requestId);
    if (index < 0) return null;
    return this.#place(index, this.#starts(index + 1, now)[index] as number, now);
  }

  /** What the `quotaStatus` query answers. Reads only: a query must not change the state. */
  snapshot(now: number): ProjectQuotaStatus {
    const s = this.#s;
    const iso = (ms: number) => new Date(ms).toISOString();
    const leases = s.leases.filter((l) => l.expiresAt > now);
    return {
      projectId: s.projectId,
      limit: s.limit,
      effectiveUses: this.effectiveUses,
      usesInWindow: this.usage(now).usesInWindow,
      leases: leases.map((l) => ({
        requestId: l.requestId,
        workflowId: l.workflowId,
        grantedAt: iso(l.grantedAt),
        expiresAt: iso(l.expiresAt),
      })),
      queueLength: s.queue.length,
      queueHead: s.queue.slice(0, 20).map((e) => ({
        requestId: e.requestId,
        workflowId: e.workflowId,
        kind: e.kind,
        enqueuedAt: iso(e.enqueuedAt),
      })),
      pausedUntil: s.pausedUntil === null || s.pausedUntil <= now ? null : iso(s.pausedUntil),
      totals: { ...s.totals, taken: s.totals.taken ?? 0 },
    };
  }

  /** One line for the workflow's current details. */
  /** The counts of {@link snapshot} without copying leases or the queue: for a report every pass. */
  usage(now: number): QuotaUsage {
    const s = this.#s;
    const horizon = now - this.#spanMs;
    const inWindow = s.window.reduce((n, t) => (t > horizon ? n + 1 : n), 0);
    const leases = s.leases.reduce((n, l) => (l.expiresAt > now ? n + 1 : n), 0);
    return { budgetUses: this.effectiveUses, usesInWindow: inWindow + leases, queued: s.queue.length };
  }

  summary(now: number): string {
    const s = this.#s;
    const paused =
      s.pausedUntil === null || s.pausedUntil <= now
        ? ''
        : `; paused after a 429 until ${new Date(s.pausedUntil).toISOString()}`;
    return (
      `Project ${s.projectId}: ${s.window.length + s.leases.length} of ${this.effectiveUses} uses in the window ` +
      `(configured ${s.limit.uses} per ${Math.round(s.limit.windowMs / 1000)}s), ` +
      `${s.queue.length} queued, ${s.leases.length} granted and unconfirmed${paused}`
    );
  }

  /** How long a use counts: the window and its edge margin. */
  get #spanMs(): number {
    return this.#s.limit.windowMs + edgeMarginMs(this.#s.limit);
  }

  /**
   * The earliest starts of the first `count` places: the window slides forward one grant at a time,
   * every unconfirmed lease counted as a use made now.
   */
  #starts(count: number, now: number): number[] {
    const s = this.#s;
    const uses = this.effectiveUses;
    const times = [...s.window, ...s.leases.map(() => now)];
    const start = Math.max(now, s.pausedUntil ?? now);
    const starts: number[] = [];
    for (let i = 0; i < count; i++) {
      const at =
        times.length >= uses ? Math.max(start, (times[times.length - uses] as number) + this.#spanMs) : start;
      times.push(at);
      starts.push(at);
    }
    return starts;
  }

  #place(index: number, startAt: number, now: number): QueuePlace {
    return {
      position: index + 1,
      queueLength: this.#s.queue.length,
      earliestStartAt: new Date(startAt).toISOString(),
      asOf: new Date(now).toISOString(),
    };
  }

  #decline(request: QuotaRequest, reason: QuotaDeclined['reason'], now: number): void {
    const s = this.#s;
    s.totals.declined++;
    // When half the queue has been granted, there is room again for whoever asks first.
    const starts = reason === 'queue-full' ? this.#starts(Math.ceil(this.#maxQueue / 2), now) : [];
    const retryAt = Math.max(now + 1_000, starts[starts.length - 1] ?? now);
    if (reason === 'queue-full')
      this.#holdRoom(request.requestId, now + (retryAt - now) * (1 + RETRY_JITTER), now);
    if (s.declines.length >= MAX_DECLINES_OWED) return;
    s.declines.push({
      workflowId: request.workflowId,
      requestId: request.requestId,
      reason,
      queueLength: s.queue.length,
      retryAt: new Date(retryAt).toISOString(),
    });
  }

  /** Holds a place for a declined request until `until`; a repeat keeps its first place in line. */
  #holdRoom(requestId: string, until: number, now: number): void {
    const rooms = (this.#s.heldRooms ??= []);
    this.#dropLapsedRooms(now);
    const id = idHash(requestId);
    const room = rooms.find((r) => r.id === id);
    if (room) room.until = Math.max(room.until, until + ROOM_HELD_MARGIN_MS);
    else if (rooms.length < MAX_QUEUE) rooms.push({ id, until: until + ROOM_HELD_MARGIN_MS });
  }

  /** Whether a place was held for `requestId` (it is taken); rooms whose time ran out are dropped. */
  #takeHeldRoom(requestId: string, now: number): boolean {
    const rooms = this.#s.heldRooms;
    if (!rooms || rooms.length === 0) return false;
    this.#dropLapsedRooms(now);
    const index = rooms.findIndex((r) => r.id === idHash(requestId));
    if (index >= 0) rooms.splice(index, 1);
    return index >= 0;
  }

  #dropLapsedRooms(now: number): void {
    const rooms = this.#s.heldRooms;
    if (rooms && rooms.some((r) => r.until <= now)) this.#s.heldRooms = rooms.filter((r) => r.until > now);
  }

  /** The request's lease, or its entry in the queue: what this budget holds of it. */
  #held(requestId: string): QueueEntry | undefined {
    return this.#s.leases.find((l) => l.requestId === requestId) ?? this.#queued(requestId);
  }

  #queued(requestId: string): QueueEntry | undefined {
    return this.#s.queue.find((e) => e.requestId === requestId);
  }

  #dropQueued(requestId: string): boolean {
    const index = this.#s.queue.findIndex((e) => e.requestId === requestId);
    if (index < 0) return false;
    this.#s.queue.splice(index, 1);
    this.#queueBytes = null;
    return true;
  }

  #queuedBytes(): number {
    this.#queueBytes ??= this.#s.queue.reduce((n, e) => n + queuedBytes(e), 0);
    return this.#queueBytes;
  }

  #takeLease(requestId: string): Lease | undefined {
    const index = this.#s.leases.findIndex((l) => l.requestId === requestId);
    return index < 0 ? undefined : this.#s.leases.splice(index, 1)[0];
  }

  /**
   * Leases that ran out unconfirmed expire, except one whose call may still reach the API (before
   * its `holdUntil`): a create retrying through an outage, or waiting in a backlog, still holds its
   * use, else the budget would hand the same use out again while the call is on its way. Its
   * grant is sent again with the renewed lease: if the requester no longer runs, that signal fails
   * and the use comes back at once (src/quota/workflow.ts).
   */
  #expireLeases(now: number): string[] {
    const s = this.#s;
    for (const lease of s.leases) {
      if (lease.expiresAt > now || lease.holdUntil === undefined || lease.holdUntil <= now) continue;
      lease.expiresAt = Math.min(lease.holdUntil, now + lease.leaseMs);
      lease.owed = true;
    }
    const expired = s.leases.filter((l) => l.expiresAt <= now).map((l) => l.requestId);
    if (expired.length === 0) return expired;
    s.leases = s.leases.filter((l) => l.expiresAt > now);
    s.totals.expired += expired.length;
    return expired;
  }

  /** Drops window entries that have slid out (with the edge margin). */
  #prune(now: number): void {
    const horizon = now - this.#spanMs;
    const window = this.#s.window;
    while (window.length > 0 && (window[0] as number) <= horizon) window.shift();
  }

  /**
   * A 429 when `accepted` uses of ours were in the window or out (the API took at most these, and
   * refused one more): the budget is as much as that evidence shows, no less. The refusals of one
   * burst lower it from what it was before the burst until it matches what the API took. When it
   * took none of ours, the 429 only says the window was full of another client's uses, which leave
   * within a window: the pause and the one-at-a-time probes wait them out, and the budget keeps
   * what it was, where 1 use would regrow for a window per use.
   */
  #learn(accepted: number, now: number): void {
    const s = this.#s;
    const before = s.learntBeforePause === undefined ? s.learntUses : s.learntBeforePause;
    s.learntUses = accepted === 0 ? before : Math.max(1, Math.min(before ?? s.limit.uses, accepted));
    s.learntAt = now;
    s.learntStep = 1;
  }

  /**
   * A learnt budget grows back each window without a 429, up to the configured one: by 1, then
   * 2, 4, ... as the quiet windows add up, so it recovers in proportion to the evidence. Where
   * the API really allows fewer, the 429 that follows restarts the growth at 1 use: about one 429
   * per window, as with a growth of one use; where the fall was short-lived, the budget is back in
   * a few windows, not one window per use.
   */
  #relearn(now: number): void {
    const s = this.#s;
    if (s.learntUses === null || now - s.learntAt < s.limit.windowMs) return;
    const step = s.learntStep ?? 1;
    s.learntUses = s.learntUses + step >= s.limit.uses ? null : s.learntUses + step;
    s.learntStep = step * 2;
    s.learntAt = now;
  }

  #remembered(requestId: string, now: number): RememberedRequest['how'] | null {
    return this.#rememberedAt(requestId, now)?.how ?? null;
  }

  #rememberedAt(requestId: string, now: number): RememberedRequest | null {
    this.#forget(now);
    const id = idHash(requestId);
    return this.#s.remembered.find((r) => r.id === id) ?? null;
  }

  /** Why a take may not have a use now, or null when it may. */
  #refusal(take: QuotaTake, now: number): QuotaTakeRefusal | null {
    const s = this.#s;
    if (s.queue.length > 0) return 'queue-not-empty';
    if (s.pausedUntil !== null && now < s.pausedUntil) return 'paused';
    if (s.refusalsInARow > 0) return 'after-429';
    const limit = clampLimit(take.limit);
    const horizon = now - (limit.windowMs + edgeMarginMs(limit));
    const inWindow = s.window.reduce((n, t) => (t > horizon ? n + 1 : n), 0);
    const uses = Math.min(limit.uses, s.learntUses ?? limit.uses);
    // Every lease counts, even one past its expiry the workflow has not dropped yet: never over.
    return inWindow + s.leases.length >= uses ? 'no-room' : null;
  }

  /** Counts a use made at `when` in the window, which stays in ascending order. */
  #insertUse(when: number): void {
    const window = this.#s.window;
    let i = window.length;
    while (i > 0 && (window[i - 1] as number) > when) i--;
    window.splice(i, 0, when);
  }

  /**
   * A take the API refused (429): its use leaves the window (the API did not count it) and it
   * reads as the grant it stood for, granted when it was taken. Null when the take is unknown or
   * its use has left the window already; the 429 then teaches nothing, as for an expired lease.
   */
  #untake(requestId: string, now: number): Pick<Lease, 'grantedAt' | 'enqueuedAt'> | undefined {
    const taken = this.#rememberedAt(requestId, now);
    if (taken?.how !== 'taken') return undefined;
    const index = this.#s.window.lastIndexOf(taken.at);
    if (index < 0) return undefined;
    this.#s.window.splice(index, 1);
    this.#s.totals.spent--;
    return { grantedAt: taken.at, enqueuedAt: taken.at };
  }

  #remember(requestId: string, how: RememberedRequest['how'], now: number, run?: string): void {
    const id = idHash(requestId);
    const list = this.#s.remembered;
    const index = list.findIndex((r) => r.id === id);
    if (index >= 0) list.splice(index, 1);
    list.push({ id, at: now, how, ...(run !== undefined && { run }) });
    this.#forget(now);
  }

  #forget(now: number): void {
    const list = this.#s.remembered;
    while (
      list.length > REMEMBERED ||
      (list.length > 0 && (list[0] as RememberedRequest).at <= now - REMEMBER_MS)
    ) {
      list.shift();
    }
  }
}

/** The {@link RememberedRequest.run} of a take or request's run; undefined without one. */
function runHash({ runId }: { runId?: string }): string | undefined {
  return runId === undefined ? undefined : idHash(runId);
}

/** The bytes a queued request's IDs take in the carried JSON. */
function queuedBytes(entry: Pick<QueueEntry, 'requestId' | 'workflowId'>): number {
  return utf8ByteLength(JSON.stringify(entry.requestId)) + utf8ByteLength(JSON.stringify(entry.workflowId));
}

function findLastIndex<T>(list: T[], test: (item: T) => boolean): number {
  for (let i = list.length - 1; i >= 0; i--) if (test(list[i] as T)) return i;
  return -1;
}
