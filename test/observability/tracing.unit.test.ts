/**
 * Spans without exception text (the payload codec on, decision 0021), without a server: a span
 * that recorded an error reaches the exporter with the exception's type and the error status's code,
 * never the message or the stack trace.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { installTracing } from '../../src/observability/tracing.js';

for (const withoutExceptionText of [true, false]) {
  test(`an exported span ${withoutExceptionText ? 'without' : 'with'} exception text`, async () => {
    const exporter = new InMemorySpanExporter();
    const tracing = installTracing(
      { exporter: null, endpoint: null, withoutExceptionText },
      'unit',
      new SimpleSpanProcessor(exporter),
    );
    const span = trace.getTracer('unit').startSpan('attempt');
    span.recordException(new TypeError('the API said: private-prompt'));
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'the API said: private-prompt' });
    span.end();
    const [exported] = exporter.getFinishedSpans();
    await tracing.shutdown();
    assert.ok(exported);
    const event = exported.events.find((e) => e.name === 'exception');
    assert.equal(event?.attributes?.['exception.type'], 'TypeError');
    assert.equal(exported.status.code, SpanStatusCode.ERROR);
    const text = JSON.stringify({ events: exported.events, status: exported.status });
    assert.equal(text.includes('private-prompt'), !withoutExceptionText);
    assert.equal('exception.stacktrace' in (event?.attributes ?? {}), !withoutExceptionText);
  });
}
