/**
 * What a run that ended otherwise than completed left for the next run under the same key: the
 * agent job it made, or a create whose outcome it never learnt (the API honours no idempotency
 * key, so neither may be sent again blindly). Pure: a search attribute and history events.
 */
import type { PayloadCodec } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import type { ApiErrorDetails } from '../contract.js';
import { outcomeUnknown } from '../failure-policy/table.js';

/** What the next run under the key starts from. */
export type PreviousRun =
  /** Nothing to carry on: no create was sent, or every one surely failed. */
  | { kind: 'nothing' }
  /** The run made this agent job: go on with it. */
  | { kind: 'job'; jobId: string }
  /** A create may have made a job whose ID the run never recorded: why. */
  | { kind: 'uncertain'; why: string };

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** The activity type of the create (src/activities/index.ts). */
const CREATE_ACTIVITY = 'createAgentJob';

/**
 * Reads an ended run: its `AgentJobId` search attribute when set, else its history. A completed
 * create names the job; one left without an outcome, timed out, cancelled or failed as maybe
 * applied is uncertain; one that failed as surely not applied is nothing.
 */
export function previousRun(jobIdAttribute: string | null, events: readonly HistoryEvent[]): PreviousRun {
  if (jobIdAttribute !== null) return { kind: 'job', jobId: jobIdAttribute };
  const creates = new Set<string>();
  let uncertain: string | null = null;
  for (const event of events) {
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name === CREATE_ACTIVITY) creates.add(String(event.eventId));
    const outcome = outcomeOf(event);
    if (outcome === null || !creates.has(outcome.scheduledEventId)) continue;
    creates.delete(outcome.scheduledEventId);
    if (outcome.kind === 'job') return { kind: 'job', jobId: outcome.jobId };
    if (outcome.kind === 'uncertain') uncertain = outcome.why;
  }
  if (creates.size > 0) return { kind: 'uncertain', why: 'a create that was on its way when the run ended' };
  return uncertain === null ? { kind: 'nothing' } : { kind: 'uncertain', why: uncertain };
}

/**
 * The events with the payloads {@link previousRun} reads (activity results and failure details)
 * opened by `codecs`, the client's, in encode order: a sealed create result read unopened would
 * make a job the run did make look uncertain.
 */
export async function openCreateOutcomes(
  events: readonly HistoryEvent[],
  codecs: readonly PayloadCodec[],
): Promise<HistoryEvent[]> {
  if (codecs.length === 0) return [...events];
  const open = async (payloads: temporal.api.common.v1.IPayload[] | null | undefined) => {
    let opened = payloads ?? [];
    for (const codec of [...codecs].reverse()) opened = await codec.decode(opened);
    return opened;
  };
  return Promise.all(
    events.map(async (event) => {
      const completed = event.activityTaskCompletedEventAttributes;
      if (completed?.result) {
        const result = { payloads: await open(completed.result.payloads) };
        return { ...event, activityTaskCompletedEventAttributes: { ...completed, result } };
      }
      const failed = event.activityTaskFailedEventAttributes;
      const info = failed?.failure?.applicationFailureInfo;
      if (failed && info?.details) {
        const details = { payloads: await open(info.details.payloads) };
        const failure = { ...failed.failure, applicationFailureInfo: { ...info, details } };
        return { ...event, activityTaskFailedEventAttributes: { ...failed, failure } };
      }
      return event;
    }),
  );
}

/** The outcome of a create attempt an event records, with the event that scheduled it. */
function outcomeOf(event: HistoryEvent): (PreviousRun & { scheduledEventId: string }) | null {
  const completed = event.activityTaskCompletedEventAttributes;
  if (completed) {
    const record = decoded(completed.result?.payloads?.[0]?.data) as { id?: unknown } | null;
    const scheduledEventId = String(completed.scheduledEventId);
    if (typeof record?.id === 'string') return { kind: 'job', jobId: record.id, scheduledEventId };
    return { kind: 'uncertain', why: 'a create that answered without a readable job ID', scheduledEventId };
  }
  const failed = event.activityTaskFailedEventAttributes;
  if (failed) {
    const info = failed.failure?.applicationFailureInfo;
    const details = decoded(info?.details?.payloads?.[0]?.data) as ApiErrorDetails | null;
    const surelyNot = details?.mayHaveBeenApplied === false && !outcomeUnknown(info?.type ?? undefined);
    return surelyNot
      ? { kind: 'nothing', scheduledEventId: String(failed.scheduledEventId) }
      : {
          kind: 'uncertain',
          why: `a create that failed with ${info?.type ?? 'an unknown error'}`,
          scheduledEventId: String(failed.scheduledEventId),
        };
  }
  // An attempt that ended without an answer may have reached the API.
  const unanswered = event.activityTaskTimedOutEventAttributes ?? event.activityTaskCanceledEventAttributes;
  if (unanswered) {
    const why = event.activityTaskTimedOutEventAttributes
      ? 'a create that timed out'
      : 'a create that was cancelled';
    return { kind: 'uncertain', why, scheduledEventId: String(unanswered.scheduledEventId) };
  }
  return null;
}

/** A JSON payload's value, or null when it is not JSON (another codec): read as unknown. */
function decoded(data: Uint8Array | null | undefined): unknown {
  if (!data) return null;
  try {
    return JSON.parse(Buffer.from(data).toString('utf8')) as unknown;
  } catch {
    return null;
  }
}
