/**
 * Cost of a workflow, counted from its real event histories: events per run and billable actions
 * (as docs/PERFORMANCE.md's "Billable actions" sets out), over every run of a continue-as-new
 * chain. A marker the list does not name counts one under `other`, to count high rather than low.
 */
import type { Client, WorkflowHandle, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import proto from '@temporalio/proto';
import { SEALED_ENCODING } from '../src/payload-codec/index.js';
import { mapLimit } from '../src/client/map-limit.js';
import { sum } from './stats.js';

/** The marker the SDK core writes for each completed local activity. */
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** A run's history as the client fetches it. */
export type History = Awaited<ReturnType<WorkflowHandle['fetchHistory']>>;
/** One event of it. */
export type HistoryEvent = NonNullable<History['events']>[number];

/** The kinds of billable actions, each with its name in the cost table. */
export const ACTION_KINDS = {
  workflowStarted: 'start',
  timersStarted: 'timers',
  /** Activity attempts: each start and each retry is one action. */
  activityAttempts: 'activity attempts',
  /** Workflow tasks that recorded local activity markers (one action each). */
  localActivityTasks: 'local activity tasks',
  searchAttributeUpserts: 'upserts',
  signals: 'signals',
  updates: 'updates',
  other: 'other',
} as const;

/** Billable actions by kind, and their `total`. */
export type ActionCounts = Record<keyof typeof ACTION_KINDS | 'total', number>;

/** Cost of one workflow: every run of its continue-as-new chain. */
export type WorkflowCost = Awaited<ReturnType<typeof workflowCost>>;

/**
 * Adds one run's billable actions to `actions`, and each activity's attempts, by activity type, to
 * `attempts`: regular and local activities alike.
 */
function count(
  events: readonly HistoryEvent[],
  actions: ActionCounts,
  attempts: Record<string, number>,
): void {
  const localActivityTasks = new Set<string>();
  const typeByScheduledId = new Map<string, string>();
  const attempted = (type: string | undefined, attempt: number | null | undefined) =>
    (attempts[type ?? 'unknown'] = (attempts[type ?? 'unknown'] ?? 0) + Math.max(1, attempt ?? 1));
  for (const event of events) {
    const marker = event.markerRecordedEventAttributes;
    const started = event.activityTaskStartedEventAttributes;
    if (event.workflowExecutionStartedEventAttributes) actions.workflowStarted++;
    else if (event.timerStartedEventAttributes) actions.timersStarted++;
    else if (started) {
      // The started event of a retried activity is written once, at the end, with the last attempt's
      // number: that number is how many attempts (actions) the activity took.
      actions.activityAttempts += Math.max(1, started.attempt ?? 1);
      attempted(typeByScheduledId.get(String(started.scheduledEventId)), started.attempt);
    } else if (marker?.markerName === LOCAL_ACTIVITY_MARKER) {
      localActivityTasks.add(String(marker.workflowTaskCompletedEventId));
      // The SDK core records a local activity's type and final attempt in the marker's "data".
      const payload = marker.details?.data?.payloads?.[0];
      const data = payload
        ? defaultPayloadConverter.fromPayload<{ activity_type?: string; attempt?: number }>(payload)
        : {};
      attempted(data.activity_type, data.attempt);
    } else if (marker) actions.other++;
    else if (event.upsertWorkflowSearchAttributesEventAttributes) actions.searchAttributeUpserts++;
    else if (event.workflowExecutionSignaledEventAttributes) actions.signals++;
    else if (event.workflowExecutionUpdateAcceptedEventAttributes) actions.updates++;
    else if (event.startChildWorkflowExecutionInitiatedEventAttributes) actions.other += 2;
    else if (event.workflowExecutionOptionsUpdatedEventAttributes) actions.other++;
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) typeByScheduledId.set(String(event.eventId), scheduled.activityType?.name ?? 'unknown');
  }
  actions.localActivityTasks += localActivityTasks.size;
  actions.total = sum(Object.keys(ACTION_KINDS).map((kind) => actions[kind as keyof ActionCounts]));
}

