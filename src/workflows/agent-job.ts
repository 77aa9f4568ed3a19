/**
 * The agent-job workflow: create the agent job (or attach to one), poll it on durable timers until
 * it ends, and return the final record with its prLink.
 *
 * Deterministic by construction: time comes from the workflow clock, randomness (jitter) from the
 * workflow's seeded Math.random, and all I/O happens in activities.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  isCancellation,
  log,
  metricMeter,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
  type ActivityOptions,
  type LocalActivityOptions,
} from '@temporalio/workflow';
import type { AgentJobActivities } from '../activities/index.js';
import {
  FailureType,
  InvalidInputError,
  isTerminalStatus,
  MAX_PROMPT_LENGTH,
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
  type ContinuationState,
  type ResolvedInput,
} from '../contract.js';
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

/** Jitter of each wait, as a fraction (±10%), so thousands of workflows do not poll in lockstep. */
const JITTER = 0.1;

// Retry policies. Final errors are marked non-retryable by the activities themselves, so these
// only bound the transient ones; `nextRetryDelay` from Retry-After overrides the backoff.
const createOptions: ActivityOptions = {
  // The HTTP client gives up well before this (connect 10s, headers 30s, body 30s).
  startToCloseTimeout: '75s',
  retry: { initialInterval: '2s', backoffCoefficient: 2, maximumInterval: '2m' },
};
const getOptions: ActivityOptions = {
  startToCloseTimeout: '75s',
  retry: { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '1m' },
};

// A poll as a local activity retries inside the worker while the wait is short; longer waits (a
// Retry-After, a long outage) become a workflow timer instead of holding the workflow task open.
const localGetOptions: LocalActivityOptions = {
  startToCloseTimeout: getOptions.startToCloseTimeout,
  retry: getOptions.retry,
  localRetryThreshold: '10s',
};

// A follow-up message starts a turn, like a create: same patience, and an idempotency key too.
const messageOptions: ActivityOptions = createOptions;

