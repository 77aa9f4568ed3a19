/**
 * The requesting side of the project quota, used by the agent-job workflow around its create and
 * follow-up message calls: it asks the project's quota workflow (./workflow.ts) for a use,
 * waits for the grant with `condition()` (no API request while it waits), runs the call, and tells
 * the quota what became of the use. A 429 asks again at the head of the queue; silence, or a full
 * queue, asks again under the same request ID; {@link ProjectQuotaRequester.settle} waits for what
 * it told the quota to arrive.
 *
 * Deterministic: time is the workflow clock, jitter its seeded `Math.random`.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  isCancellation,
  getExternalWorkflowHandle,
  log,
  proxyActivities,
  proxySinks,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { AgentJobActivities } from '../activities/index.js';
import { refusesQuotaUse } from '../agent-api/failure-policy.js';
import { FailureType, SearchAttributes, type QueuePlace } from '../contract.js';
import type { ProjectMetricsSinks } from '../workflows/sinks.js';
import {
  projectQuotaWorkflowId,
  quotaDeclinedSignal,
  quotaGrantSignal,
  quotaPlaceSignal,
  quotaReleaseSignal,
  quotaSpentSignal,
  quotaWaitingSignal,
  type QuotaDeclined,
  type QuotaRequest,
  type QuotaTicket,
  type QuotaUseKind,
} from './messages.js';
import { AskSchedule, placeOf, useNameOf } from './waiting.js';

export { QUOTA_REASK_MS } from './waiting.js';

/**
 * The longest one create or message attempt takes (its `startToCloseTimeout` in
 * ../workflows/agent-job/calls.ts): a call can still reach the API this long after the deadline that bounds
 * its activity, so a grant is held that long past it (`holdUntil`).
 */
const CALL_ATTEMPT_MS = 75_000;

// Enqueueing is one short gRPC call; it retries (idempotent by request ID) until the workflow's
// own deadline decides otherwise. A regular activity, not a local one: a local activity would hold
// a workflow task slot while the quota workflow, on the same task queue, needs one to answer.
const { enqueueForProjectQuota } = proxyActivities<AgentJobActivities>({
  startToCloseTimeout: '30s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '30s' },
});

/** The decline reasons this requester acts on; an unknown one (from a newer quota build) is ignored. */
const DECLINE_REASONS: ReadonlyArray<QuotaDeclined['reason']> = ['queue-full', 'used-before', 'not-queued'];

/** One use to ask for. */
export interface QuotaUse {
  kind: QuotaUseKind;
  /** Unique within the workflow, across continue-as-new: `create-1-1`, `message-2-3`, ... */
  name: string;
}

/**
 * How an ask ended: granted (under this request ID), turned away for a used ID, granted with a
 * lease that ran out before the call could start (a grant from the workflow's past), or the quota
 * is off.
 */
type Answer =
  | { kind: 'granted'; requestId: string }
  | { kind: 'used-before' }
  | { kind: 'stale'; requestId: string }
  | { kind: 'off' };

/**
 * The agent-job workflow's side of the quota: asks for a use, waits for the grant without any
 * request to the API, runs the call, and tells the quota what became of the use.
 */
export class ProjectQuotaRequester {
  /**
   * What the quota said, by use name (the last segment of the request ID). Keyed by name, not by
   * request ID, because a replay may run under another workflow ID than the original run. A grant
   * keeps the lease end of the first grant signal: a renewal extends the use of a call under way,
   * never the time a call may start under it.
   */
  readonly #grants = new Map<string, number>();
  readonly #places = new Map<string, QueuePlace>();
  readonly #declines = new Map<string, QuotaDeclined>();
  /** Signals to the quota workflow not yet delivered: {@link settle} waits for them. */
  readonly #sending = new Set<Promise<void>>();
  /** The use being waited for, and whether the job shows as queued. */
  #waiting: { use: QuotaUse; shown: boolean } | null = null;

  /** The job shows as queued (phase `queued`), and its place when the quota named one. */
  #queued = false;
  #queue: QueuePlace | null = null;

