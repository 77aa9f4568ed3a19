/**
 * Tracing from the standard OTEL_* variables, for the worker and the starter: on when an OTLP
 * endpoint is set (or OTEL_TRACES_EXPORTER=console), off when none is, or OTEL_SDK_DISABLED=true,
 * or OTEL_TRACES_EXPORTER=none. The exporter reads the rest (headers, timeout, batching) itself.
 */
import * as z from 'zod/mini';
import type { TracingSettings } from '../observability/tracing.js';
import { ConfigError, httpUrl, oneOf, readSettings, type Env } from './settings.js';

const TracingEnv = z.object({
  OTEL_TRACES_EXPORTER: z._default(oneOf('otlp', 'console', 'none'), 'otlp'),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.optional(httpUrl),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.optional(httpUrl),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z.optional(z.string()),
  OTEL_EXPORTER_OTLP_PROTOCOL: z.optional(z.string()),
});

const OFF: TracingSettings = { exporter: null, endpoint: null };

/** Loads the tracing settings; a protocol other than OTLP/HTTP with JSON is refused only when tracing is on. */
export function loadTracingSettings(env: Env = process.env): TracingSettings {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return OFF;
  const settings = readSettings(TracingEnv, env);
  if (settings.OTEL_TRACES_EXPORTER === 'none') return OFF;
  if (settings.OTEL_TRACES_EXPORTER === 'console') return { exporter: 'console', endpoint: null };
  const tracesOnly = settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
  const endpoint = settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? settings.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (endpoint === undefined) return OFF;
  const protocolName =
    settings.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL === undefined
      ? 'OTEL_EXPORTER_OTLP_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL';
  if ((settings[protocolName] ?? 'http/json') !== 'http/json') {
    const endpointName = tracesOnly ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
    throw new ConfigError(
      protocolName,
      `the worker exports OTLP over HTTP with JSON bodies ("http/json"); point ${endpointName} at the collector's OTLP/HTTP port (4318 by default)`,
    );
  }
  // Only the origin is ever logged: a collector URL may carry credentials.
  return { exporter: 'otlp', endpoint: new URL(endpoint).origin };
}