/** Fetches every run of the workflow's continue-as-new chain, from `firstRunId` (the run the client started), and counts them. */
export async function workflowCost(client: Client, workflowId: string, firstRunId: string) {
  const cost = {
    workflowId,
    runs: 0,
    /** Events over every run, and of the longest run. */
    events: 0,
    maxRunEvents: 0,
    /** Bytes of every run's history, serialized as the server stores it, and the payloads in them. */
    bytes: 0,
    payloads: 0,
    actions: Object.fromEntries(
      [...Object.keys(ACTION_KINDS), 'total'].map((kind) => [kind, 0]),
    ) as ActionCounts,
    /** Activity attempts by activity type, over every run: polls are the attempts of the poll activity. */
    attemptsByActivity: {} as Record<string, number>,
    /** Close time of the last run (epoch ms), or null while it runs. */
    closedAt: null as number | null,
    /** The workflow's result, decoded, when the last run completed. */
    result: undefined as unknown,
  };
  for (let runId: string | null = firstRunId; runId !== null;) {
    const history: History = await client.workflow.getHandle(workflowId, runId).fetchHistory();
    const events: HistoryEvent[] = history.events ?? [];
    cost.runs++;
    cost.events += events.length;
    cost.maxRunEvents = Math.max(cost.maxRunEvents, events.length);
    cost.bytes += proto.temporal.api.history.v1.History.encode(history).finish().length;
    cost.payloads += payloadsOf(history).length;
    count(events, cost.actions, cost.attemptsByActivity);
    const last = events.at(-1);
    if (last && isClose(last)) cost.closedAt = timestampMs(last.eventTime);
    cost.result = resultOf(events) ?? cost.result;
    runId = last?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? null;
  }
  return cost;
}

/**
 * The result a completed run's history ends with, decoded; undefined for a run that did not
 * complete, or whose result the payload codec sealed (the benchmark reads results it needs from
 * runs without the codec).
 */
function resultOf(events: readonly HistoryEvent[]): unknown {
  const payload = events.at(-1)?.workflowExecutionCompletedEventAttributes?.result?.payloads?.[0];
  if (!payload || isSealed(payload)) return undefined;
  return defaultPayloadConverter.fromPayload(payload);
}

/**
 * Every payload of a history: each object with `data` and `metadata`, at any depth (inputs,
 * results, failures' details, the user metadata of summaries), as the SDK hands them to a codec.
 */
export function payloadsOf(history: History): Payload[] {
  const found: Payload[] = [];
  const walk = (value: unknown): void => {
    if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) return;
    if (Array.isArray(value)) return value.forEach(walk);
    const record = value as Record<string, unknown>;
    if ('metadata' in record && 'data' in record && ArrayBuffer.isView(record.data)) {
      found.push(record);
      return;
    }
    Object.values(record).forEach(walk);
  };
  walk(history.events ?? []);
  return found;
}

function isSealed(payload: Payload): boolean {
  const encoding = payload.metadata?.encoding;
  return encoding !== undefined && Buffer.from(encoding).toString() === SEALED_ENCODING;
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
function isClose(event: HistoryEvent): boolean {
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
 * Where one job's detection latency goes, part by part in the order they happen, as the page names
 * them: the job's end on the simulator's clock, the events on the server's.
 */
export const DETECTION_PARTS = {
  wait: "job's end → start of the attempt that saw it",
  attempt: 'that attempt',
  toTask: 'its completion → the workflow task',
  toClose: 'that task → the close',
} as const;

/** One of {@link DETECTION_PARTS}. */
export type DetectionPart = keyof typeof DETECTION_PARTS;

/**
 * Closed workflows whose histories split the detection latency: one in every N / 200, spread over
 * the start order, enough for a p99 of each part with a few jobs above it.
 */
export const DETECTION_SAMPLE = 200;

/** A record with one value per part of the split, in {@link DETECTION_PARTS}' order. */
export function perPart<T>(value: (part: DetectionPart) => T): Record<DetectionPart, T> {
  const parts = Object.keys(DETECTION_PARTS) as DetectionPart[];
  return Object.fromEntries(parts.map((part) => [part, value(part)])) as Record<DetectionPart, T>;
}

/**
 * Splits a closed run's detection latency from its history and the moment its agent job ended, or
 * null when the history lacks one of the events (a run that closed otherwise) or its reads were
 * local activities (baseline (c): a marker, with no start of its own, follows the last activity). The
 * attempt that saw the end is the last one started: a poll by retry records only its last attempt's
 * start, and a timer loop's last activity is the read that saw the end.
 */
export function detectionParts(events: readonly HistoryEvent[], endedAtMs: number) {
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
  // Each part in ms.
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
): Promise<Record<DetectionPart, number[]>> {
  const split = perPart((): number[] => []);
  await mapLimit(sample, 8, async ({ workflowId }) => {
    // One read: the history names the job in its result, and holds the events to time.
    const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
    const result = resultOf(events) as { id?: string; job?: { id?: string } } | undefined;
    const end = endedAt.get(result?.job?.id ?? result?.id ?? '');
    if (end === undefined) return;
    const parts = detectionParts(events, end);
    if (parts === null) return;
    for (const [part, ms] of Object.entries(parts)) split[part as DetectionPart].push(ms);
  });
  return split;
}