  constructor(private readonly projectId: string) {
    setHandler(quotaGrantSignal, (grant) => {
      const name = useNameOf(grant);
      if (name === null || this.#grants.has(name)) return;
      const leaseExpiresAt = Date.parse((grant as { leaseExpiresAt?: unknown }).leaseExpiresAt as string);
      this.#grants.set(name, Number.isNaN(leaseExpiresAt) ? Infinity : leaseExpiresAt);
    });
    setHandler(quotaPlaceSignal, (signal) => {
      const name = useNameOf(signal);
      const place = placeOf(signal);
      if (name === null || place === null) return;
      this.#places.set(name, place);
      if (this.#waiting?.use.name === name) this.#show(place, null);
    });
    setHandler(quotaDeclinedSignal, (declined) => {
      const name = useNameOf(declined);
      if (name === null || !DECLINE_REASONS.includes(declined.reason)) return;
      this.#declines.set(name, declined);
    });
  }

  /** A create or message waits in the project quota's queue: the run's phase is `queued`. */
  get queued(): boolean {
    return this.#queued;
  }

  /** The place in the queue the quota last named, while queued; null when it named none. */
  get queue(): QueuePlace | null {
    return this.#queue;
  }

  /**
   * Runs `call` within the project's budget. `call(true)` must not retry a 429 itself (the quota
   * decides when: the use goes back to the head of the queue); `call(false)` runs when the worker
   * has the quota off for this project. `refused`: the API refused (429) the use `use.name` took
   * at once (the fast path, ../workflows/agent-job/calls.ts), so this asks again at the head of the queue,
   * under the next name, as after a refused grant.
   */
  async run<T>(
    use: QuotaUse,
    call: (managed: boolean) => Promise<T>,
    deadlineMs: number,
    refusedTake?: QuotaRequest['refused'],
  ): Promise<T> {
    let asks = refusedTake ? 2 : 1;
    let name = refusedTake ? `${use.name}.${asks}` : use.name;
    let refused: QuotaRequest['refused'] = refusedTake;
    for (;;) {
      const answer = await this.#ask({ ...use, name }, deadlineMs, refused);
      if (answer.kind === 'off') return call(false);
      if (answer.kind === 'used-before') {
        // A request ID is never granted twice: this one was used before, so the use asks under a new one.
        log.warn('the quota had seen this request ID before; asking under a new one', { use: name });
        name = `${use.name}.${++asks}`;
        continue;
      }
      if (answer.kind === 'stale') {
        // A grant whose lease ran out before the call could start: one from before a reset of this
        // workflow (its call may have been made already), or one that waited out a backlog. Not
        // used: it is given back, and the use asks under a new ID.
        const { requestId } = answer;
        log.warn("a grant's lease ran out before its call; giving it back and asking again", { requestId });
        void this.#tell((h) => h.signal(quotaReleaseSignal, { requestId }));
        this.#forget(name);
        name = `${use.name}.${++asks}`;
        continue;
      }
      const { requestId } = answer;
      let result: T;
      try {
        result = await call(true);
      } catch (err) {
        const retryAfterMs = rateLimited(err);
        // Any answer but a 429 (or none) may have counted at the API: the use is spent.
        if (retryAfterMs === undefined) {
          void this.#tell((h) => h.signal(quotaSpentSignal, { requestId, at: Date.now() }));
          throw err;
        }
        log.warn('the API refused a granted use (429); asking again at the head of the quota queue', {
          requestId,
        });
        // A new request, so that a repeat of the refused one's grant cannot be mistaken for it.
        this.#forget(name);
        refused = { requestId, retryAfterMs };
        name = `${use.name}.${++asks}`;
        continue;
      }
      void this.#tell((h) => h.signal(quotaSpentSignal, { requestId, at: Date.now() }));
      this.#forget(name);
      return result;
    }
  }

  /**
   * Resolves once every spent and release signal sent so far has been delivered or has failed.
   * Await it before the workflow completes, fails or continues as new: the server drops the
   * signals a closed run had not delivered yet.
   */
  async settle(): Promise<void> {
    while (this.#sending.size > 0) await Promise.all(this.#sending);
  }

  /**
   * Asks for `use` and waits for the grant with `condition()`, bounded by the deadline. Asks again
   * under the same ID when nothing is heard for {@link QUOTA_REASK_MS} (or that long past the
   * estimated start), and at the time a full queue names. Leaves the queue when it gives up.
   */
  async #ask(use: QuotaUse, deadlineMs: number, refused: QuotaRequest['refused']): Promise<Answer> {
    const requestId = `${workflowInfo().workflowId}/${use.name}`;
    const askedAt = Date.now();
    try {
      const ticket = await this.#enqueue(use, deadlineMs, refused);
      if (ticket.state === 'off') return { kind: 'off' };
      // An ask after one that failed keeps showing the job as queued.
      this.#waiting = { use, shown: this.#waiting?.shown ?? false };
      const known = this.#places.get(use.name);
      if (known) this.#show(known, null);
      const schedule = new AskSchedule(Date.now(), ticket.leaseMs);
      for (;;) {
        // What came with the ticket or during the wait: the signals may arrive before the activity's result.
        const grantExpiresAt = this.#grants.get(use.name);
        if (grantExpiresAt !== undefined) {
          this.#stopWaiting();
          // On the workflow clock: a reset run's first task runs at the time of the reset.
          if (Date.now() >= grantExpiresAt) return { kind: 'stale', requestId };
          proxySinks<ProjectMetricsSinks>().projectMetrics.quotaWaited(
            this.projectId,
            (Date.now() - askedAt) / 1000,
          );
          return { kind: 'granted', requestId };
        }
        const declined = this.#declines.get(use.name);
        this.#declines.delete(use.name);
        if (declined?.reason === 'used-before') {
          this.#stopWaiting();
          return { kind: 'used-before' };
        }
        if (declined?.reason === 'not-queued') schedule.notHeld(Date.now());
        else if (declined)
          this.#showWaitForRoom(declined, schedule.declined(declined, Date.now(), Math.random));
        if (Date.now() >= deadlineMs) throw this.#gaveUp(use, refused !== undefined);
        if (schedule.dueToAsk(Date.now())) {
          if ((await this.#enqueue(use, deadlineMs, refused)).state === 'off') {
            this.#stopWaiting();
            return { kind: 'off' };
          }
          schedule.asked(Date.now());
          continue;
        }
        // Woken at least every lease, to check that the quota workflow still runs.
        const woken = await condition(
          () => this.#grants.has(use.name) || this.#declines.has(use.name),
          schedule.wakeInMs(Date.now(), deadlineMs),
        );
        if (woken) continue;
        // A place heard meanwhile moves the time to ask again; read only now, so a place starts no timer.
        schedule.placeHeard(this.#places.get(use.name));
        if (!schedule.dueToCheck(Date.now())) continue;
        // A terminated quota workflow forgot the queue: ask again now, not at the estimated start. A
        // run started since that never heard of the request answers `not-queued` (above).
        if (!(await this.#quotaRuns(requestId))) schedule.notHeld(Date.now());
      }
    } catch (err) {
      // Leave the queue without an API call (the request may have reached it even when the enqueue
      // failed); the signal goes out even when this scope is cancelled.
      await this.#tell((h) => h.signal(quotaReleaseSignal, { requestId }));
      // No longer waiting: the job leaves the queue, and a next ask starts from what it shows now.
      // No search attribute update, which would change the commands of this task: a failed ask ends
      // the workflow, whose close status shows its end (it keeps the `queued` mark).
      const waited = this.#waiting;
      this.#waiting = null;
      if (waited?.shown) {
        this.#queued = false;
        this.#queue = null;
      }
      throw err;
    }
  }

  /** A full queue: shows it, and when the request asks again. */
  #showWaitForRoom(declined: QuotaDeclined, at: number): void {
    this.#show(
      null,
      `Waiting for room in project ${this.projectId}'s quota queue (${declined.queueLength} queued, ` +
        `the most it holds); asking again at ${new Date(at).toISOString()}`,
    );
  }

  /**
   * Whether the project's quota workflow runs: a signal that fails when none runs, and that a run
   * not holding the request answers with a `not-queued` decline.
   */
  async #quotaRuns(requestId: string): Promise<boolean> {
    try {
      await getExternalWorkflowHandle(projectQuotaWorkflowId(this.projectId)).signal(quotaWaitingSignal, {
        requestId,
        workflowId: workflowInfo().workflowId,
      });
      return true;
    } catch (err) {
      if (isCancellation(err)) throw err;
      log.warn('the project quota workflow no longer runs; asking again', {
        projectId: this.projectId,
        error: String(err),
      });
      return false;
    }
  }

  /** Queues one request with the project's quota workflow, starting it if none runs. */
  #enqueue(use: QuotaUse, deadlineMs: number, refused: QuotaRequest['refused']): Promise<QuotaTicket> {
    const { workflowId } = workflowInfo();
    // The request ID is the workflow ID and the use name: the same on every ask of this use.
    return enqueueForProjectQuota.executeWithOptions(
      {
        summary: `queue for an API use of project ${this.projectId} (${use.kind}${refused ? ', after a 429' : ''})`,
        scheduleToCloseTimeout: Math.max(1_000, deadlineMs - Date.now()),
      },
      [
        {
          projectId: this.projectId,
          requestId: `${workflowId}/${use.name}`,
          workflowId,
          kind: use.kind,
          holdUntil: deadlineMs + CALL_ATTEMPT_MS,
          ...(refused && { refused }),
        },
      ],
    );
  }

  #gaveUp(use: QuotaUse, refusedBefore: boolean): ApplicationFailure {
    return ApplicationFailure.create({
      type: FailureType.AgentJobTimedOut,
      message:
        `Gave up at the workflow's deadline while queued for project ${this.projectId}'s API budget ` +
        `(${use.kind}); ${refusedBefore ? 'the API had refused it (429)' : 'nothing was sent to the API'}. ` +
        `Raise "timeout" in the input, or the project's quota.`,
      nonRetryable: true,
    });
  }

  /** Shows the job as queued: the `status` query, the search attribute, the current details. */
  #show(place: QueuePlace | null, details: string | null): void {
    const waiting = this.#waiting;
    if (!waiting) return;
    this.#queued = true;
    this.#queue = place;
    if (!waiting.shown) upsertSearchAttributes([{ key: SearchAttributes.status, value: 'queued' }]);
    waiting.shown = true;
    setCurrentDetails(
      details ??
        `Queued for project ${this.projectId}'s API budget (${waiting.use.kind}): position ${place?.position} ` +
          `of ${place?.queueLength}, earliest start ${place?.earliestStartAt}`,
    );
  }

