/**
 * The agent-job workflow's side of the project quota (docs/project-quota.md): when the call
 * activity's take (../../activities/project-quota.ts) misses, wait as its answer says, then call
 * again. Deterministic: time is the workflow clock, jitter its seeded `Math.random`.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  log,
  proxySinks,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import { RETRY_JITTER } from '../../failure-policy/backoff.js';
import { refusesQuotaUse } from '../../failure-policy/table.js';
import { DEFAULT_QUOTA_LEASE_MS } from '../../quota/settings.js';
import { FailureType, SearchAttributes, type ApiErrorDetails, type QueuePlace } from '../../contract.js';
import type { ProjectMetricsSinks } from '../sinks.js';
import {
  projectQuotaWorkflowId,
  quotaGrantSignal,
  quotaReleaseSignal,
  type QuotaMiss,
  type QuotaTake,
  type QuotaUseKind,
} from '../../quota/messages.js';

/**
 * How long a queued workflow waits without a grant before it takes again under the same request ID,
 * at most (the worker's lease, when shorter): by then a grant lost on its way is back in the budget
 * (docs/project-quota.md, "Nothing lost").
 */
export const QUOTA_REASK_MS = DEFAULT_QUOTA_LEASE_MS;

/** The first wait before taking again after a take nobody answered; it doubles up to {@link QUOTA_REASK_MS}. */
const UNANSWERED_RETRY_MS = 2_000;

/** One use to take. */
export interface QuotaUse {
  kind: QuotaUseKind;
  /** Unique within the workflow, across continue-as-new: `create-1-1`, `message-2-3`, ... */
  name: string;
}

/** What the call passes to its activity for the take: the request ID, and the 429 it follows. */
export type QuotaTicket = Pick<QuotaTake, 'requestId' | 'refused'>;

/** Runs a create or message call within the project's budget, waiting in its queue when the take says so. */
export class ProjectQuotaRequester {
  /** Use names (the last segment of a request ID) granted: keyed by name, as a replay may run under another workflow ID. */
  readonly #granted = new Set<string>();
  /** Release signals not yet delivered: {@link settle} waits for them. */
  readonly #sending = new Set<Promise<void>>();
  /** The place of the use waiting in the queue (null: not told); null when none waits. */
  #waiting: { place: QueuePlace | null } | null = null;

  constructor(private readonly projectId: string) {
    setHandler(quotaGrantSignal, (grant) => {
      const requestId = (grant as { requestId?: unknown } | null)?.requestId;
      if (typeof requestId === 'string') this.#granted.add(requestId.slice(requestId.lastIndexOf('/') + 1));
    });
  }

  /** Whether a create or message waits in the project quota's queue (phase `queued`). */
  get queued(): boolean {
    return this.#waiting !== null;
  }

  /** The queued use's place as the quota last told it; null when not queued or not told. */
  get queue(): QueuePlace | null {
    return this.#waiting?.place ?? null;
  }

