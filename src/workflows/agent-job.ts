/**
 * The agent-job workflow: create the agent job (or attach to one), poll it on durable timers until
 * it ends, and return the final record with its prLink.
 *
 * Deterministic by construction: time comes from the workflow clock, randomness (jitter) from the
 * workflow's seeded Math.random, and all I/O happens in activities.
 */
import {
  ActivityCancellationType,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  currentUpdateInfo,
  isCancellation,
  log,
  metricMeter,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
  type LocalActivityOptions,
} from '@temporalio/workflow';
import { HandlerUnfinishedPolicy } from '@temporalio/common';
import type { AgentJobActivities } from '../activities/index.js';
import {
  FailureType,
  followUpUpdate,
  InvalidInputError,
  isTerminalStatus,
  MAX_PROMPT_LENGTH,
  MAX_QUEUED_FOLLOW_UPS,
  pollJitterFactor,
  pollNowSignal,
  resolveInput,
  SearchAttributes,
  sendMessageUpdate,
  statusQuery,
  AGENT_JOB_STATUSES,
  type AgentJobInput,
  type AgentJobProgress,
  type AgentJobRecord,
  type AgentJobResult,
  type AgentJobStatus,
  type ApiFailureStreak,
  type ContinuationState,
  type ResolvedInput,
} from '../contract.js';
import { CREATE_BACKOFF, GET_BACKOFF, MESSAGE_BACKOFF, retryPolicyOf, type Backoff } from '../retries.js';
import { attempt, noFailures, singleCall, untilAnswered, type ApiCallContext } from './api-calls.js';
import { PROJECT_QUOTA_PATCH, ProjectQuotaRequester } from './project-quota.js';

/**
 * Polls per run before continue-as-new. A poll adds about 6 history events as a local activity
 * (timer, one workflow task, marker) and about 11 as a regular one (timer, activity, two workflow
 * tasks), so 150 polls keep a run below 1,000 or near 1,700 events: under the 2,000 we allow.
 */
export const POLLS_PER_RUN = 150;

/**
 * After a follow-up message, a terminal record identical to the one before the message may be the
 * previous turn's, read before the service applied the message. It counts as the new turn's end
 * only when it stays so this many polls, or when an `active` was seen in between.
 */
export const NEW_TURN_GRACE_POLLS = 5;

/** Consecutive polls in an undocumented status before failing with `UnknownStatus`. */
export const UNKNOWN_STATUS_POLL_LIMIT = 20;

/**
 * Marks the runs that poll through local activities. Runs that started before this patch poll
 * with regular activities when they replay, so their histories stay valid; every new run (and
 * every run after a continue-as-new) takes the patched path.
 */
export const LOCAL_ACTIVITY_POLLS_PATCH = 'polls-as-local-activities';

/**
 * Marks the runs whose API calls go through ./api-calls.ts: the workflow owns long waits and the
 * bounds, every phase ends at the deadline, and a poll issued before a follow-up message's answer
 * cannot end the new turn. Runs that started before replay with the earlier handling (every
 * failure final, local-activity polls retried inside the SDK); their next continue-as-new moves
 * them over.
 */
export const BOUNDED_API_CALLS_PATCH = 'api-calls-bounded-by-workflow';

/**
 * Marks the runs where `{ jobId, prompt }` sends the prompt as a follow-up message. Runs started
 * before it ignored the prompt and only watched the job, and replay that way.
 */
export const FOLLOW_UP_AT_START_PATCH = 'follow-up-at-start';

/**
 * Marks the runs where every wait before a poll starts one timer, even when a poll is already
 * requested (it is then cancelled in the same activation, so no command reaches the server).
 *
 * Why: the SDK's core can hand a local activity's result to the workflow one workflow task late
 * when a query is answered while the activity runs (the task completes with the query's answer and
 * the activity's marker, and the result comes with the next task's events). Replay hands it over
 * at once. If that next task also carries what requests a poll (a follow-up message's answer, a
 * `pollNow` signal), the original run saw the request before its wait and started no timer, while
 * the replay starts one and cancels it; every later timer is then numbered one higher, and the
 * replay fails (`Timer fired event did not have expected timer id`). One timer per wait numbers
 * the timers the same in both. Runs from before replay without it.
 */
export const ONE_TIMER_PER_POLL_WAIT_PATCH = 'one-timer-per-poll-wait';

