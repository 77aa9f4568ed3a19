/**
 * The project quota: one durable budget of API uses per project, shared by every worker.
 *
 * - {@link projectQuotaWorkflow} is the budget itself: a long-lived workflow per project (ID from
 *   `projectQuotaWorkflowId`) holding the queue, the rolling window of uses and the grants not yet
 *   confirmed (leases). Requests arrive through signal-with-start from the enqueue activity; grants
 *   leave as signals to the requesting workflow's ID. It continues-as-new with that state, so its
 *   history stays bounded whatever the queue length, and it ends once nothing is queued, leased or
 *   counted in the window (nothing is then lost: a new request starts it afresh).
 * - {@link ProjectQuotaRequester} is the requesting side, used by the agent-job workflow around its
 *   create and follow-up message calls: it waits for a grant with `condition()` (no API request and
 *   no timer while it waits), confirms the use, and on a 429 asks again at the head of the queue.
 *
 * Deterministic: time is the workflow clock; the only I/O is signals and the enqueue activity.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { AgentJobActivities } from '../activities/index.js';
import {
  FailureType,
  projectQuotaWorkflowId,
  quotaGrantSignal,
  quotaPlaceSignal,
  quotaRequestSignal,
  quotaReleaseSignal,
  quotaSpentSignal,
  quotaStatusQuery,
  SearchAttributes,
  type AgentJobProgress,
  type ProjectQuotaStatus,
  type QueuePlace,
  type QuotaLimit,
  type QuotaRequest,
  type QuotaTicket,
  type QuotaUseKind,
} from '../contract.js';

/** Marks the runs whose creates and follow-up messages go through the project quota. */
export const PROJECT_QUOTA_PATCH = 'project-quota';

/**
 * History events per quota run before continue-as-new. Each request costs about 5 events (update
 * accepted and completed, a signal, a share of a workflow task) and each grant 2 more, so a run
 * carries a few hundred requests; the carried state is about 150 bytes per queued request, so a
 * queue of 10,000 still fits a payload well under 2 MB.
 */
export const QUOTA_EVENTS_PER_RUN = 2_000;

/**
 * How long an idle quota workflow (nothing queued, leased or in the window) stays before it ends.
 * Short, because ending loses nothing: the next request starts a new one.
 */
export const QUOTA_IDLE_MS = 60_000;

/**
 * Added to every window edge, for the skew between the Temporal server's clock and the API's: a use
 * is already counted from the requester's clock after the API answered, which is late enough.
 * 1 ms per second of window, at most 1 s (3.6 s would be too much for an hour).
 */
function edgeMarginMs(limit: QuotaLimit): number {
  return Math.min(1_000, Math.ceil(limit.windowMs / 1_000));
}

/** One queued request. */
interface QueueEntry {
  requestId: string;
  workflowId: string;
  kind: QuotaUseKind;
  enqueuedAt: number;
  leaseMs: number;
}

/** A grant not yet confirmed. It counts against the budget until it is spent, refused, released or expires. */
interface Lease extends QueueEntry {
  grantedAt: number;
  expiresAt: number;
}

/** What a quota run carries into the next one. */
export interface ProjectQuotaState {
  projectId: string;
  limit: QuotaLimit;
  /** Uses the API accepted last time it refused one: the budget learnt from 429s; null when none came. */
  learntUses: number | null;
  /** When the learnt budget last changed: it grows by one use per quiet window. */
  learntAt: number;
  queue: QueueEntry[];
  /** Times of confirmed uses within the last window, ascending. */
  window: number[];
  leases: Lease[];
  pausedUntil: number | null;
  /** 429s in a row without a confirmed use between them: the backoff grows with it. */
  refusalsInARow: number;
  totals: ProjectQuotaStatus['totals'];
}

/** Input of {@link projectQuotaWorkflow}: the project and the first asker's budget, or a carried state. */
export interface ProjectQuotaInput {
  projectId: string;
  limit: QuotaLimit;
  state?: ProjectQuotaState;
}

/**
 * The budget of one project. Grants in order: re-queued requests after a 429 first, then follow-up
 * messages, then creates, each first come first served; at most `uses` per rolling window, fewer
 * after a 429 taught it that the API allows fewer.
 */
