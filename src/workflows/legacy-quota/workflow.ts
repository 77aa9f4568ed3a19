/**
 * FROZEN: the project quota protocol of 1.1 and of the builds up to the one-way quota
 * (docs/decisions/0015-quota-one-way-in.md). Kept unchanged, under its own workflow type and IDs,
 * only so that the quota workflows those builds started (they follow rollouts onto this build and
 * replay here) and the agent-job workflows pinned to those builds (they keep asking by its
 * signals) go on working; nothing of this build asks it. Delete this folder once no build before
 * the one-way quota runs. Do not change it: a change here must replay test/histories/quota-*.json.
 *
 * The project quota workflow: one long-lived workflow per project (ID from `projectQuotaWorkflowId`)
 * holding the project's {@link ProjectBudget}. Requests arrive by signal-with-start from the enqueue
 * activity; grants, places and declines leave as signals to the requesting workflows. It continues
 * as new with the budget's state, and ends once the budget is idle (a new request starts it again).
 *
 * Deterministic: time is the workflow clock, randomness its seeded `Math.random`, I/O only signals.
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  getExternalWorkflowHandle,
  isCancellation,
  log,
  makeContinueAsNewFunc,
  patched,
  proxySinks,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  sleep,
  workflowInfo,
  type SignalDefinition,
} from '@temporalio/workflow';
import type { ProjectMetricsSinks } from '../sinks.js';
import {
  FOLLOWS_ROLLOUTS_MEMO,
  quotaDeclinedSignal,
  quotaGrantSignal,
  quotaPlaceSignal,
  quotaReleaseSignal,
  quotaRequestSignal,
  quotaSpentSignal,
  quotaStatusQuery,
  quotaTakeUpdate,
  quotaWaitingSignal,
  type QuotaLimit,
} from './messages.js';
import { ProjectBudget, QUOTA_IDLE_MS, timerToStart, type BudgetState, type QuotaNotice } from './budget.js';
import {
  readQuotaRequest,
  readQuotaTake,
  readRelease,
  readSpent,
  readWaiting,
  type Read,
} from './messages.js';

/**
 * History events per quota run before continue-as-new. A request costs about 5 events (its signal,
 * the place or grant signal sent and acknowledged, a share of a workflow task), so a run takes a
 * few hundred requests; the carried state stays bounded by the budget's caps whatever the history.
 */
export const QUOTA_EVENTS_PER_RUN = 2_000;

/** Input of {@link projectQuotaWorkflow}: the project and the first asker's budget, or a carried state. */
export interface ProjectQuotaInput {
  projectId: string;
  limit: QuotaLimit;
  state?: BudgetState;
  /** Events per run instead of {@link QUOTA_EVENTS_PER_RUN} (at least 20); for tests, set by whoever starts it. */
  eventsPerRun?: number;
  /** A queue cap below the budget's own; for tests, set by whoever starts it. */
  maxQueue?: number;
}

/**
 * The patch of the loop that keeps one timer armed (see {@link oneTimerLoop}). Runs that began
 * before it, 1.1's first builds and 1.0's quota runs moved onto this build at a rollout, replay
 * their own loop, {@link timerPerPassLoop}, until they continue as new.
 */
export const QUOTA_ONE_TIMER_PATCH = 'quota-one-timer';

/**
 * The patch of the answer to a waiting signal for a request the run does not hold
 * ({@link ProjectBudget.waiting}). Quota runs follow rollouts: one that took such a signal on an
 * older build, which said nothing, replays it on this one without the answer.
 */
export const QUOTA_WAITING_ANSWER_PATCH = 'quota-waiting-answer';

