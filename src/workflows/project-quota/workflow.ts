/**
 * The project quota workflow, one per project, holding its {@link ProjectBudget}
 * (docs/project-quota.md, docs/decisions/0005-project-quota-as-a-workflow.md). Deterministic: time
 * is the workflow clock, randomness its seeded `Math.random`, I/O only signals.
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
  proxySinks,
  setCurrentDetails,
  setHandler,
  setWorkflowOptions,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { ProjectMetricsSinks } from '../sinks.js';
import {
  FOLLOWS_ROLLOUTS_MEMO,
  quotaGrantSignal,
  quotaReleaseSignal,
  quotaTakeUpdate,
  readRelease,
  readTake,
  type QuotaLimit,
  type QuotaTake,
} from '../../quota/messages.js';
import { ProjectBudget, timerToStart, type Grant } from './budget.js';
import { initialState, quotaStatusQuery, snapshotOf, summaryOf, usageOf, type BudgetState } from './state.js';

/**
 * History events per quota run before continue-as-new: a take costs 2 (update accepted, completed)
 * and a share of a workflow task, a grant 2 more; the budget's caps bound the carried state.
 */
export const QUOTA_EVENTS_PER_RUN = 2_000;

/** Input of {@link projectQuota}: the project and the first asker's budget, or a carried state. */
export interface ProjectQuotaInput {
  projectId: string;
  limit: QuotaLimit;
  state?: BudgetState;
  /** Events per run instead of {@link QUOTA_EVENTS_PER_RUN} (at least 20); for tests, set by whoever starts it. */
  eventsPerRun?: number;
  /** A queue cap below the budget's own; for tests, set by whoever starts it. */
  maxQueue?: number;
}

/** The budget of one project, kept by takes; see {@link ProjectBudget} for the rules. */
export async function projectQuota(input: ProjectQuotaInput): Promise<void> {
  const state = input.state ?? initialState(input.projectId, input.limit, Date.now());
  const budget = new ProjectBudget(state, { maxQueue: input.maxQueue });
  const eventsPerRun = Math.max(20, input.eventsPerRun ?? QUOTA_EVENTS_PER_RUN);
  const runIsLong = () =>
    workflowInfo().historyLength >= eventsPerRun || workflowInfo().continueAsNewSuggested;
  let changed = false;
  /** Grant signals sent and not yet acknowledged: the run may not close before they are (see pass). */
  let sending = 0;

  setHandler(
    quotaTakeUpdate,
    (raw) => {
      // Read again: the validator does not run on replay.
      const take = takeOf(raw);
      changed = true;
      const answer = budget.take(take, Date.now(), Math.random);
      if (take.refused) {
        log.warn('the API refused a use (429); the quota pauses', {
          requestId: take.refused.requestId,
          pausedUntil: budget.state.pausedUntil,
        });
      }
      return answer;
    },
    // A rejected update leaves no event in this history.
    { validator: takeOf, description: 'Take one API use now, or queue for one (a grant signal follows)' },
  );
  setHandler(quotaReleaseSignal, (raw) => {
    const release = readRelease(raw);
    if (!('value' in release)) {
      log.error('a malformed quota release; dropped', { problem: release.problem });
      return;
    }
    changed = true;
    budget.release(release.value.requestId, Date.now());
  });
  setHandler(quotaStatusQuery, () => snapshotOf(budget.state, Date.now()));

  /** Sends one grant; one whose workflow is gone gives its use back at once. */
  function send({ workflowId, requestId }: Grant): void {
    sending++;
    void getExternalWorkflowHandle(workflowId)
      .signal(quotaGrantSignal, { requestId })
      .catch((err: unknown) => {
        log.info('a quota grant found no running workflow', { workflowId, error: String(err) });
        budget.release(requestId, Date.now());
      })
      .finally(() => {
        sending--;
        changed = true;
      });
  }

  const { projectMetrics } = proxySinks<ProjectMetricsSinks>();

  /** Grants what the budget allows, or, once the run is long, waits for every handler: true, continue as new. */
  async function pass(): Promise<boolean> {
    // Nothing new goes out once the run is long: what is owed is carried, and sent by the next run.
    const draining = runIsLong();
    if (!draining) {
      const { grants, expired } = budget.grant(Date.now());
      if (expired.length > 0) log.warn('grants expired untaken; their uses are back', { expired });
      grants.forEach(send);
    }
    setCurrentDetails(summaryOf(budget.state, Date.now()));
    projectMetrics.quotaState(input.projectId, usageOf(budget.state, Date.now()));
    if (!draining) return false;
    // The server drops the signals a closed run sent and it had not delivered yet; an update
    // accepted and not answered would fail its caller.
    await condition(() => sending === 0 && allHandlersFinished());
    return true;
  }

  /** The armed timer and its scope, cancelled (and replaced) only when an earlier one is needed. */
  let armed = null as { at: number; scope: CancellationScope } | null;
  let rang = false;
  /**
   * Arms the one timer for `at` ({@link timerToStart}). The loop's wait is a `condition()` without a
   * timeout, which the timer's ring resolves, so none stays pending across passes.
   */
  function arm(at: number): void {
    armed?.scope.cancel();
    const own = (armed = { at, scope: new CancellationScope() });
    own.scope
      .run(() => sleep(Math.max(1, at - Date.now())))
      .then(
        () => {
          if (armed !== own) return;
          armed = null;
          rang = true;
        },
        (err: unknown) => {
          // Cancelled for an earlier timer, or with the workflow, which the loop's wait ends.
          if (!isCancellation(err)) throw err;
        },
      );
  }

  for (;;) {
    if (await pass()) break;
    const { at, end } = budget.wake(Date.now(), sending > 0);
    if (end) return;
    const next = timerToStart(armed?.at ?? null, at);
    if (next !== null) arm(next);
    changed = false;
    rang = false;
    // Acknowledgements of our own signals grow the history too: a long history wakes the loop as well.
    await condition(() => changed || rang || runIsLong());
  }
  // The memo goes on only where there is one: a continue-as-new without it stays the command it was.
  const { memo } = workflowInfo();
  const next = makeContinueAsNewFunc<typeof projectQuota>(
    memo !== undefined && Object.keys(memo).length > 0 ? { memo } : {},
  );
  return await next({ ...input, state: budget.state });
}

/** A take's payload, read; a malformed one fails the update. */
function takeOf(raw: unknown): QuotaTake {
  const take = readTake(raw);
  if (!('value' in take)) throw ApplicationFailure.nonRetryable(`a malformed take: ${take.problem}`);
  return take.value;
}

/**
 * A quota workflow started by a versioned worker (its memo says so) follows rollouts, AUTO_UPGRADE
 * (docs/versioning.md; the server refuses it from an unversioned worker), so every change here must
 * replay the older histories of its type (test/workflows/replay.test.ts), `patched()` where
 * commands change.
 */
setWorkflowOptions(
  () => (workflowInfo().memo?.[FOLLOWS_ROLLOUTS_MEMO] === true ? { versioningBehavior: 'AUTO_UPGRADE' } : {}),
  projectQuota,
);