// Retry policies (src/retries.ts). The activities mark final errors non-retryable and set each
// wait themselves (`nextRetryDelay`: the backoff, raised to a capped Retry-After); whatever must be
// counted or waited for longer comes back to the workflow (./api-calls.ts).
const createOptions: ActivityOptions = {
  // The HTTP client gives up well before this (connect 10s, headers 30s, body 30s).
  startToCloseTimeout: '75s',
  retry: retryPolicyOf(CREATE_BACKOFF),
  // The create heartbeats while its request is in flight, so a cancellation reaches it; it then
  // lets that request finish and the workflow waits for it, to record the job it may have made.
  heartbeatTimeout: '10s',
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
};
const getOptions: ActivityOptions = {
  startToCloseTimeout: '75s',
  retry: retryPolicyOf(GET_BACKOFF),
};

// A poll as a local activity retries inside the worker for a few seconds only (three attempts, 1 s
// then 2 s apart); then it comes back to the poll loop, which waits on its own timer and counts the
// failed poll towards continue-as-new. So an outage of any length keeps each run's history bounded,
// and the deadline and pollNow apply to every wait.
const localGetOptions: LocalActivityOptions = {
  startToCloseTimeout: getOptions.startToCloseTimeout,
  retry: { ...retryPolicyOf(GET_BACKOFF), maximumAttempts: 3 },
  localRetryThreshold: '10s',
};

// A follow-up message starts a turn, like a create: same patience, and an idempotency key too.
const messageOptions: ActivityOptions = {
  startToCloseTimeout: '75s',
  retry: retryPolicyOf(MESSAGE_BACKOFF),
};

const { createAgentJob } = proxyActivities<AgentJobActivities>(createOptions);
const { getAgentJob } = proxyActivities<AgentJobActivities>(getOptions);
const { getAgentJob: getAgentJobLocally } = proxyLocalActivities<AgentJobActivities>(localGetOptions);
// Runs from before BOUNDED_API_CALLS_PATCH: local polls retried inside the SDK without a bound.
const { getAgentJob: getAgentJobLocallyBeforePatch } = proxyLocalActivities<AgentJobActivities>({
  ...localGetOptions,
  retry: retryPolicyOf(GET_BACKOFF),
});
const { sendAgentJobMessage } = proxyActivities<AgentJobActivities>(messageOptions);

// Under the project quota a 429 goes back to the quota (pause, keep the place), not to a retry.
const quotaManaged = (options: ActivityOptions): Partial<ActivityOptions> => ({
  retry: { ...options.retry, nonRetryableErrorTypes: [FailureType.RateLimited] },
});

/** Run-wide mutable state of one workflow run. */
interface RunState {
  progress: AgentJobProgress;
  deadlineMs: number;
  pollRequested: boolean;
  /** Pending while no poll is requested: see {@link pollRequestDuringWait}. */
  pollRequest: Promise<void> | null;
  /** Ends the wait in progress with `true` when a poll is requested; null between waits. */
  wake: ((requested: boolean) => void) | null;
  /** The scope of the waits' timers, until a requested poll cancels one: see {@link waitForNextPoll}. */
  waitScope: CancellationScope | null;
  /** This run takes {@link ONE_TIMER_PER_POLL_WAIT_PATCH}'s path (false only for older runs replaying). */
  timerPerWait: boolean;
  sendingMessage: boolean;
  awaitingNewTurn: boolean;
  /** The record before the pending follow-up message, to tell a stale read from the new turn's end. */
  recordBeforeMessage: AgentJobRecord | null;
  stalePolls: number;
  unknownStatusPolls: number;
  /** Reset to the initial interval after a follow-up message. */
  intervalMs: number;
  created: boolean;
  projectId: string;
  /** Polls run as local activities: the input asks for it and this run is not an older one replaying. */
  localPolls: boolean;
  /** The API's failures in a row, for the waits and bounds of ./api-calls.ts. */
  apiFailures: ApiFailureStreak;
  /** This run takes {@link BOUNDED_API_CALLS_PATCH}'s path (false only for older runs replaying). */
  boundedCalls: boolean;
  /**
   * Bumped when a follow-up message is answered: a poll issued before that may carry the previous
   * turn's record and must not end the new turn. (One that returns while the message is still on
   * its way cannot end anything: `observe` waits for the message.)
   */
  messageEpoch: number;
  /** Follow-ups queued in this run (the start path's and `followUp` updates'), in arrival order. */
  followUpsQueued: number;
  /** Follow-ups whose message has been sent (or failed): the queue's head is `followUpsSent + 1`. */
  followUpsSent: number;
  /** Follow-ups not done yet: unsent ones, and updates waiting for their turn to end. */
  followUpsOpen: number;
  /** The turn number whose end was last observed, so a waiting follow-up knows its turn ended. */
  turnEnded: number;
  /** Creates and follow-up messages wait for the project's API budget; null in runs from before it. */
  quota: ProjectQuotaRequester | null;
  /** Quota uses asked for in this run, so each request has its own name. */
  quotaUses: number;
}