export async function projectQuotaWorkflow(input: ProjectQuotaInput): Promise<void> {
  const s: ProjectQuotaState = input.state ?? {
    projectId: input.projectId,
    limit: input.limit,
    learntUses: null,
    learntAt: Date.now(),
    queue: [],
    window: [],
    leases: [],
    pausedUntil: null,
    refusalsInARow: 0,
    totals: { granted: 0, spent: 0, refused: 0, released: 0, expired: 0 },
  };
  let changed = false;
  /** Requests queued since the last pass: each is told its place once. */
  const newcomers = new Set<string>();

  setHandler(quotaRequestSignal, (request: QuotaRequest) => {
    changed = true;
    if (!request?.requestId || !request.workflowId || !request.limit || request.limit.uses < 1) {
      log.error('a quota request without requestId, workflowId or a limit of at least 1 use; ignored', {
        request,
      });
      return;
    }
    s.limit = request.limit;
    const lease = s.leases.find((l) => l.requestId === request.requestId);
    if (lease) {
      // A repeat (the enqueue activity retried): the grant may not have reached the requester.
      sendGrant(lease);
      return;
    }
    if (!s.queue.some((e) => e.requestId === request.requestId)) {
      const entry: QueueEntry = {
        requestId: request.requestId,
        workflowId: request.workflowId,
        kind: request.kind,
        enqueuedAt: Date.now(),
        leaseMs: request.leaseMs,
      };
      if (request.refused) refused(entry, request.refused);
      else enqueue(s, entry);
    }
    newcomers.add(request.requestId);
  });
  setHandler(quotaSpentSignal, ({ requestId, at }) => {
    changed = true;
    const lease = takeLease(s, requestId);
    // A late confirmation of an expired lease still counts: the API did count that use.
    insertSorted(s.window, Math.max(at, lease?.grantedAt ?? at));
    s.totals.spent++;
    s.refusalsInARow = 0;
  });
  setHandler(quotaReleaseSignal, ({ requestId }) => {
    changed = true;
    const queued = s.queue.findIndex((e) => e.requestId === requestId);
    if (queued >= 0) s.queue.splice(queued, 1);
    if (queued >= 0 || takeLease(s, requestId)) s.totals.released++;
  });
  setHandler(quotaStatusQuery, () => describe(s));

  /** Grants a lease by signalling its workflow; a workflow that is gone gives the use back at once. */
  function sendGrant(lease: Lease): void {
    const grant = { requestId: lease.requestId, leaseExpiresAt: new Date(lease.expiresAt).toISOString() };
    send(
      lease.workflowId,
      (h) => h.signal(quotaGrantSignal, grant),
      () => {
        if (takeLease(s, lease.requestId)) s.totals.released++;
        changed = true;
      },
    );
  }

  /** Tells the requests that joined since the last pass where they stand, unless already granted. */
  function tellNewcomers(): void {
    for (const requestId of newcomers) {
      const entry = s.queue.find((e) => e.requestId === requestId);
      if (entry)
        send(entry.workflowId, (h) => h.signal(quotaPlaceSignal, { requestId, ...placeOf(s, requestId) }));
    }
    newcomers.clear();
  }

  /**
   * A 429: the request that asks again takes the head of the queue, the refused grant is dropped,
   * the project pauses, and the budget learns. The refused grant may be gone already (its lease
   * ran out while the call was in flight, as when its worker died): the new request is queued all
   * the same, and then the refusal is no sign that the API allows fewer than the window holds.
   */
  function refused(entry: QueueEntry, refusal: NonNullable<QuotaRequest['refused']>): void {
    const now = Date.now();
    const lease = takeLease(s, refusal.requestId);
    s.totals.refused++;
    s.queue.unshift({ ...entry, enqueuedAt: lease?.enqueuedAt ?? entry.enqueuedAt });
    // Uses granted together before the first 429 of a pause are one discovery, not repeats.
    const grantedBeforePause =
      lease !== undefined && s.pausedUntil !== null && lease.grantedAt < s.pausedUntil;
    if (!grantedBeforePause) s.refusalsInARow++;
    prune(s, now);
    if (lease) {
      // The API took at most what the window holds plus the grants still out, and refused one
      // more: that is its budget for now. Refusals of one burst lower it until it matches.
      const accepted = s.window.length + s.leases.length;
      s.learntUses = Math.max(1, Math.min(s.learntUses ?? s.limit.uses, accepted));
      s.learntAt = now;
    }
    const backoffMs =
      refusal.retryAfterMs ??
      Math.min(s.limit.windowMs, (s.limit.windowMs / s.limit.uses) * 2 ** Math.max(0, s.refusalsInARow - 1));
    s.pausedUntil = Math.max(s.pausedUntil ?? 0, now + Math.max(1_000, backoffMs));
    log.warn('the API refused a use (429); the project quota pauses', {
      projectId: s.projectId,
      requestId: refusal.requestId,
      pausedUntil: new Date(s.pausedUntil).toISOString(),
      learntUses: s.learntUses,
    });
    // Tell the first few in line their start moved; further back, the change is within the estimate.
    // The head is the request that asks again: it is told as a newcomer.
    for (const entry of s.queue.slice(1, 11)) {
      send(entry.workflowId, (h) =>
        h.signal(quotaPlaceSignal, { requestId: entry.requestId, ...placeOf(s, entry.requestId) }),
      );
    }
  }

  /** Grants what the budget allows, in queue order. */
  function grantAvailable(): void {
    const now = Date.now();
    expireLeases(s, now);
    prune(s, now);
    relearn(s, now);
    if (s.pausedUntil !== null && now < s.pausedUntil) return;
    s.pausedUntil = null;
    while (s.queue.length > 0 && usesInWindow(s) < effectiveUses(s)) {
      const entry = s.queue.shift() as QueueEntry;
      const lease: Lease = { ...entry, grantedAt: now, expiresAt: now + entry.leaseMs };
      s.leases.push(lease);
      s.totals.granted++;
      sendGrant(lease);
      // After a 429, one use at a time until one is confirmed: at most one more 429 per probe.
      if (s.refusalsInARow > 0) break;
    }
  }

  function send(
    workflowId: string,
    deliver: (handle: ReturnType<typeof getExternalWorkflowHandle>) => Promise<void>,
    onGone?: () => void,
  ): void {
    void deliver(getExternalWorkflowHandle(workflowId)).then(
      () => undefined,
      (err: unknown) => {
        log.info('a quota signal found no running workflow', { workflowId, error: String(err) });
        onGone?.();
      },
    );
  }

  for (;;) {
    grantAvailable();
    tellNewcomers();
    setCurrentDetails(detailsOf(s));
    if (workflowInfo().historyLength >= QUOTA_EVENTS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      // Not waiting for the signals still in flight: they are recorded and the server delivers them
      // after the continue-as-new; only a grant to a workflow that is gone then comes back by its
      // lease instead of at once. Waiting for them could wait forever under a steady stream.
      await condition(allHandlersFinished);
      return await continueAsNew<typeof projectQuotaWorkflow>({
        projectId: s.projectId,
        limit: s.limit,
        state: s,
      });
    }
    const idle = s.queue.length === 0 && s.leases.length === 0 && s.window.length === 0;
    const wakeAt = idle ? Date.now() + QUOTA_IDLE_MS : nextChangeAt(s);
    changed = false;
    // The acknowledgements of our own signals grow the history too: they wake the loop for a
    // continue-as-new, not only the messages that change the budget.
    const woken = await condition(
      () => changed || workflowInfo().historyLength >= QUOTA_EVENTS_PER_RUN,
      wakeAt === null ? undefined : Math.max(1, wakeAt - Date.now()),
    );
    if (!woken && idle) {
      await condition(allHandlersFinished);
      // A request that arrived in this last task keeps it alive.
      if (!changed) return;
    }
  }
}

