/**
 * Tracing over a real run: a client's start, the workflow on a real server, its activities and the
 * HTTP calls to the simulator form one trace, exported to an in-memory exporter; the API key
 * appears in no span. Spans reach the exporter the way they reach OTLP in production: activity and
 * HTTP spans from this process's provider, workflow spans through the worker's sink.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Client } from '@temporalio/client';
import { AgentApiClient } from '../../src/agent-api/index.js';
import { startAgentJob } from '../../src/client/index.js';
import { WORKFLOW_TYPE } from '../../src/contract.js';
import { installTracing } from '../../src/observability/tracing.js';
import { onCleanup, startSimulatedWorld, uniqueId } from '../harness.js';

const exporter = new InMemorySpanExporter();
const tracing = installTracing(
  { exporter: null, endpoint: null },
  'agent-job-test',
  new SimpleSpanProcessor(exporter),
);
onCleanup(() => tracing.shutdown());

/** The span's parent ID, or null for a root. */
function parentOf(span: ReadableSpan): string | null {
  return span.parentSpanContext?.spanId ?? null;
}

/** The names from the root to `span`, e.g. `caller > StartWorkflow:agentJob > RunWorkflow:agentJob`. */
function pathOf(span: ReadableSpan, byId: Map<string, ReadableSpan>): string {
  const names: string[] = [];
  for (let at: ReadableSpan | undefined = span; at; at = byId.get(parentOf(at) ?? '')) names.unshift(at.name);
  return names.join(' > ');
}

test('one trace runs from the caller through the workflow and its activities to each HTTP call, without the key', async () => {
  const world = await startSimulatedWorld('tracing', { durationMs: 200 });
  const { env, sim, apiKey } = world;
  const worker = await world.startWorker({}, { tracing });
  const client = new Client({
    connection: env.client.connection,
    namespace: env.namespace,
    interceptors: { workflow: tracing.clientInterceptors },
  });
  const projectId = uniqueId('traced');

  const { result, workflowId } = await trace.getTracer('test').startActiveSpan('caller', async (root) => {
    try {
      const handle = await startAgentJob(
        client,
        { projectId, prompt: 'Document the tracing', poll: { initialInterval: '100ms' } },
        { taskQueue: worker.taskQueue },
      );
      return { result: await handle.result(), workflowId: handle.workflowId };
    } finally {
      root.end();
    }
  });
  assert.equal(result.status, 'completed');

  // Every activity ended before the workflow did, and the processor exports a span as it ends.
  const spans = exporter.getFinishedSpans();
  const root = spans.find((span) => span.name === 'caller');
  assert.ok(root, 'the caller span was exported');
  const traceId = root.spanContext().traceId;
  const inTrace = spans.filter((span) => span.spanContext().traceId === traceId);
  const byId = new Map(inTrace.map((span) => [span.spanContext().spanId, span]));
  const paths = inTrace.map((span) => pathOf(span, byId));

  const http = inTrace.filter((span) => span.attributes['http.request.method'] !== undefined);
  const create = http.filter((span) => span.name === 'POST /v2/agent/{projectId}/job');
  const reads = http.filter((span) => span.name === 'GET /v2/agent/{projectId}/job/{jobId}');
  assert.equal(create.length, 1, paths.join('\n'));
  assert.ok(reads.length >= 1, paths.join('\n'));
  // Every HTTP call of the run is in the trace, and each sits under the activity that made it.
  const perEndpoint = sim.stats().requestsPerEndpoint;
  assert.equal(http.length, (perEndpoint.create ?? 0) + (perEndpoint.get ?? 0), paths.join('\n'));
  // The workflow makes no span of its own (src/workflows/trace-context.ts): its activities sit
  // under the start, each with the workflow's ID.
  const workflowPath = `caller > StartWorkflow:${WORKFLOW_TYPE}`;
  assert.match(
    pathOf(create[0]!, byId),
    new RegExp(`^${workflowPath} > RunActivity:createAgentJob > POST /v2/agent/\\{projectId\\}/job$`),
  );
  for (const read of reads) {
    assert.match(pathOf(read, byId), new RegExp(`^${workflowPath} > RunActivity:pollAgentJob > GET `));
    assert.equal(read.attributes['http.response.status_code'], 200);
    assert.equal(read.attributes['agent_job.project_id'], projectId);
    assert.equal(read.attributes['agent_job.id'], result.job.id);
  }
  const activities = inTrace.filter((span) => span.name.startsWith('RunActivity:'));
  assert.ok(activities.length >= 2);
  for (const activity of activities) assert.equal(activity.attributes.temporalWorkflowId, workflowId);
  // One tree: every span of the trace reaches the caller.
  for (const path of paths) assert.ok(path.startsWith('caller'), `${path} is cut from the caller`);

  // The key appears nowhere: not in a name, an attribute, an event or a status.
  const everything = JSON.stringify(
    spans.map((span) => ({
      name: span.name,
      attributes: span.attributes,
      events: span.events,
      status: span.status,
      links: span.links,
      resource: span.resource.attributes,
    })),
  );
  assert.ok(!everything.includes(apiKey), 'the API key is in a span');
  assert.ok(!everything.includes(apiKey.slice(-12)), 'part of the API key is in a span');
});

test('each HTTP call sends the W3C trace context of its own span, and a failed call records its type', async () => {
  const seen: IncomingHttpHeaders[] = [];
  const server = createServer((req, res) => {
    seen.push(req.headers);
    if (seen.length === 1)
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"job-1","status":"active"}');
    else res.writeHead(429, { 'retry-after': '7' }).end('slow down');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  onCleanup(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const apiKey = `raw-key-${uniqueId('secret')}`;
  const api = new AgentApiClient({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apiKey,
  });
  const projectId = uniqueId('raw');

  await api.getJob(projectId, 'job-1');
  await assert.rejects(api.getJob(projectId, 'job-1'), { type: 'RateLimited' });

  const calls = exporter
    .getFinishedSpans()
    .filter((span) => span.attributes['agent_job.project_id'] === projectId);
  assert.equal(calls.length, 2);
  for (const [i, span] of calls.entries()) {
    const { traceId, spanId } = span.spanContext();
    assert.match(String(seen[i]?.traceparent), new RegExp(`^00-${traceId}-${spanId}-0[01]$`));
    assert.equal(seen[i]?.authorization, `Bearer ${apiKey}`);
  }
  assert.equal(calls[1]?.attributes['http.response.status_code'], 429);
  assert.equal(calls[1]?.attributes['error.type'], 'RateLimited');
  assert.ok(!JSON.stringify(calls.map((span) => [span.attributes, span.status])).includes(apiKey));
});