/**
 * Drives one agent job to its end. `continuation` is set only by continue-as-new; callers pass
 * the input object alone.
 */
export async function agentJobWorkflow(
  input: AgentJobInput,
  continuation?: ContinuationState,
): Promise<AgentJobResult> {
  const resolved = validate(input);
  const info = workflowInfo();
  const state: RunState = {
    progress: {
      phase: continuation || resolved.jobId ? 'polling' : 'creating',
      jobId: continuation?.jobId ?? resolved.jobId ?? null,
      lastRecord: continuation?.lastRecord ?? null,
      polls: continuation?.polls ?? 0,
      turns: continuation?.turns ?? 1,
      nextPollAt: null,
      lastError: continuation?.lastError ?? null,
    },
    deadlineMs: continuation?.deadlineMs ?? Date.now() + resolved.timeoutMs,
    pollRequested: continuation?.pollRequested ?? false,
    pollRequest: null,
    wake: null,
    waitScope: null,
    timerPerWait: false,
    sendingMessage: false,
    awaitingNewTurn: continuation?.awaitingNewTurn ?? false,
    recordBeforeMessage:
      continuation?.recordBeforeMessage ??
      (continuation?.awaitingNewTurn ? (continuation.lastRecord ?? null) : null),
    stalePolls: continuation?.stalePolls ?? 0,
    unknownStatusPolls: continuation?.unknownStatusPolls ?? 0,
    intervalMs: continuation?.intervalMs ?? resolved.poll.initialIntervalMs,
    created: continuation?.created ?? !resolved.jobId,
    projectId: resolved.projectId,
    localPolls: resolved.poll.localActivity && patched(LOCAL_ACTIVITY_POLLS_PATCH),
    apiFailures: continuation?.apiFailures ?? noFailures(),
    messageEpoch: 0,
    boundedCalls: patched(BOUNDED_API_CALLS_PATCH),
    followUpsQueued: 0,
    followUpsSent: 0,
    followUpsOpen: 0,
    turnEnded: 0,
    quota: null,
    quotaUses: 0,
  };
  if (patched(PROJECT_QUOTA_PATCH))
    state.quota = new ProjectQuotaRequester(resolved.projectId, state.progress);
  state.timerPerWait = patched(ONE_TIMER_PER_POLL_WAIT_PATCH);
  registerHandlers(state, resolved);

  try {
    if (!info.typedSearchAttributes.get(SearchAttributes.projectId)) {
      upsertSearchAttributes([{ key: SearchAttributes.projectId, value: resolved.projectId }]);
    }
    if (state.progress.jobId === null) {
      const record = await create(state, resolved, info.workflowId);
      state.progress.jobId = record.id;
      observe(state, record);
    } else if (!continuation) {
      upsertSearchAttributes([{ key: SearchAttributes.jobId, value: state.progress.jobId }]);
    }
    // Attaching to an existing agent job: read it at once rather than after a first wait.
    if (!continuation && resolved.jobId) state.pollRequested = true;
    const polled = pollUntilDone(state, resolved, input);
    if (continuation || !resolved.jobId || resolved.prompt === undefined) return await polled;
    if (!patched(FOLLOW_UP_AT_START_PATCH)) return await polled;
    // Keyed by the workflow ID and its first run: the same across activity retries and worker
    // restarts, and continue-as-new waits until it is sent; a later workflow with this ID is a new
    // follow-up and gets a new key.
    const key = idempotencyKey(`${info.workflowId}/${info.firstExecutionRunId}/follow-up`);
    const sent = queueFollowUp(state, resolved, resolved.prompt, key);
    // A failed send fails the workflow; a sent one leaves the loop to watch its turn.
    return await Promise.race([polled, sent.then(() => polled)]);
  } catch (err) {
    if (isCancellation(err)) {
      state.progress.phase = 'cancelled';
      state.progress.nextPollAt = null;
      setCurrentDetails(
        state.progress.jobId === null
          ? 'Cancelled before the agent job was created: no create call succeeded.'
          : `Cancelled. The agent job ${state.progress.jobId} goes on at the API.`,
      );
    }
    throw err;
  }
}

function validate(input: AgentJobInput): ResolvedInput {
  try {
    return resolveInput(input);
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    throw ApplicationFailure.create({
      type: FailureType.InvalidInput,
      message: `Invalid workflow input: ${err.message}. No agent job was created.`,
      nonRetryable: true,
      details: [{ field: err.field }],
    });
  }
}

