/** An OTLP/HTTP trace receiver on a loopback socket, in place of a collector, for the tests of exported spans. */
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { onCleanup } from './harness.js';

/** The parts of an OTLP/JSON span this test reads. */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
}

/** An OTLP/HTTP trace receiver: the spans it was sent, with the service that sent each. */
export async function startReceiver() {
  const spans: Array<OtlpSpan & { service: string }> = [];
  const bodies: string[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      bodies.push(body);
      if (req.url === '/v1/traces') {
        const request = JSON.parse(body) as {
          resourceSpans: Array<{
            resource: { attributes: Array<{ key: string; value: { stringValue?: string } }> };
            scopeSpans: Array<{ spans: OtlpSpan[] }>;
          }>;
        };
        for (const resourceSpans of request.resourceSpans) {
          const service =
            resourceSpans.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue ?? '?';
          for (const scope of resourceSpans.scopeSpans)
            for (const span of scope.spans) spans.push({ ...span, service });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, bodies };
}
