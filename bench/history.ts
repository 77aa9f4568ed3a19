/**
 * Cost of a workflow, counted from its real event histories: events per run and billable actions,
 * over every run of a continue-as-new chain.
 *
 * Billable actions follow Temporal Cloud's list (docs.temporal.io/cloud/actions, "Temporal Cloud
 * Actions"): workflow started (by a client or by continue-as-new), timer started, activity started
 * or retried (every attempt), local activities (one per workflow task that records any), search
 * attribute upsert (one per command, however many keys), signal, accepted update, side effect,
 * workflow options updated, child workflow start (two). Queries are billable too but never reach the
 * history; the benchmark sends none. Any other marker counts
 * as one action under `other`: the list does not name it, so we count high rather than low.
 */
import type { Client, WorkflowHandle, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { mapLimit } from '../src/client/map-limit.js';

/** The marker the SDK core writes for each completed local activity. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** A run's history as the client fetches it. */
export type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
/** One event of it. */
export type HistoryEvent = NonNullable<History['events']>[number];

/** Billable actions by kind. */
export interface ActionCounts {
  workflowStarted: number;
  timersStarted: number;
  /** Activity attempts: each start and each retry is one action. */
  activityAttempts: number;
  /** Workflow tasks that recorded local activity markers (one action each). */
  localActivityTasks: number;
  searchAttributeUpserts: number;
  signals: number;
  updates: number;
  other: number;
  total: number;
}

/** Cost of one workflow: every run of its continue-as-new chain. */
export interface WorkflowCost {
  workflowId: string;
  runs: number;
  /** Events over every run. */
  events: number;
  /** Events of the longest run. */
  maxRunEvents: number;
  actions: ActionCounts;
  /** Activity attempts by activity type, over every run: polls are the attempts of the poll activity. */
  attemptsByActivity: Record<string, number>;
  /** Close time of the last run (epoch ms), or null while it runs. */
  closedAt: number | null;
  /** The workflow's result, decoded, when the last run completed. */
  result: unknown;
}

/** Zeroed counts. */
function noActions(): ActionCounts {
  return {
    workflowStarted: 0,
    timersStarted: 0,
    activityAttempts: 0,
    localActivityTasks: 0,
    searchAttributeUpserts: 0,
    signals: 0,
    updates: 0,
    other: 0,
    total: 0,
  };
}

/** Adds the billable actions of one run's events to `into`. */
function countActions(events: readonly HistoryEvent[], into: ActionCounts = noActions()): ActionCounts {
  const localActivityTasks = new Set<string>();
  for (const event of events) {
    if (event.workflowExecutionStartedEventAttributes) into.workflowStarted++;
    else if (event.timerStartedEventAttributes) into.timersStarted++;
    // The started event of a retried activity is written once, at the end, with the last attempt's
    // number: that number is how many attempts (actions) the activity took.
    else if (event.activityTaskStartedEventAttributes)
      into.activityAttempts += Math.max(1, event.activityTaskStartedEventAttributes.attempt ?? 1);
    else if (event.markerRecordedEventAttributes?.markerName === LOCAL_ACTIVITY_MARKER)
      localActivityTasks.add(String(event.markerRecordedEventAttributes.workflowTaskCompletedEventId));
    else if (event.markerRecordedEventAttributes) into.other++;
    else if (event.upsertWorkflowSearchAttributesEventAttributes) into.searchAttributeUpserts++;
    else if (event.workflowExecutionSignaledEventAttributes) into.signals++;
    else if (event.workflowExecutionUpdateAcceptedEventAttributes) into.updates++;
    else if (event.startChildWorkflowExecutionInitiatedEventAttributes) into.other += 2;
    else if (event.workflowExecutionOptionsUpdatedEventAttributes) into.other++;
  }
  into.localActivityTasks += localActivityTasks.size;
  into.total =
    into.workflowStarted +
    into.timersStarted +
    into.activityAttempts +
    into.localActivityTasks +
    into.searchAttributeUpserts +
    into.signals +
    into.updates +
    into.other;
  return into;
}

/**
 * Fetches every run of the workflow's continue-as-new chain, from the first run, and counts them.
 * `firstRunId` is the run the client started.
 */
export async function workflowCost(
  client: Client,
  workflowId: string,
  firstRunId: string,
): Promise<WorkflowCost> {
  const actions = noActions();
  const attemptsByActivity: Record<string, number> = {};
  let runs = 0;
  let events = 0;
  let maxRunEvents = 0;
  let closedAt: number | null = null;
  let result: unknown = undefined;
  for await (const { history } of chainHistories(client, workflowId, firstRunId)) {
    const runEvents: HistoryEvent[] = history.events ?? [];
    runs++;
    events += runEvents.length;
    maxRunEvents = Math.max(maxRunEvents, runEvents.length);
    countActions(runEvents, actions);
    countAttempts(runEvents, attemptsByActivity);
    const last: HistoryEvent | undefined = runEvents.at(-1);
    if (last && isClose(last)) closedAt = timestampMs(last.eventTime);
    const decoded = resultOf(runEvents);
    if (decoded !== undefined) result = decoded;
  }
  return { workflowId, runs, events, maxRunEvents, actions, attemptsByActivity, closedAt, result };
}

/** The result a completed run's history ends with, decoded; undefined for a run that did not complete. */
function resultOf(events: readonly HistoryEvent[]): unknown {
  const payload = events.at(-1)?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0];
  return payload ? defaultPayloadConverter.fromPayload(payload) : undefined;
}