function registerHandlers(state: RunState, resolved: ResolvedInput): void {
  setHandler(statusQuery, () => state.progress);
  setHandler(pollNowSignal, () => {
    state.pollRequested = true;
  });
  setHandler(
    sendMessageUpdate,
    (prompt: string): Promise<AgentJobRecord> => sendFollowUp(state, resolved, prompt, messageKey(state)),
    {
      validator: (prompt: string) => {
        validatePrompt('sendMessage', prompt);
        if (state.progress.jobId === null)
          throw new Error('the agent job is not created yet; try again in a moment');
        if (state.sendingMessage) throw new Error('a follow-up message is already being sent; wait for it');
        if (!['polling', 'creating'].includes(state.progress.phase)) {
          throw new Error(`the workflow is ${state.progress.phase}; it takes no more messages`);
        }
      },
      description: 'Send a follow-up prompt to the agent job and resume polling until the new turn ends',
    },
  );
  setHandler(
    followUpUpdate,
    async (prompt: string): Promise<AgentJobResult> => {
      const key = messageKey(state);
      state.followUpsOpen++;
      try {
        await queueFollowUp(state, resolved, prompt, key, false);
        const turn = state.progress.turns;
        await condition(() => state.turnEnded >= turn);
        return turnResult(state, state.progress.lastRecord as AgentJobRecord);
      } finally {
        state.followUpsOpen--;
      }
    },
    {
      validator: (prompt: string) => {
        validatePrompt('followUp', prompt);
        // Queued behind whatever is under way (a create, a quota wait, another follow-up being
        // sent); refused only once the workflow is ending.
        if (!['queued', 'creating', 'polling', 'sending-message'].includes(state.progress.phase)) {
          throw new Error(`the workflow is ${state.progress.phase}; it takes no more follow-ups`);
        }
        if (state.followUpsQueued - state.followUpsSent >= MAX_QUEUED_FOLLOW_UPS) {
          throw new Error(`${MAX_QUEUED_FOLLOW_UPS} follow-ups are already queued; wait for them`);
        }
      },
      // A workflow that ends at its deadline leaves waiting follow-ups behind on purpose: their
      // callers read the workflow's own failure instead.
      unfinishedPolicy: HandlerUnfinishedPolicy.ABANDON,
      description:
        'Queue a follow-up prompt: sent once the turn in progress ends, returns when its own turn ends',
    },
  );
}

/**
 * The `Idempotency-Key` of the message an update sends: one per update ID. A client retrying the
 * update (same ID, also after continue-as-new or in a new run after this one closed) sends the same
 * key, and a new message never reuses a failed one's.
 */
function messageKey(state: RunState): string {
  const updateId = currentUpdateInfo()?.id ?? `turn-${state.progress.turns + 1}`;
  return idempotencyKey(`${workflowInfo().workflowId}/message/${updateId}`);
}

function validatePrompt(update: string, prompt: unknown): void {
  if (typeof prompt !== 'string' || prompt.trim() === '') {
    throw new Error(`${update} needs a non-blank prompt`);
  }
  if (prompt.length > MAX_PROMPT_LENGTH) {
    throw new Error(`${update} prompt is ${prompt.length} characters; the limit is ${MAX_PROMPT_LENGTH}`);
  }
}

/**
 * Sends one follow-up message and sets the state so polling watches the new turn: the body of the
 * `sendMessage` update, and what a queued follow-up does when its time comes.
 */
async function sendFollowUp(
  state: RunState,
  resolved: ResolvedInput,
  prompt: string,
  key: string,
): Promise<AgentJobRecord> {
  state.sendingMessage = true;
  const previousPhase = state.progress.phase;
  state.progress.phase = 'sending-message';
  try {
    const jobId = state.progress.jobId as string;
    const turn = state.progress.turns + 1;
    const record = await callUntilAnswered(
      state,
      'the follow-up message could not be sent',
      'sending the follow-up message',
      MESSAGE_BACKOFF,
      (timeoutMs) =>
        withinQuota(state, 'message', (managed) =>
          sendAgentJobMessage.executeWithOptions(
            {
              summary: `send follow-up message (turn ${turn})`,
              scheduleToCloseTimeout: timeoutMs,
              ...(managed ? quotaManaged(messageOptions) : {}),
            },
            [{ projectId: resolved.projectId, jobId, prompt, idempotencyKey: key }],
          ),
        ),
    );
    state.progress.turns = turn;
    state.messageEpoch++;
    observe(state, record);
    // A terminal answer to the message may still be the previous turn's record: until the job
    // is seen active, or a different terminal record shows up, the turn is not over.
    state.awaitingNewTurn = isTerminalStatus(record.status);
    state.recordBeforeMessage = record;
    state.stalePolls = 0;
    state.intervalMs = resolved.poll.initialIntervalMs;
    // Look again soon rather than at the end of the wait that was running before the message.
    state.pollRequested = true;
    return record;
  } finally {
    state.sendingMessage = false;
    state.progress.phase = previousPhase === 'sending-message' ? 'polling' : previousPhase;
  }
}

