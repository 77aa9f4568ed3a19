/**
 * OpenTelemetry tracing with the SDK's interceptors: one trace from a client's start of a workflow,
 * through the workflow's activities (src/workflows/trace-context.ts carries it there), to each HTTP
 * call of the Agent Job API (src/agent-api/trace.ts). Exported over OTLP when the standard OTEL_*
 * variables ask for it (src/config.ts `loadTracingSettings`), off otherwise. docs/tracing.md shows
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
  const spanProcessor = processor ?? exporterProcessor(settings);
  if (spanProcessor === null) return TRACING_OFF;
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