/** The budget of one project, kept by signals; see {@link ProjectBudget} for the rules. */
export async function projectQuotaWorkflow(input: ProjectQuotaInput): Promise<void> {
  // Asked first, before any command: a history from before the patch has no marker, and replays
  // the loop that made it.
  const oneTimer = patched(QUOTA_ONE_TIMER_PATCH);
  const state = input.state ?? ProjectBudget.initial(input.projectId, input.limit, Date.now());
  const budget = new ProjectBudget(state, { maxQueue: input.maxQueue });
  const eventsPerRun = Math.max(20, input.eventsPerRun ?? QUOTA_EVENTS_PER_RUN);
  const runIsLong = () =>
    workflowInfo().historyLength >= eventsPerRun || workflowInfo().continueAsNewSuggested;
  let changed = false;
  /** Signals sent and not yet acknowledged: a run that closes before they are would lose them. */
  let sending = 0;
  /** Set once this run has decided to continue as new: it takes no more uses at once. */
  let draining = false;

  /** Every signal is read before the budget sees it: a malformed one is logged and dropped. */
  function on<A, T>(
    signal: SignalDefinition<[A]>,
    read: (raw: unknown) => Read<T>,
    apply: (value: T) => void,
  ) {
    setHandler(signal, (raw: A) => {
      changed = true;
      const result = read(raw);
      if ('value' in result) return apply(result.value);
      dropped(signal.name, result.problem);
    });
  }
  function dropped(signal: string, problem: string): void {
    log.error('a malformed quota signal; dropped', { signal, problem });
  }
  on(quotaRequestSignal, readQuotaRequest, (request) => {
    const outcome = budget.request(request, Date.now(), Math.random);
    if (outcome === 'queued' || outcome === 'repeat') return;
    const message =
      outcome === 'requeued' ? 'the API refused a use (429); the quota pauses' : 'a request declined';
    log.warn(message, { requestId: request.requestId, outcome, pausedUntil: budget.state.pausedUntil });
  });
  on(quotaSpentSignal, readSpent, ({ requestId, at }) => budget.spend(requestId, at, Date.now()));
  on(quotaReleaseSignal, readRelease, ({ requestId }) => budget.release(requestId, Date.now()));
  setHandler(quotaStatusQuery, () => budget.snapshot(Date.now()));
  // A run holding the request says nothing: the delivery tells the waiting workflow that this run
  // is there, and nothing changes or wakes. One that does not hold it answers, from a build with
  // the patch: a run that took such a signal on an older build replays it as that build did.
  setHandler(quotaWaitingSignal, (raw) => {
    const waiting = readWaiting(raw);
    if (!('value' in waiting)) return dropped(quotaWaitingSignal.name, waiting.problem);
    const { requestId, workflowId } = waiting.value;
    if (workflowId === undefined || !patched(QUOTA_WAITING_ANSWER_PATCH)) return;
    if (budget.waiting({ requestId, workflowId }, Date.now())) changed = true;
  });
  setHandler(
    quotaTakeUpdate,
    (raw) => {
      const take = readQuotaTake(raw);
      // Read again: the validator does not run on replay. Unreachable after it, but typed all the same.
      if (!('value' in take)) throw ApplicationFailure.nonRetryable(`a malformed take: ${take.problem}`);
      const answer = budget.take(take.value, Date.now());
      // A granted use moves the next window edge: the loop recomputes its wake-up.
      if (answer.outcome === 'granted') changed = true;
      return answer;
    },
    {
      // A rejected update leaves no event in this history. A draining run rejects every take rather
      // than answer it: its events would lengthen a history that is due to end, and the caller queues
      // through the signal path, which a draining run carries; the rare caller pays the queue's cost.
      validator: (raw) => {
        if (draining) {
          throw ApplicationFailure.nonRetryable('the quota workflow is continuing as new; queue instead');
        }
        const take = readQuotaTake(raw);
        if (!('value' in take)) throw ApplicationFailure.nonRetryable(`a malformed take: ${take.problem}`);
      },
      description: 'Take one API use now, if the budget has room and nothing is queued',
    },
  );

  /** Sends one notice; a grant whose workflow is gone gives its use back at once. */
  function send({ signal, workflowId, body }: QuotaNotice): void {
    const definitions = { grant: quotaGrantSignal, place: quotaPlaceSignal, declined: quotaDeclinedSignal };
    sending++;
    void getExternalWorkflowHandle(workflowId)
      .signal(definitions[signal] as SignalDefinition<[typeof body]>, body)
      .catch((err: unknown) => {
        log.info('a quota signal found no running workflow', { workflowId, error: String(err) });
        if (signal !== 'grant') return;
        budget.release(body.requestId, Date.now());
        changed = true;
      })
      // Not a change of the budget: an acknowledgement wakes the per-pass loop only while it drains;
      // the one-timer loop waits for it to end (a wake costs it no timer).
      .finally(() => {
        sending--;
        if (oneTimer && sending === 0) changed = true;
      });
  }

  const { projectMetrics } = proxySinks<ProjectMetricsSinks>();
  /** The per-project metrics' view of the budget (never during replay: a sink). */
  function reportState(): void {
    projectMetrics.quotaState(input.projectId, budget.usage(Date.now()));
  }

  /**
   * One pass of either loop: grants what the budget allows and sends what is owed, or, once the
   * run is long, waits for every signal and update to finish. True: the run is to continue as new.
   */
  async function pass(): Promise<boolean> {
    // Nothing new goes out once the run is long: what is owed is carried, and sent by the next run.
    draining = runIsLong();
    if (!draining) {
      const { notices, expired } = budget.grant(Date.now());
      if (expired.length > 0) log.warn('grants expired unconfirmed; their uses are back', { expired });
      notices.forEach(send);
    }
    setCurrentDetails(budget.summary(Date.now()));
    reportState();
    if (!draining) return false;
    // The server drops the signals a closed run sent and it had not delivered yet; an update
    // accepted and not answered would fail its caller.
    await condition(() => sending === 0 && allHandlersFinished());
    return true;
  }

  /**
   * The loop of runs from before {@link QUOTA_ONE_TIMER_PATCH}, kept as it was so that they replay:
   * each pass starts a timer for the budget's next change, so each take (it wakes the loop) and
   * each use leaving the window costs a timer.
   */
  async function timerPerPassLoop(): Promise<boolean> {
    for (;;) {
      if (await pass()) return true;
      const idle = budget.idle && sending === 0;
      const wakeAt = idle ? Date.now() + QUOTA_IDLE_MS : budget.nextChangeAt();
      changed = false;
      // Acknowledgements of our own signals grow the history too: a long history wakes the loop as well.
      const woken = await condition(
        () => changed || runIsLong(),
        wakeAt === null ? undefined : Math.max(1, wakeAt - Date.now()),
      );
      // A request that arrived in this last task keeps it alive.
      if (!woken && idle && !changed) return false;
    }
  }

  /**
   * The loop with one timer armed for the earliest time it must wake ({@link ProjectBudget.wake}),
   * a new one started only when that time moves earlier ({@link timerToStart}): a take or a use
   * leaving the window with nothing queued starts none. The wait is a `condition()` without a
   * timeout, which the pass's own wake resolves, so none stays pending across passes.
   */
  async function oneTimerLoop(): Promise<boolean> {
    /** The scope of the armed timer; cancelled (and replaced) only when an earlier one is needed. */
    let scope: CancellationScope | null = null;
    let armedAt: number | null = null;
    let rang = false;
    function arm(at: number): void {
      scope?.cancel();
      const own = (scope = new CancellationScope());
      armedAt = at;
      own
        .run(() => sleep(Math.max(1, at - Date.now())))
        .then(
          () => {
            if (scope !== own) return;
            scope = null;
            armedAt = null;
            rang = true;
          },
          (err: unknown) => {
            // Cancelled for an earlier timer, or with the workflow, which the loop's wait ends.
            if (!isCancellation(err)) throw err;
          },
        );
    }
    for (;;) {
      if (await pass()) return true;
      const { at, end } = budget.wake(Date.now(), sending > 0);
      if (end) return false;
      const next = timerToStart(armedAt, at);
      if (next !== null) arm(next);
      changed = false;
      rang = false;
      // Acknowledgements of our own signals grow the history too: a long history wakes the loop as well.
      await condition(() => changed || rang || runIsLong());
    }
  }

  /** Whether the run continues as new; otherwise the budget is idle and the run ends. */
  const continues = await (oneTimer ? oneTimerLoop() : timerPerPassLoop());
  if (!continues) return;
  // The memo goes on only where there is one: a continue-as-new without it stays the command it was.
  const { memo } = workflowInfo();
  const next = makeContinueAsNewFunc<typeof projectQuotaWorkflow>(
    memo !== undefined && Object.keys(memo).length > 0 ? { memo } : {},
  );
  return await next({ ...input, state: budget.state });
}

/**
 * A quota workflow started by a versioned worker (its memo says so) follows rollouts: AUTO_UPGRADE,
 * so its next workflow task after a new version becomes current runs there, with its history
 * replayed by the new code, and the old version drains under steady traffic without an operator
 * step (docs/versioning.md). Agent-job workflows stay pinned. Only then: the server refuses a
 * versioning behavior from an unversioned worker. Every change to this workflow must therefore
 * replay the older quota histories (test/workflows/replay.test.ts), with `patched()` where commands
 * change.
 */
setWorkflowOptions(
  () => (workflowInfo().memo?.[FOLLOWS_ROLLOUTS_MEMO] === true ? { versioningBehavior: 'AUTO_UPGRADE' } : {}),
  projectQuotaWorkflow,
);
