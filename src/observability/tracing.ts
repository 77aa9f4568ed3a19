/**
 * OpenTelemetry tracing with the SDK's interceptors: one trace from a client's start of a workflow,
 * through the workflow's activities (src/workflows/trace-context.ts carries it there), to each HTTP
 * call of the Agent Job API (src/agent-api/trace.ts). Exported over OTLP when the standard OTEL_*
 * variables ask for it (src/config/tracing.ts), off otherwise. docs/tracing.md shows
 * the span tree.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import {
  detectResources,
  envDetector,
  resourceFromAttributes,
  type Resource,
} from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  type ReadableSpan,
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
  /**
   * Leave exceptions' messages and stack traces out of the spans: set when the payload codec is
   * on, as they may quote a prompt or an API answer (decision 0021). Their type stays.
   */
  withoutExceptionText?: boolean;
}

/** The tracing of one process: the interceptors to wire in, and its flush at exit. */
export interface Tracing {
  readonly enabled: boolean;
  /** The activity interceptors, which start each activity's span in the caller's trace. */
  readonly worker: { interceptors: WorkerInterceptors };
  /** For `new Client({interceptors: {workflow: ...}})`: starts carry the caller's trace. */
  readonly clientInterceptors: WorkflowClientInterceptor[];
  /** Flushes spans not yet exported; call once, before the process exits. */
  shutdown(): Promise<void>;
}

/** A process that traces nothing. */
export const TRACING_OFF: Tracing = {
  enabled: false,
  worker: { interceptors: {} },
  clientInterceptors: [],
  shutdown: async () => {},
};

/**
 * Installs tracing for this process as `settings` ask: a global tracer provider, W3C trace-context
 * propagation and an async-local context, so that spans started anywhere in the process (the API
 * client's) join the trace of the activity that runs them. `processor` replaces the exporter (tests
 * pass an in-memory one).
 */
export function installTracing(
  settings: TracingSettings,
  serviceName: string,
  processor: SpanProcessor | null = null,
): Tracing {
  const exporting = processor ?? exporterProcessor(settings);
  if (exporting === null) return TRACING_OFF;
  const spanProcessor = settings.withoutExceptionText ? new WithoutExceptionText(exporting) : exporting;
  const resource = serviceResource(serviceName);
  const provider = new BasicTracerProvider({ resource, spanProcessors: [spanProcessor] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  return {
    enabled: true,
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

/** The attributes of an exception event that hold its text (OpenTelemetry's semantic conventions). */
const EXCEPTION_TEXT = ['exception.message', 'exception.stacktrace'];

/**
 * Hands `next` each ended span without the text of its exception events and status: the activity
 * interceptors record a failed attempt's error, whose message may quote what the API answered.
 */
class WithoutExceptionText implements SpanProcessor {
  constructor(private readonly next: SpanProcessor) {}

  onStart(...args: Parameters<SpanProcessor['onStart']>): void {
    this.next.onStart(...args);
  }

  onEnd(span: ReadableSpan): void {
    const hasText = span.status.message !== undefined || span.events.some((e) => e.name === 'exception');
    if (!hasText) return this.next.onEnd(span);
    const events = span.events.map((event) =>
      event.name !== 'exception' || event.attributes === undefined
        ? event
        : {
            ...event,
            attributes: Object.fromEntries(
              Object.entries(event.attributes).filter(([key]) => !EXCEPTION_TEXT.includes(key)),
            ),
          },
    );
    // The span as it is, its events and status replaced: the exporter reads the rest through the
    // prototype. An error status keeps its code; its message is the error's.
    const status = { code: span.status.code };
    this.next.onEnd(
      Object.create(span, { events: { value: events }, status: { value: status } }) as ReadableSpan,
    );
  }

  forceFlush(): Promise<void> {
    return this.next.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.next.shutdown();
  }
}

function exporterProcessor(settings: TracingSettings): SpanProcessor | null {
  if (settings.exporter === 'otlp') return new BatchSpanProcessor(new OTLPTraceExporter());
  if (settings.exporter === 'console') return new BatchSpanProcessor(new ConsoleSpanExporter());
  return null;
}

/** `service.name` from OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES, else the process's own name. */
function serviceResource(serviceName: string): Resource {
  return resourceFromAttributes({ 'service.name': serviceName }).merge(
    detectResources({ detectors: [envDetector] }),
  );
}