/** The history of every run of a continue-as-new chain, from `firstRunId` to the current run. */
export async function* chainHistories(
  client: Client,
  workflowId: string,
  firstRunId: string,
): AsyncGenerator<{ runId: string; history: History }> {
  let runId: string | null = firstRunId;
  while (runId !== null) {
    const history: History = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    yield { runId, history };
    runId = history.events?.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? null;
  }
}

/** Adds each activity's attempts, by activity type, to `into`: regular and local activities alike. */
function countAttempts(events: readonly HistoryEvent[], into: Record<string, number>): void {
  const typeByScheduledId = new Map<string, string>();
  for (const event of events) {
    const marker = event.markerRecordedEventAttributes;
    if (marker?.markerName === LOCAL_ACTIVITY_MARKER) {
      // The SDK core records a local activity's type and final attempt in the marker's "data".
      const payload = marker.details?.data?.payloads?.[0];
      const data = payload
        ? defaultPayloadConverter.fromPayload<{ activity_type?: string; attempt?: number }>(payload)
        : {};
      const type = data.activity_type ?? 'unknown';
      into[type] = (into[type] ?? 0) + Math.max(1, data.attempt ?? 1);
    }
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) typeByScheduledId.set(String(event.eventId), scheduled.activityType?.name ?? 'unknown');
    const started = event.activityTaskStartedEventAttributes;
    if (started) {
      const type = typeByScheduledId.get(String(started.scheduledEventId)) ?? 'unknown';
      into[type] = (into[type] ?? 0) + Math.max(1, started.attempt ?? 1);
    }
  }
}

/**
 * An event's time in epoch milliseconds, rounded down to a whole one as the SDK's own conversion
 * does (whose module, under @temporalio/common/lib/, is no public API).
 */
export function timestampMs(time: HistoryEvent['eventTime']): number {
  if (!time) throw new Error(`expected an event time, got ${time}`);
  const seconds = typeof time.seconds === 'number' ? time.seconds : (time.seconds?.toNumber() ?? 0);
  return seconds * 1000 + Math.floor((time.nanos ?? 0) / 1e6);
}

/** Whether the event closes its run (continue-as-new aside). */
export function isClose(event: HistoryEvent): boolean {
  return Boolean(
    event.workflowExecutionCompletedEventAttributes ??
    event.workflowExecutionFailedEventAttributes ??
    event.workflowExecutionTimedOutEventAttributes ??
    event.workflowExecutionTerminatedEventAttributes ??
    event.workflowExecutionCanceledEventAttributes,
  );
}

/**
 * The run a client start created. `startAgentJob` types its handle without it (it may attach to a
 * workflow started earlier), so the run ID is read where the SDK put it, or asked of the server.
 */