const { createAgentJob } = proxyActivities<AgentJobActivities>(createOptions);
const { getAgentJob } = proxyActivities<AgentJobActivities>(getOptions);
const { getAgentJob: getAgentJobLocally } = proxyLocalActivities<AgentJobActivities>(localGetOptions);
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
  /** Creates and follow-up messages wait for the project's API budget; null in runs from before it. */
  quota: ProjectQuotaRequester | null;
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
      lastError: null,
    },
    deadlineMs: continuation?.deadlineMs ?? Date.now() + resolved.timeoutMs,
    pollRequested: false,
    sendingMessage: false,
    awaitingNewTurn: continuation?.awaitingNewTurn ?? false,
    recordBeforeMessage: continuation?.awaitingNewTurn ? (continuation.lastRecord ?? null) : null,
    stalePolls: 0,
    unknownStatusPolls: continuation?.unknownStatusPolls ?? 0,
    intervalMs: continuation?.intervalMs ?? resolved.poll.initialIntervalMs,
    created: continuation?.created ?? !resolved.jobId,
    projectId: resolved.projectId,
    localPolls: resolved.poll.localActivity && patched(LOCAL_ACTIVITY_POLLS_PATCH),
    quota: null,
  };
  if (patched(PROJECT_QUOTA_PATCH))
    state.quota = new ProjectQuotaRequester(resolved.projectId, state.progress);
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
    return await pollUntilDone(state, resolved, input);
  } catch (err) {
    if (isCancellation(err)) {
      state.progress.phase = 'cancelled';
      state.progress.nextPollAt = null;
      setCurrentDetails(
        `Cancelled. The agent job ${state.progress.jobId ?? '(not created)'} goes on at the API.`,
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
    async (prompt: string): Promise<AgentJobRecord> => {
      state.sendingMessage = true;
      const previousPhase = state.progress.phase;
      state.progress.phase = 'sending-message';
      try {
        const jobId = state.progress.jobId as string;
        const turn = state.progress.turns + 1;
        const send = (managed: boolean) =>
          sendAgentJobMessage.executeWithOptions(
            {
              summary: `send follow-up message (turn ${turn})`,
              ...(managed ? quotaManaged(messageOptions) : {}),
            },
            [
              {
                projectId: resolved.projectId,
                jobId,
                prompt,
                idempotencyKey: idempotencyKey(`${workflowInfo().workflowId}/turn-${turn}`),
              },
            ],
          );
        const use = { kind: 'message', name: `turn-${turn}` } as const;
        const record = await (state.quota ? state.quota.run(use, send, state.deadlineMs) : send(false));
        state.progress.turns = turn;
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
      } catch (err) {
        state.progress.lastError = describeError(err);
        throw toWorkflowFailure(err, 'sending the follow-up message');
      } finally {
        state.sendingMessage = false;
        state.progress.phase = previousPhase === 'sending-message' ? 'polling' : previousPhase;
      }
    },
    {
      validator: (prompt: string) => {
        if (typeof prompt !== 'string' || prompt.trim() === '') {
          throw new Error('sendMessage needs a non-blank prompt');
        }
        if (prompt.length > MAX_PROMPT_LENGTH) {
          throw new Error(
            `sendMessage prompt is ${prompt.length} characters; the limit is ${MAX_PROMPT_LENGTH}`,
          );
        }
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
}

async function create(state: RunState, resolved: ResolvedInput, workflowId: string): Promise<AgentJobRecord> {
  setCurrentDetails(`Creating the agent job in project ${resolved.projectId}`);
  const call = (managed: boolean) => {
    if (managed) setCurrentDetails(`Creating the agent job in project ${resolved.projectId}`);
    return createAgentJob.executeWithOptions(
      {
        summary: `create agent job in project ${resolved.projectId}`,
        scheduleToCloseTimeout: Math.max(1, state.deadlineMs - Date.now()),
        ...(managed ? quotaManaged(createOptions) : {}),
      },
      // The workflow ID is the idempotency key: stable across activity retries, worker restarts
      // and continue-as-new, so one workflow never creates two agent jobs on a server that honors it.
      [
        {
          projectId: resolved.projectId,
          prompt: resolved.prompt,
          idempotencyKey: idempotencyKey(workflowId),
        },
      ],
    );
  };
  try {
    const use = { kind: 'create', name: 'create' } as const;
    return await (state.quota ? state.quota.run(use, call, state.deadlineMs) : call(false));
  } catch (err) {
    state.progress.lastError = describeError(err);
    if (isCancellation(err)) throw err;
    if (isDeadlineTimeout(err)) throw timedOut(state, 'the agent job could not be created');
    throw toWorkflowFailure(err, 'creating the agent job');
  }
}

async function pollUntilDone(
  state: RunState,
  resolved: ResolvedInput,
  input: AgentJobInput,
): Promise<AgentJobResult> {
  const pollsPerRun = resolved.continueAsNewAfterPolls ?? POLLS_PER_RUN;
  let pollsThisRun = 0;
  for (;;) {
    if (state.progress.polls > 0 && Date.now() >= state.deadlineMs) {
      throw timedOut(state, 'the agent job was still working');
    }
    await waitForNextPoll(state);
    const record = await poll(state, resolved);
    pollsThisRun++;
    const outcome = observe(state, record);
    if (outcome !== null) return finish(state, outcome);
    state.intervalMs = Math.min(
      state.intervalMs * resolved.poll.backoffCoefficient,
      resolved.poll.maxIntervalMs,
    );
    if ((pollsThisRun >= pollsPerRun || workflowInfo().continueAsNewSuggested) && !state.sendingMessage) {
      await condition(allHandlersFinished);
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
      };
      log.info('continuing as new to keep the history bounded', { polls: state.progress.polls });
      return await continueAsNew<typeof agentJobWorkflow>(input, next);
    }
  }
}

async function waitForNextPoll(state: RunState): Promise<void> {
  if (state.pollRequested) {
    state.pollRequested = false;
    return;
  }
  const jittered = state.intervalMs * (1 + (Math.random() * 2 - 1) * JITTER);
  const waitMs = Math.max(1, Math.min(Math.round(jittered), state.deadlineMs - Date.now()));
  const at = new Date(Date.now() + waitMs).toISOString();
  state.progress.nextPollAt = at;
  setCurrentDetails(
    `Agent job ${state.progress.jobId}: ${state.progress.lastRecord?.status ?? 'unknown'} after ${state.progress.polls} polls; next poll at ${at}`,
  );
  await condition(() => state.pollRequested, waitMs, {
    summary: `wait ${Math.round(waitMs / 1000)}s before poll ${state.progress.polls + 1}`,
  });
  state.pollRequested = false;
  state.progress.nextPollAt = null;
}

async function poll(state: RunState, resolved: ResolvedInput): Promise<AgentJobRecord> {
  const jobId = state.progress.jobId as string;
  const getJob = state.localPolls ? getAgentJobLocally : getAgentJob;
  try {
    const record = await getJob.executeWithOptions(
      {
        summary: `poll ${state.progress.polls + 1} of agent job ${jobId}`,
        // Transient errors are retried until the workflow's deadline, not beyond.
        scheduleToCloseTimeout: Math.max(1_000, state.deadlineMs - Date.now()),
      },
      [{ projectId: resolved.projectId, jobId }],
    );
    state.progress.polls++;
    state.progress.lastError = null;
    return record;
  } catch (err) {
    state.progress.lastError = describeError(err);
    if (isCancellation(err)) throw err;
    if (isDeadlineTimeout(err)) throw timedOut(state, 'the agent job could not be read');
    throw toWorkflowFailure(err, `reading agent job ${jobId}`);
  }
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
    throw ApplicationFailure.create({
      type: FailureType.AgentJobFailed,
      message: `Agent job ${record.id} in project ${state.projectId} failed: the agent met an unrecoverable error. The final record is in the failure details.`,
      nonRetryable: true,
      details: [record],
    });
  }
  state.progress.phase = status === 'archived' ? 'archived' : 'completed';
  setCurrentDetails(
    `Agent job ${record.id} ${status}${record.prLink ? `: ${record.prLink}` : ' without a pull request'}`,
  );
  return {
    job: record,
    prLink: record.prLink,
    status,
    polls: state.progress.polls,
    turns: state.progress.turns,
    created: state.created,
  };
}

function timedOut(state: RunState, what: string): ApplicationFailure {
  state.progress.phase = 'timed-out';
  state.progress.nextPollAt = null;
  const record = state.progress.lastRecord;
  return ApplicationFailure.create({
    type: FailureType.AgentJobTimedOut,
    message:
      `Gave up at the workflow's deadline: ${what} (agent job ${state.progress.jobId ?? 'not created'}, ` +
      `last status ${record?.status ?? 'unknown'}, ${state.progress.polls} polls` +
      `${state.progress.lastError ? `, last error ${state.progress.lastError.type}` : ''}). Raise "timeout" in the input to wait longer.`,
    nonRetryable: true,
    details: [record],
  });
}

/** An activity that ran out of its schedule-to-close time, which we set to the workflow's deadline. */
function isDeadlineTimeout(err: unknown): boolean {
  return err instanceof ActivityFailure && err.cause?.name === 'TimeoutFailure';
}

/** Re-raises an activity's final failure as the workflow's failure, keeping its type and message. */
function toWorkflowFailure(err: unknown, doing: string): unknown {
  if (!(err instanceof ActivityFailure) || !(err.cause instanceof ApplicationFailure)) return err;
  const cause = err.cause;
  return ApplicationFailure.create({
    type: cause.type ?? 'ActivityFailed',
    message: `Failed while ${doing}: ${cause.message}`,
    nonRetryable: true,
    details: cause.details ? [...cause.details] : undefined,
    cause: err,
  });
}

function describeError(err: unknown): { type: string; message: string } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof ApplicationFailure)
    return { type: cause.type ?? 'ApplicationFailure', message: cause.message };
  if (cause instanceof Error) return { type: cause.name, message: cause.message };
  return { type: 'Error', message: String(cause) };
}