/**
 * Waits for this follow-up's place in the queue and for the turn in progress to end, then sends
 * it. `ownsSlot` counts it as open until sent (the start path); an update counts itself until its
 * turn ends.
 */
async function queueFollowUp(
  state: RunState,
  resolved: ResolvedInput,
  prompt: string,
  key: string,
  ownsSlot = true,
): Promise<AgentJobRecord> {
  const ticket = ++state.followUpsQueued;
  if (ownsSlot) state.followUpsOpen++;
  try {
    await condition(() => state.followUpsSent === ticket - 1 && turnIdle(state));
    return await sendFollowUp(state, resolved, prompt, key);
  } finally {
    state.followUpsSent = ticket;
    if (ownsSlot) state.followUpsOpen--;
  }
}

/** No turn is running: the job was read, its turn ended, and no message is on its way. */
function turnIdle(state: RunState): boolean {
  const record = state.progress.lastRecord;
  return (
    record !== null &&
    isTerminalStatus(record.status) &&
    !state.awaitingNewTurn &&
    !state.sendingMessage &&
    state.turnEnded >= state.progress.turns
  );
}

async function create(state: RunState, resolved: ResolvedInput, workflowId: string): Promise<AgentJobRecord> {
  setCurrentDetails(`Creating the agent job in project ${resolved.projectId}`);
  return callUntilAnswered(
    state,
    'the agent job could not be created',
    'creating the agent job',
    CREATE_BACKOFF,
    (timeoutMs) =>
      withinQuota(state, 'create', (managed) => {
        if (managed) setCurrentDetails(`Creating the agent job in project ${resolved.projectId}`);
        return createAgentJob.executeWithOptions(
          {
            summary: `create agent job in project ${resolved.projectId}`,
            scheduleToCloseTimeout: timeoutMs,
            ...(managed ? quotaManaged(createOptions) : {}),
          },
          // The workflow ID is the idempotency key: stable across activity retries, worker restarts
          // and continue-as-new, so one workflow never creates two agent jobs on a server that honors it.
          [
            {
              projectId: resolved.projectId,
              // resolveInput requires a prompt whenever there is no jobId, and only then is a job created.
              prompt: resolved.prompt as string,
              idempotencyKey: idempotencyKey(workflowId),
            },
          ],
        );
      }),
  );
}

/**
 * Runs a create or a follow-up message within the project's API budget when this run has one
 * (./project-quota.ts): it waits in the project's queue, and a 429 sends it back to the head
 * instead of failing. Each call is its own request, so a retry after another error asks again.
 */
function withinQuota<T>(
  state: RunState,
  kind: 'create' | 'message',
  call: (managed: boolean) => Promise<T>,
): Promise<T> {
  if (!state.quota) return call(false);
  const use = { kind, name: `${kind}-${state.progress.turns}-${++state.quotaUses}` } as const;
  return state.quota.run(use, call, state.deadlineMs);
}

/** A call that must succeed before the workflow goes on, with this run's failure handling. */
function callUntilAnswered<T>(
  state: RunState,
  whatTimedOut: string,
  doing: string,
  backoff: Backoff,
  invoke: (timeoutMs: number) => Promise<T>,
): Promise<T> {
  const ctx = apiCalls(state, whatTimedOut);
  return state.boundedCalls ? untilAnswered(ctx, doing, backoff, invoke) : singleCall(ctx, doing, invoke);
}

/** The context of an API call: this run's deadline, failure streak and last error. */
function apiCalls(state: RunState, whatTimedOut: string): ApiCallContext {
  return {
    deadlineMs: state.deadlineMs,
    streak: state.apiFailures,
    // A success clears only its own call's error: a poll that works does not hide that follow-up
    // messages keep failing.
    reportError: (error, doing) => {
      if (error !== null || state.progress.lastError?.during === doing) state.progress.lastError = error;
    },
    timedOut: () => timedOut(state, whatTimedOut),
  };
}