export async function firstRunId(handle: WorkflowHandle): Promise<string> {
  const known = (handle as Partial<WorkflowHandleWithFirstExecutionRunId>).firstExecutionRunId;
  if (known) return known;
  const description = await handle.describe();
  return description.raw.workflowExecutionInfo?.firstRunId || description.runId;
}

/**
 * Where one job's detection latency went, in ms: from its agent job's end (the simulator's clock) to
 * the start of the poll attempt that saw it; that attempt, to its completion; the completion to the
 * workflow task that read it (the server, and the worker's workflow-task queue); that task to the
 * close. The server's clock for the events.
 */
export interface DetectionParts {
  wait: number;
  attempt: number;
  toTask: number;
  toClose: number;
}

/**
 * Closed workflows whose histories split the detection latency: one in every N / 200, spread over
 * the start order, enough for a p99 of each part with a few jobs above it.
 */
export const DETECTION_SAMPLE = 200;

/** The parts of {@link DetectionParts}, in the order they happen. */
export const DETECTION_PARTS = ['wait', 'attempt', 'toTask', 'toClose'] as const;

/** What each part of the split measures, as the page names it. */
export const DETECTION_PART_NAMES: Record<keyof DetectionParts, string> = {
  wait: "job's end → start of the attempt that saw it",
  attempt: 'that attempt',
  toTask: 'its completion → the workflow task',
  toClose: 'that task → the close',
};

/** A record with one value per part of the split, in {@link DETECTION_PARTS}' order. */
export function perPart<T>(value: (part: keyof DetectionParts) => T): Record<keyof DetectionParts, T> {
  const record = {} as Record<keyof DetectionParts, T>;
  for (const part of DETECTION_PARTS) record[part] = value(part);
  return record;
}

/**
 * Splits a closed run's detection latency from its history and the moment its agent job ended, or
 * null when the history lacks one of the events (a run that closed otherwise) or its reads were
 * local activities (baseline (c): a marker, with no start of its own, follows the last activity). The
 * attempt that saw the end is the last one started: a poll by retry records only its last attempt's
 * start, and a timer loop's last activity is the read that saw the end.
 */
export function detectionParts(events: readonly HistoryEvent[], endedAtMs: number): DetectionParts | null {
  const lastStart = events.map((e) => Boolean(e.activityTaskStartedEventAttributes)).lastIndexOf(true);
  const completed = events.findIndex((e, i) => i > lastStart && e.activityTaskCompletedEventAttributes);
  const task = events.findIndex((e, i) => i > completed && e.workflowTaskStartedEventAttributes);
  const close = events.findIndex((e) => isClose(e));
  if (lastStart < 0 || [completed, task, close].some((i) => i < 0)) return null;
  if (
    events.some(
      (e, i) => i > completed && e.markerRecordedEventAttributes?.markerName === LOCAL_ACTIVITY_MARKER,
    )
  )
    return null;
  const at = (i: number) => timestampMs(events[i]?.eventTime);
  return {
    wait: at(lastStart) - endedAtMs,
    attempt: at(completed) - at(lastStart),
    toTask: at(task) - at(completed),
    toClose: at(close) - at(task),
  };
}

/**
 * The detection split of sampled closed workflows, part by part: their results name their agent
 * jobs (this worker's `{ job }`, the baselines' record), `endedAt` says when each job ended.
 */
export async function detectionSplit(
  client: Client,
  sample: ReadonlyArray<{ workflowId: string }>,
  endedAt: ReadonlyMap<string, number>,
): Promise<Record<keyof DetectionParts, number[]>> {
  const split = perPart((): number[] => []);
  await mapLimit(sample, 8, async ({ workflowId }) => {
    // One read: the history names the job in its result, and holds the events to time.
    const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const result = resultOf(events) as { id?: string; job?: { id?: string } } | undefined;
    const end = endedAt.get(result?.job?.id ?? result?.id ?? '');
    if (end === undefined) return;
    const parts = detectionParts(events, end);
    if (parts === null) return;
    for (const part of DETECTION_PARTS) split[part].push(parts[part]);
  });
  return split;
}
