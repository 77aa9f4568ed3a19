/**
 * One OpenTelemetry client span per HTTP call (the HTTP conventions, W3C trace context sent along),
 * through the global API: a no-op without a tracer provider (src/observability/tracing.ts). What a
 * span carries is chosen, never copied from the request: no header (the bearer key), prompt or body.
 */
import { context, propagation, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { AgentApiError, type Call } from './errors.js';
import { isSuccess } from '../failure-policy/kinds.js';

const tracer = trace.getTracer('agent-job-orchestrator/agent-api');

/** What a span may say about a call: `route` is the path template, e.g. `/v2/agent/{projectId}/job/{jobId}`. */
export type TracedCall = Pick<Call, 'operation' | 'method' | 'projectId' | 'jobId'> & {
  route: string;
  url: URL;
};

/** Runs `send` in a client span; `send` gets the trace headers and reports the status through `answered`. */
export function tracedHttpCall<T>(
  call: TracedCall,
  send: (traceHeaders: Record<string, string>, answered: (status: number) => void) => Promise<T>,
): Promise<T> {
  return tracer.startActiveSpan(
    `${call.method} ${call.route}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'http.request.method': call.method,
        'url.template': call.route,
        'server.address': call.url.hostname,
        'server.port': Number(call.url.port || (call.url.protocol === 'https:' ? 443 : 80)),
        'agent_job.operation': call.operation,
        'agent_job.project_id': call.projectId,
        ...(call.jobId === null ? {} : { 'agent_job.id': call.jobId }),
      },
    },
    async (span: Span) => {
      const traceHeaders: Record<string, string> = {};
      propagation.inject(context.active(), traceHeaders);
      try {
        return await send(traceHeaders, (status) => {
          span.setAttribute('http.response.status_code', status);
          // Anything but a 2xx failed the call (a redirect too: it is never followed).
          if (!isSuccess(status)) span.setStatus({ code: SpanStatusCode.ERROR });
        });
      } catch (err) {
        // The failure's type only: messages are for people and may quote a response body.
        const type = err instanceof AgentApiError ? err.type : err instanceof Error ? err.name : 'error';
        span.setAttribute('error.type', type);
        span.setStatus({ code: SpanStatusCode.ERROR, message: type });
        throw err;
      } finally {
        span.end();
      }
    },
  );
}