async function pollUntilDone(
  state: RunState,
  resolved: ResolvedInput,
  input: AgentJobInput,
): Promise<AgentJobResult> {
  const pollsPerRun = resolved.continueAsNewAfterPolls ?? POLLS_PER_RUN;
  // Every poll counts towards continue-as-new, failed ones too: that bounds a run's history
  // however long the API stays down.
  let pollsThisRun = 0;
  let waitMs: number | null = null;
  for (;;) {
    if ((state.progress.polls > 0 || pollsThisRun > 0) && Date.now() >= state.deadlineMs) {
      // A follow-up message on its way ends at the same deadline (its schedule-to-close timeout):
      // let it, so that its error is the one named and its update is answered.
      if (state.boundedCalls) await condition(() => !state.sendingMessage);
      throw timedOut(state, 'the agent job was still working');
    }
    await waitForNextPoll(state, waitMs);
    const polled = await poll(state, resolved);
    pollsThisRun++;
    waitMs = null;
    if ('retryInMs' in polled) {
      waitMs = polled.retryInMs;
    } else if (polled.record !== null) {
      const outcome = observe(state, polled.record);
      if (outcome !== null) {
        state.turnEnded = state.progress.turns;
        // A queued follow-up takes over: it sends now and this loop watches its turn.
        const queued = state.followUpsQueued > state.followUpsSent;
        if (!queued) {
          if (state.followUpsQueued > 0) await condition(allHandlersFinished);
          return finish(state, outcome);
        }
      }
      state.intervalMs = Math.min(
        state.intervalMs * resolved.poll.backoffCoefficient,
        resolved.poll.maxIntervalMs,
      );
    }
    // An open follow-up cannot move to the next run (an update cannot), so it is watched here.
    if (
      (pollsThisRun >= pollsPerRun || workflowInfo().continueAsNewSuggested) &&
      !state.sendingMessage &&
      state.followUpsOpen === 0
    ) {
      await condition(allHandlersFinished);
      // A follow-up message may have held the run until the deadline: end here, not in a new run.
      if (state.boundedCalls && Date.now() >= state.deadlineMs) {
        throw timedOut(state, 'the agent job was still working');
      }
      const next: ContinuationState = {
        jobId: state.progress.jobId as string,
        deadlineMs: state.deadlineMs,
        polls: state.progress.polls,
        turns: state.progress.turns,
        lastRecord: state.progress.lastRecord,
        awaitingNewTurn: state.awaitingNewTurn,
        unknownStatusPolls: state.unknownStatusPolls,
        intervalMs: state.intervalMs,
        created: state.created,
        pollRequested: state.pollRequested,
        recordBeforeMessage: state.recordBeforeMessage,
        stalePolls: state.stalePolls,
        apiFailures: state.apiFailures,
        lastError: state.progress.lastError,
      };
      log.info('continuing as new to keep the history bounded', { polls: state.progress.polls });
      return await continueAsNew<typeof agentJobWorkflow>(input, next);
    }
  }
}

/** Waits for the next poll: `retryInMs` after a failed poll, else the schedule's interval with jitter. */
async function waitForNextPoll(state: RunState, retryInMs: number | null): Promise<void> {
  if (state.pollRequested && !state.timerPerWait) {
    state.pollRequested = false;
    return;
  }
  const jittered = retryInMs ?? state.intervalMs * pollJitterFactor(Math.random);
  const waitMs = Math.max(1, Math.min(Math.round(jittered), state.deadlineMs - Date.now()));
  // One scope serves the run's waits until a requested poll cancels it. A scope per wait would
  // stay linked to the workflow's root scope until the run ends (the SDK never unlinks a scope),
  // one more scope held per poll.
  const scope = (state.waitScope ??= new CancellationScope());
  const fired = scope.run(() =>
    sleep(waitMs, { summary: `wait ${Math.round(waitMs / 1000)}s before poll ${state.progress.polls + 1}` }),
  );
  if (state.pollRequested) {
    // Requested already: the timer only keeps the numbering (ONE_TIMER_PER_POLL_WAIT_PATCH).
    // Cancelled before this activation ends, it never reaches the server. Its failure is expected;
    // a cancellation of the workflow at the same moment surfaces at the poll that follows.
    cancelWaits(state);
    await fired.catch(() => undefined);
    state.pollRequested = false;
    return;
  }
  const at = new Date(Date.now() + waitMs).toISOString();
  state.progress.nextPollAt = at;
  setCurrentDetails(
    `Agent job ${state.progress.jobId}: ${state.progress.lastRecord?.status ?? 'unknown'} after ${state.progress.polls} polls; next poll at ${at}`,
  );
  // The same commands as `condition(() => state.pollRequested, waitMs)` (a timer, cancelled when a
  // poll is requested first), without its cost on every poll: that helper cancels its scope even
  // after the timer fired, and the cancellation builds a failure whose stack the SDK maps through
  // the bundle's source map. Here the scope is cancelled only when the timer is to be dropped.
  // A cancellation of the workflow cancels the timer too, and its failure ends the wait.
  try {
    const requested = await Promise.race([fired.then(() => false), pollRequestDuringWait(state)]);
    if (requested) cancelWaits(state);
  } finally {
    // Settles this wait's own promise when the timer came first, so nothing of it is left pending.
    const wake = state.wake;
    state.wake = null;
    wake?.(false);
  }
  state.pollRequested = false;
  state.progress.nextPollAt = null;
}