/** Follow-up messages go ahead of creates; re-queued requests (after a 429) are put at the head elsewhere. */
function enqueue(s: ProjectQuotaState, entry: QueueEntry): void {
  if (entry.kind === 'create') {
    s.queue.push(entry);
    return;
  }
  const firstCreate = s.queue.findIndex((e) => e.kind === 'create');
  s.queue.splice(firstCreate < 0 ? s.queue.length : firstCreate, 0, entry);
}

function takeLease(s: ProjectQuotaState, requestId: string): Lease | undefined {
  const index = s.leases.findIndex((l) => l.requestId === requestId);
  return index < 0 ? undefined : s.leases.splice(index, 1)[0];
}

function expireLeases(s: ProjectQuotaState, now: number): void {
  const expired = s.leases.filter((l) => l.expiresAt <= now);
  if (expired.length === 0) return;
  s.leases = s.leases.filter((l) => l.expiresAt > now);
  s.totals.expired += expired.length;
  log.warn('grants expired unconfirmed; their uses return to the budget', {
    projectId: s.projectId,
    requestIds: expired.map((l) => l.requestId),
  });
}

/** Drops window entries that have slid out (with the edge margin). */
function prune(s: ProjectQuotaState, now: number): void {
  const horizon = now - s.limit.windowMs - edgeMarginMs(s.limit);
  while (s.window.length > 0 && (s.window[0] as number) <= horizon) s.window.shift();
}