  /**
   * Runs `call(ticket)`, the activity that takes its use under `ticket` just before it sends, until
   * it is not missed; past `deadlineMs` gives up, releasing its place, with `AgentJobTimedOut`.
   */
  async run<T>(use: QuotaUse, call: (ticket: QuotaTicket) => Promise<T>, deadlineMs: number): Promise<T> {
    const { workflowId } = workflowInfo();
    let asks = 1;
    let name = use.name;
    let refused: QuotaTicket['refused'];
    let unanswered = 0;
    let queuedAt: number | null = null;
    try {
      for (;;) {
        const requestId = `${workflowId}/${name}`;
        let miss: ReturnType<typeof missOf>;
        try {
          const result = await call({ requestId, ...(refused && { refused }) });
          this.#stopWaiting(true);
          return result;
        } catch (err) {
          miss = missOf(err);
          if (miss === null) throw err;
        }
        unanswered = miss.outcome === 'unanswered' ? unanswered + 1 : 0;
        switch (miss.outcome) {
          case 'refused':
            // A new ID, so that the refused take's grant cannot be mistaken for this one's.
            log.warn('the API refused a use (429); taking again at the head of the quota queue', {
              requestId,
            });
            refused = { requestId, retryAfterMs: miss.retryAfterMs };
            name = `${use.name}.${++asks}`;
            break;
          case 'used-before':
            // A run of this workflow's past used this ID (a reset): its call may have been sent.
            log.warn('the quota had seen this request ID before; taking under a new one', { requestId });
            name = `${use.name}.${++asks}`;
            break;
          // 'late': take again at once, under the same ID.
          case 'unanswered':
            await this.#pause(
              Math.min(QUOTA_REASK_MS, UNANSWERED_RETRY_MS * 2 ** (unanswered - 1)),
              deadlineMs,
              use,
            );
            break;
          case 'declined': {
            const waitMs = Math.max(1_000, Date.parse(miss.retryAt) - Date.now() || 0);
            const at = Date.now() + Math.round(waitMs * (1 + Math.random() * RETRY_JITTER));
            this.#show(
              null,
              `Waiting for room in project ${this.projectId}'s quota queue (${miss.queueLength} queued, ` +
                `the most it holds); taking again at ${new Date(at).toISOString()}`,
            );
            await this.#pause(at - Date.now(), deadlineMs, use);
            break;
          }
          case 'queued': {
            queuedAt ??= Date.now();
            const { place } = miss;
            this.#show(
              place,
              `Queued for project ${this.projectId}'s API budget (${use.kind}): position ${place.position} ` +
                `of ${place.queueLength}, earliest start ${place.earliestStartAt}`,
            );
            if (Date.now() >= deadlineMs) throw this.#gaveUp(use, refused !== undefined);
            const granted = await condition(
              () => this.#granted.has(name),
              Math.max(1, Math.min(QUOTA_REASK_MS, miss.reaskInMs ?? Infinity, deadlineMs - Date.now())),
            );
            this.#granted.delete(name);
            if (granted) {
              this.#stopWaiting(true);
              const waitedS = (Date.now() - queuedAt) / 1000;
              proxySinks<ProjectMetricsSinks>().projectMetrics.quotaWaited(this.projectId, waitedS);
            }
            break;
          }
        }
        if (Date.now() >= deadlineMs) throw this.#gaveUp(use, refused !== undefined);
      }
    } catch (err) {
      // Leave the queue without an API call; the signal goes out even when this scope is cancelled.
      if (this.#waiting !== null) this.#release(`${workflowId}/${name}`);
      // No search attribute update, which would change the commands of this task: a failed call
      // ends the workflow, whose close status shows its end.
      this.#stopWaiting(false);
      throw err;
    }
  }

  /**
   * Resolves once every release signal sent so far was delivered or failed. Await it before the run
   * closes: the server drops the signals a closed run had not delivered yet.
   */
  async settle(): Promise<void> {
    while (this.#sending.size > 0) await Promise.all(this.#sending);
  }

  /** Waits `ms`, at most until the deadline, which then gives up. */
  async #pause(ms: number, deadlineMs: number, use: QuotaUse): Promise<void> {
    if (Date.now() >= deadlineMs) throw this.#gaveUp(use, false);
    await sleep(Math.max(1, Math.min(ms, deadlineMs - Date.now())));
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

  /** Shows the job as queued: the `status` query's place, the search attribute (once), the current details. */
  #show(place: QueuePlace | null, details: string): void {
    if (this.#waiting === null) upsertSearchAttributes([{ key: SearchAttributes.status, value: 'queued' }]);
    this.#waiting = { place };
    setCurrentDetails(details);
  }

  /** The job no longer shows as queued; `unmark`: the search attribute's mark goes too. */
  #stopWaiting(unmark: boolean): void {
    if (unmark && this.#waiting !== null)
      upsertSearchAttributes([{ key: SearchAttributes.status, value: null }]);
    this.#waiting = null;
  }

  /** Gives `requestId`'s place back to the quota workflow; {@link settle} waits for the signal. A lost release only costs a lease. */
  #release(requestId: string): void {
    // Not cancellable: a cancelled workflow still owes the quota word of the place it held.
    const sent: Promise<void> = CancellationScope.nonCancellable(() =>
      getExternalWorkflowHandle(projectQuotaWorkflowId(this.projectId)).signal(quotaReleaseSignal, {
        requestId,
      }),
    )
      .catch((err: unknown) =>
        log.warn('could not reach the project quota workflow', {
          projectId: this.projectId,
          error: String(err),
        }),
      )
      .finally(() => this.#sending.delete(sent));
    this.#sending.add(sent);
  }
}

/**
 * What a failed create or message says to the quota: the take's miss (`ProjectQuotaQueue`, nothing
 * sent), a 429 for the use it took, or null for any other failure, which the call's own handling reads.
 */
function missOf(err: unknown): QuotaMiss | { outcome: 'refused'; retryAfterMs: number | null } | null {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof ApplicationFailure)) return null;
  const detail = err.cause.details?.[0] as Partial<QuotaMiss & ApiErrorDetails> | undefined;
  if (err.cause.type === FailureType.ProjectQuotaQueue) {
    return typeof detail?.outcome === 'string'
      ? (detail as QuotaMiss)
      : { outcome: 'unanswered', reason: '?' };
  }
  if (!refusesQuotaUse(err.cause.type) || detail?.quotaTaken !== true) return null;
  return {
    outcome: 'refused',
    retryAfterMs: typeof detail.retryAfterMs === 'number' ? detail.retryAfterMs : null,
  };
}