  /** The job no longer shows as queued. */
  #stopWaiting(): void {
    const waited = this.#waiting;
    this.#waiting = null;
    if (!waited?.shown) return;
    this.#queued = false;
    this.#queue = null;
    upsertSearchAttributes([{ key: SearchAttributes.status, value: null }]);
  }

  #forget(name: string): void {
    this.#grants.delete(name);
    this.#places.delete(name);
    this.#declines.delete(name);
  }

  /** Sends to the quota workflow; {@link settle} waits for it. A lost message only costs a lease. */
  #tell(deliver: (handle: ReturnType<typeof getExternalWorkflowHandle>) => Promise<void>): Promise<void> {
    // Not cancellable: a cancelled workflow still owes the quota word of the use it held.
    const sent: Promise<void> = CancellationScope.nonCancellable(() =>
      deliver(getExternalWorkflowHandle(projectQuotaWorkflowId(this.projectId))),
    )
      .catch((err: unknown) =>
        log.warn('could not reach the project quota workflow', {
          projectId: this.projectId,
          error: String(err),
        }),
      )
      .finally(() => this.#sending.delete(sent));
    this.#sending.add(sent);
    return sent;
  }
}

/** The Retry-After (ms, or null without one) of a 429 answered by the API, or undefined for any other error. */
function rateLimited(err: unknown): number | null | undefined {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof ApplicationFailure)) return undefined;
  if (!refusesQuotaUse(err.cause.type)) return undefined;
  // `nextRetryDelay` does not survive the trip to the workflow; the activity puts it in the details.
  const detail = err.cause.details?.[0] as { retryAfterMs?: unknown } | undefined;
  return typeof detail?.retryAfterMs === 'number' ? detail.retryAfterMs : null;
}