/** A learnt budget grows back by one use per window without a 429, up to the configured one. */
function relearn(s: ProjectQuotaState, now: number): void {
  if (s.learntUses === null || now - s.learntAt < s.limit.windowMs) return;
  s.learntUses = s.learntUses + 1 >= s.limit.uses ? null : s.learntUses + 1;
  s.learntAt = now;
}

function effectiveUses(s: ProjectQuotaState): number {
  return Math.min(s.limit.uses, s.learntUses ?? s.limit.uses);
}

function usesInWindow(s: ProjectQuotaState): number {
  return s.window.length + s.leases.length;
}

function insertSorted(list: number[], value: number): void {
  let i = list.length;
  while (i > 0 && (list[i - 1] as number) > value) i--;
  list.splice(i, 0, value);
}

/** The next time something changes on its own: a window edge, a lease expiry, the end of a pause. */
function nextChangeAt(s: ProjectQuotaState): number | null {
  const candidates: number[] = [];
  const margin = edgeMarginMs(s.limit);
  if (s.window.length > 0) candidates.push((s.window[0] as number) + s.limit.windowMs + margin + 1);
  for (const lease of s.leases) candidates.push(lease.expiresAt);
  if (s.pausedUntil !== null) candidates.push(s.pausedUntil);
  if (s.learntUses !== null) candidates.push(s.learntAt + s.limit.windowMs);
  return candidates.length === 0 ? null : Math.min(...candidates);
}

/**
 * The place of a queued request and the earliest time the budget lets it start: the window slides
 * forward one grant at a time, every unconfirmed lease counted as a use made now.
 */
function placeOf(s: ProjectQuotaState, requestId: string): QueuePlace {
  const now = Date.now();
  const position = s.queue.findIndex((e) => e.requestId === requestId) + 1;
  const uses = effectiveUses(s);
  const span = s.limit.windowMs + edgeMarginMs(s.limit);
  const times = [...s.window, ...s.leases.map(() => now)];
  const start = Math.max(now, s.pausedUntil ?? now);
  let at = start;
  for (let i = 0; i < Math.max(1, position); i++) {
    at = times.length >= uses ? Math.max(start, (times[times.length - uses] as number) + span) : start;
    times.push(at);
  }
  return {
    position,
    queueLength: s.queue.length,
    earliestStartAt: new Date(at).toISOString(),
    asOf: new Date(now).toISOString(),
  };
}