/** Cancels the timer of the wait in progress; the next wait starts a new scope. */
function cancelWaits(state: RunState): void {
  state.waitScope?.cancel();
  state.waitScope = null;
}

/**
 * Resolves with true once a poll is requested (the `pollNow` signal, a follow-up message) during
 * the wait in progress. One condition serves every wait until it resolves and passes it on to
 * that wait; each wait has a promise of its own, settled when it ends either way, so that a wait
 * leaves nothing behind on the condition (a `.then` per wait would stay until a poll is requested,
 * for the rest of the run when none is). The steps from the condition to the wait are as many as
 * they were with one `.then` per wait, so the wait still ends at the same point of the activation.
 */
function pollRequestDuringWait(state: RunState): Promise<boolean> {
  state.pollRequest ??= condition(() => state.pollRequested)
    .then(() => {
      state.pollRequest = null;
    })
    .then(
      () => state.wake?.(true),
      // Rejected only by a cancellation of the workflow, which ends the wait through its timer too.
      () => undefined,
    );
  return new Promise<boolean>((resolve) => {
    state.wake = resolve;
  });
}

/**
 * One poll: the record it read, null when the read may be stale (issued before the latest
 * follow-up message was answered, so it cannot end the new turn), or the wait after a failure.
 */
async function poll(
  state: RunState,
  resolved: ResolvedInput,
): Promise<{ record: AgentJobRecord | null } | { retryInMs: number }> {
  const jobId = state.progress.jobId as string;
  const getLocally = state.boundedCalls ? getAgentJobLocally : getAgentJobLocallyBeforePatch;
  const getJob = state.localPolls ? getLocally : getAgentJob;
  const epoch = state.messageEpoch;
  const ctx = apiCalls(state, 'the agent job could not be read');
  const doing = `reading agent job ${jobId}`;
  const invoke = (timeoutMs: number) =>
    getJob.executeWithOptions(
      {
        summary: `poll ${state.progress.polls + 1} of agent job ${jobId}`,
        scheduleToCloseTimeout: timeoutMs,
      },
      [{ projectId: resolved.projectId, jobId }],
    );
  if (!state.boundedCalls) {
    const record = await singleCall(ctx, doing, invoke);
    state.progress.polls++;
    return { record };
  }
  const result = await attempt(ctx, doing, GET_BACKOFF, invoke);
  if (!result.ok) return result;
  state.progress.polls++;
  if (epoch === state.messageEpoch) return { record: result.value };
  // A follow-up message was answered while this read was under way: read again at once.
  state.pollRequested = true;
  return { record: null };
}

/**
 * Records what a poll or call returned and decides whether the workflow is done: returns the
 * terminal status that ends it, or null to poll on.
 */
