/**
 * OpenTelemetry tracing with the SDK's interceptors (docs/tracing.md): one trace from a client's
 * start of a workflow, through its activities (src/workflows/trace-context.ts), to each HTTP call of
 * the Agent Job API (src/agent-api/trace.ts).
 */
import { context, propagation, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import {
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry-v2';
import type { WorkerInterceptors } from '@temporalio/worker';

/** What the OTEL_* variables ask for; `exporter` null means tracing is off. */
export interface TracingSettings {
  exporter: 'otlp' | 'console' | null;
  /** Where OTLP spans go, for the start log line only (the exporter reads the variables itself). */
  endpoint: string | null;
  /** Leave exceptions' messages and stack traces out of the spans (the payload codec is on: decision 0021). */
  withoutExceptionText?: boolean;
}

/** The tracing of one process: the interceptors to wire in, and its flush at exit. */
export interface Tracing {
  /** The activity interceptors, which start each activity's span in the caller's trace. */
  readonly worker: { interceptors: WorkerInterceptors };
  /** For `new Client({interceptors: {workflow: ...}})`: starts carry the caller's trace. */
  readonly clientInterceptors: WorkflowClientInterceptor[];
  /** Flushes spans not yet exported; call once, before the process exits. */
  shutdown(): Promise<void>;
}

/** A process that traces nothing. */
export const TRACING_OFF: Tracing = {
  worker: { interceptors: {} },
  clientInterceptors: [],
  shutdown: async () => {},
};

/**
 * Installs tracing as `settings` ask: a global tracer provider, W3C propagation and an async-local
 * context, so that spans started anywhere in the process (the API client's) join the trace of the
 * activity that runs them. `processor` replaces the exporter (tests).
 */
export function installTracing(
  settings: TracingSettings,
  serviceName: string,
  processor: SpanProcessor | null = null,
): Tracing {
  const { exporter } = settings;
  const exporting =
    processor ??
    (exporter &&
      new BatchSpanProcessor(exporter === 'otlp' ? new OTLPTraceExporter() : new ConsoleSpanExporter()));
  if (exporting === null) return TRACING_OFF;
  // `service.name` from OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES, else the process's own name.
  const resource = resourceFromAttributes({ 'service.name': serviceName }).merge(
    detectResources({ detectors: [envDetector] }),
  );
  const spanProcessors = settings.withoutExceptionText ? [WITHOUT_EXCEPTION_TEXT, exporting] : [exporting];
  const provider = new BasicTracerProvider({ resource, spanProcessors });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  return {
    worker: {
      interceptors: {
        activity: [
          (ctx) => ({
            inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
            outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
          }),
        ],
      },
    },
    clientInterceptors: [new OpenTelemetryWorkflowClientInterceptor()],
    shutdown: async () => {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/**
 * Takes the text out of each span's exception events and error status in `onEnding` (while the span
 * can still change), before the exporter sees it: a failed attempt's error may quote the API's answer.
 */
const WITHOUT_EXCEPTION_TEXT: SpanProcessor = {
  onStart: () => undefined,
  onEnding: (span) => {
    if (span.status.code === SpanStatusCode.ERROR) span.setStatus({ code: SpanStatusCode.ERROR });
    for (const event of span.events.filter((e) => e.name === 'exception')) {
      delete event.attributes?.['exception.message'];
      delete event.attributes?.['exception.stacktrace'];
    }
  },
  onEnd: () => undefined,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};