function describe(s: ProjectQuotaState): ProjectQuotaStatus {
  const iso = (ms: number) => new Date(ms).toISOString();
  return {
    projectId: s.projectId,
    limit: s.limit,
    effectiveUses: effectiveUses(s),
    usesInWindow: usesInWindow(s),
    leases: s.leases.map((l) => ({
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
    pausedUntil: s.pausedUntil === null ? null : iso(s.pausedUntil),
    totals: { ...s.totals },
  };
}

function detailsOf(s: ProjectQuotaState): string {
  const paused =
    s.pausedUntil === null ? '' : `; paused after a 429 until ${new Date(s.pausedUntil).toISOString()}`;
  return (
    `Project ${s.projectId}: ${usesInWindow(s)} of ${effectiveUses(s)} uses in the window ` +
    `(configured ${s.limit.uses} per ${Math.round(s.limit.windowMs / 1000)}s), ` +
    `${s.queue.length} queued, ${s.leases.length} granted and unconfirmed${paused}`
  );
}

// ---------------------------------------------------------------------------------------------
// The requesting side
// ---------------------------------------------------------------------------------------------

// Enqueueing is one short gRPC call; it retries (idempotent by request ID) until the workflow's
// own deadline decides otherwise. A regular activity, not a local one: a local activity would hold
// a workflow task slot while the quota workflow, on the same task queue, needs one to answer.
const { enqueueForProjectQuota } = proxyActivities<AgentJobActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/** One use to ask for. */
export interface QuotaUse {
  kind: QuotaUseKind;
  /** Unique within the workflow: `create-0-1`, `message-2-3`, ... (see {@link QuotaRequest}). */
  name: string;
}

/**
 * The agent-job workflow's side of the quota: asks for a use, waits for the grant without any
 * request to the API, runs the call, and tells the quota what became of the use.
 */
export class ProjectQuotaRequester {
  /**
   * Granted uses and queue places, by use name (the last segment of the request ID). Keyed by name,
   * not by request ID, because a replay may run under another workflow ID than the original run.
   */
  readonly #grants = new Set<string>();
  readonly #places = new Map<string, QueuePlace>();
  /** The use being waited for, and what to restore once it is granted. */
  #waiting: {
    use: QuotaUse;
    phase: AgentJobProgress['phase'];
    status: string | null;
    shown: boolean;
  } | null = null;

  constructor(
    private readonly projectId: string,
    private readonly progress: AgentJobProgress,
  ) {
    setHandler(quotaGrantSignal, ({ requestId }) => {
      this.#grants.add(useName(requestId));
    });
    setHandler(quotaPlaceSignal, ({ requestId, ...place }) => {
      this.#places.set(useName(requestId), place);
      if (this.#waiting?.use.name === useName(requestId)) this.#show(place);
    });
  }

  /**
   * Runs `call` within the project's budget. `call(managed)` must not retry a 429 itself when
   * `managed` is true (the quota decides when to try again); it is false when the worker has the
   * quota off for this project. A 429 is never this workflow's failure: the use goes back to the
   * head of the queue and the call runs again when granted.
   */
  async run<T>(use: QuotaUse, call: (managed: boolean) => Promise<T>, deadlineMs: number): Promise<T> {
    let name = use.name;
    let ticket = await this.#enqueue(use.kind, name, deadlineMs);
    if (ticket.state === 'off') return call(false);
    for (let asked = 1; ; asked++) {
      const { requestId } = ticket;
      await this.#awaitGrant(requestId, { ...use, name }, deadlineMs, asked > 1);
      let result: T;
      try {
        result = await call(true);
      } catch (err) {
        const retryAfterMs = rateLimited(err);
        if (retryAfterMs !== undefined) {
          log.warn('the API refused a granted use (429); asking again at the head of the quota queue', {
            requestId,
          });
          // A new request, named for this use and the time it asks: the refused one's grant and place
          // are spent, and a repeat of either cannot be mistaken for the new one's.
          this.#grants.delete(name);
          this.#places.delete(name);
          name = `${use.name}.${asked + 1}`;
          ticket = await this.#enqueue(use.kind, name, deadlineMs, {
            requestId,
            retryAfterMs,
          });
          if (ticket.state === 'off') return call(false);
          continue;
        }
        // Any other answer (or none) may have counted at the API: the use is spent.
        this.#tell((h) => h.signal(quotaSpentSignal, { requestId, at: Date.now() }));
        throw err;
      }
      this.#tell((h) => h.signal(quotaSpentSignal, { requestId, at: Date.now() }));
      return result;
    }
  }

  /** Queues one request with the project's quota workflow, starting it if none runs. */
  #enqueue(
    kind: QuotaUseKind,
    name: string,
    deadlineMs: number,
    refused?: QuotaRequest['refused'],
  ): Promise<QuotaTicket> {
    const { workflowId } = workflowInfo();
    return enqueueForProjectQuota.executeWithOptions(
      {
        summary: `queue for an API use of project ${this.projectId} (${kind}${refused ? ', after a 429' : ''})`,
        scheduleToCloseTimeout: Math.max(1_000, deadlineMs - Date.now()),
      },
      [
        {
          projectId: this.projectId,
          requestId: `${workflowId}/${name}`,
          workflowId,
          kind,
          ...(refused && { refused }),
        },
      ],
    );
  }

  /**
   * Waits for the grant with `condition()`: no timer fires and nothing is polled while it waits,
   * only the workflow's deadline bounds it. The job shows as queued once the quota says it is.
   */
  async #awaitGrant(
    requestId: string,
    use: QuotaUse,
    deadlineMs: number,
    refusedBefore: boolean,
  ): Promise<void> {
    if (this.#grants.has(use.name)) return;
    this.#waiting = {
      use,
      phase: this.progress.phase,
      status: this.progress.lastRecord?.status ?? null,
      shown: false,
    };
    const place = this.#places.get(use.name);
    if (place) this.#show(place);
    try {
      const granted = await condition(() => this.#grants.has(use.name), Math.max(1, deadlineMs - Date.now()));
      if (!granted) {
        this.#tell((h) => h.signal(quotaReleaseSignal, { requestId }));
        throw ApplicationFailure.create({
          type: FailureType.AgentJobTimedOut,
          message:
            `Gave up at the workflow's deadline while queued for project ${this.projectId}'s API budget ` +
            `(${use.kind}); ${refusedBefore ? 'the API had refused it (429)' : 'nothing was sent to the API'}. ` +
            `Raise "timeout" in the input, or the project's quota.`,
          nonRetryable: true,
        });
      }
    } catch (err) {
      if (isCancellation(err)) {
        // Leave the queue without an API call; the signal must go out although this scope is cancelled.
        await CancellationScope.nonCancellable(() =>
          getExternalWorkflowHandle(projectQuotaWorkflowId(this.projectId))
            .signal(quotaReleaseSignal, { requestId })
            .catch((e: unknown) =>
              log.warn('could not leave the quota queue', { requestId, error: String(e) }),
            ),
        );
      }
      throw err;
    }
    const waited = this.#waiting;
    this.#waiting = null;
    if (!waited.shown) return;
    this.progress.phase = waited.phase;
    this.progress.queue = null;
    if (waited.status !== null)
      upsertSearchAttributes([{ key: SearchAttributes.status, value: waited.status }]);
  }

  /** Shows the job as queued: the `status` query, the search attribute, the current details. */
  #show(place: QueuePlace): void {
    const waiting = this.#waiting;
    if (!waiting) return;
    this.progress.phase = 'queued';
    this.progress.queue = place;
    if (!waiting.shown) upsertSearchAttributes([{ key: SearchAttributes.status, value: 'queued' }]);
    waiting.shown = true;
    setCurrentDetails(
      `Queued for project ${this.projectId}'s API budget (${waiting.use.kind}): position ${place.position} ` +
        `of ${place.queueLength}, earliest start ${place.earliestStartAt}`,
    );
  }

  /** Sends to the quota workflow without waiting: the job goes on, and a lost message only costs a lease. */
  #tell(deliver: (handle: ReturnType<typeof getExternalWorkflowHandle>) => Promise<void>): void {
    // Not cancellable: a cancelled workflow still owes the quota word of the use it held.
    void CancellationScope.nonCancellable(() =>
      deliver(getExternalWorkflowHandle(projectQuotaWorkflowId(this.projectId))),
    ).catch((err: unknown) =>
      log.warn('could not reach the project quota workflow', {
        projectId: this.projectId,
        error: String(err),
      }),
    );
  }
}

/** The use name of a request ID: what follows the last `/` (`create-0-1`, `create-0-1.2`). */
function useName(requestId: string): string {
  return requestId.slice(requestId.lastIndexOf('/') + 1);
}

/** The Retry-After (ms, or null without one) of a 429 answered by the API, or undefined for any other error. */
function rateLimited(err: unknown): number | null | undefined {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof ApplicationFailure)) return undefined;
  if (err.cause.type !== FailureType.RateLimited) return undefined;
  // `nextRetryDelay` does not survive the trip to the workflow; the activity puts it in the details.
  const detail = err.cause.details?.[0] as { retryAfterMs?: unknown } | undefined;
  return typeof detail?.retryAfterMs === 'number' ? detail.retryAfterMs : null;
}