function observe(state: RunState, record: AgentJobRecord): AgentJobStatus | null {
  const previousStatus = state.progress.lastRecord?.status;
  state.progress.lastRecord = record;
  // A follow-up message waiting for the project quota stays `queued` while polls go on.
  if (state.progress.phase !== 'queued')
    state.progress.phase = state.sendingMessage ? 'sending-message' : 'polling';
  if (!state.progress.jobId) state.progress.jobId = record.id;
  if (previousStatus === undefined) {
    upsertSearchAttributes([
      { key: SearchAttributes.jobId, value: record.id },
      { key: SearchAttributes.status, value: record.status },
    ]);
  } else if (previousStatus !== record.status) {
    upsertSearchAttributes([{ key: SearchAttributes.status, value: record.status }]);
  }

  if (!(AGENT_JOB_STATUSES as readonly string[]).includes(record.status)) {
    state.unknownStatusPolls++;
    log.warn('agent job in an undocumented status; polling on', { status: record.status, jobId: record.id });
    if (state.unknownStatusPolls >= UNKNOWN_STATUS_POLL_LIMIT) {
      throw ApplicationFailure.create({
        type: FailureType.UnknownStatus,
        message: `Agent job ${record.id} stayed in undocumented status "${record.status}" for ${state.unknownStatusPolls} polls; it is not counted as done.`,
        nonRetryable: true,
        details: [record],
      });
    }
    return null;
  }
  state.unknownStatusPolls = 0;
  if (state.sendingMessage) return null;
  if (state.awaitingNewTurn) {
    if (!isTerminalStatus(record.status)) {
      state.awaitingNewTurn = false;
      return null;
    }
    const unchanged = state.recordBeforeMessage !== null && sameRecord(state.recordBeforeMessage, record);
    if (unchanged && ++state.stalePolls < NEW_TURN_GRACE_POLLS) return null;
    state.awaitingNewTurn = false;
  }
  return isTerminalStatus(record.status) ? (record.status as AgentJobStatus) : null;
}

/**
 * An `Idempotency-Key` header value from a workflow ID. Header values must be visible ASCII, and a
 * workflow ID may hold spaces or any Unicode: such an ID is percent-encoded, others pass unchanged.
 */
function idempotencyKey(id: string): string {
  return /^[\x21-\x7e]+$/.test(id) ? id : encodeURIComponent(id);
}

function sameRecord(a: AgentJobRecord, b: AgentJobRecord): boolean {
  return a.status === b.status && a.prLink === b.prLink && (a.archivedAt ?? null) === (b.archivedAt ?? null);
}

function finish(state: RunState, status: AgentJobStatus): AgentJobResult {
  const record = state.progress.lastRecord as AgentJobRecord;
  state.progress.nextPollAt = null;
  metricMeter
    .createCounter('agent_job_terminal', 'jobs', 'Agent jobs that reached a terminal status')
    .add(1, { status });
  if (status === 'failed') {
    state.progress.phase = 'failed';
    setCurrentDetails(`Agent job ${record.id} failed after ${state.progress.polls} polls`);
    throw agentJobFailed(state, record);
  }
  state.progress.phase = status === 'archived' ? 'archived' : 'completed';
  setCurrentDetails(
    `Agent job ${record.id} ${status}${record.prLink ? `: ${record.prLink}` : ' without a pull request'}`,
  );
  return resultOf(state, record, status);
}

/** The workflow's (or a follow-up's) result for a turn that ended `completed` or `archived`. */
function resultOf(state: RunState, record: AgentJobRecord, status: AgentJobStatus): AgentJobResult {
  return {
    job: record,
    prLink: record.prLink,
    status,
    polls: state.progress.polls,
    turns: state.progress.turns,
    created: state.created,
  };
}

function agentJobFailed(state: RunState, record: AgentJobRecord): ApplicationFailure {
  return ApplicationFailure.create({
    type: FailureType.AgentJobFailed,
    message: `Agent job ${record.id} in project ${state.projectId} failed: the agent met an unrecoverable error. The final record is in the failure details.`,
    nonRetryable: true,
    details: [record],
  });
}

/** A follow-up's answer when its turn ended: the result, or `AgentJobFailed` for a failed turn. */
function turnResult(state: RunState, record: AgentJobRecord): AgentJobResult {
  if (record.status === 'failed') throw agentJobFailed(state, record);
  // Only called once the turn ended, so the status is a terminal one.
  return resultOf(state, record, record.status as AgentJobStatus);
}

/**
 * `AgentJobTimedOut`. Details: the last record, then `{ lastError }` (type, HTTP status, message)
 * so a caller can tell a slow agent job from an API that never answered.
 */
function timedOut(state: RunState, what: string): ApplicationFailure {
  state.progress.phase = 'timed-out';
  state.progress.nextPollAt = null;
  const record = state.progress.lastRecord;
  const lastError = state.progress.lastError;
  const errorText = lastError
    ? `, last API error ${lastError.type}${lastError.status === null ? '' : ` (HTTP ${lastError.status})`} while ${lastError.during}`
    : '';
  return ApplicationFailure.create({
    type: FailureType.AgentJobTimedOut,
    message:
      `Gave up at the workflow's deadline: ${what} (agent job ${state.progress.jobId ?? 'not created'}, ` +
      `last status ${record?.status ?? 'unknown'}, ${state.progress.polls} polls${errorText}). Raise "timeout" in the input to wait longer.`,
    nonRetryable: true,
    details: [record, { lastError }],
  });
}
