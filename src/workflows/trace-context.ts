/**
 * Workflow interceptors that carry the caller's trace (the start's `_tracer-data` header) onto every
 * activity the run schedules and its continue-as-new, where the SDK's activity interceptor reads it
 * (src/observability/tracing.ts); no span and no OpenTelemetry code in the workflow
 * (docs/decisions/0008-tracing-without-workflow-spans.md). Headers are not part of what replay
 * compares, so runs with or without a trace replay alike.
 */
import type { Payload } from '@temporalio/common';
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

/** The header the SDK's OpenTelemetry interceptors put the trace context in. */
export const TRACE_HEADER = '_tracer-data';

export const interceptors: WorkflowInterceptorsFactory = () => {
  let trace: Payload | undefined;
  const carryTrace = <T extends { readonly headers: Record<string, Payload> }>(input: T): T =>
    trace === undefined || input.headers[TRACE_HEADER] !== undefined
      ? input
      : { ...input, headers: { ...input.headers, [TRACE_HEADER]: trace } };
  return {
    inbound: [
      {
        execute: (input, next) => {
          trace = input.headers[TRACE_HEADER];
          return next(input);
        },
      },
    ],
    outbound: [
      {
        scheduleActivity: (input, next) => next(carryTrace(input)),
        continueAsNew: (input, next) => next(carryTrace(input)),
      },
    ],
  };
};
