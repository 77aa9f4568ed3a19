/**
 * A gRPC forwarding proxy in front of a Temporal frontend, for tests that must see what a
 * connection sends: plain-text HTTP/2 (h2c, as the SDK speaks with TLS off), each stream forwarded
 * to the frontend as it is, headers, messages and trailers. It records each request's
 * `authorization` header only as the label `label` gives it, so no key is kept or printed.
 */
import { once } from 'node:events';
import {
  connect,
  constants,
  createServer,
  type ClientHttp2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import type { Socket } from 'node:net';

/** One request as the proxy recorded it. */
export interface RecordedRequest {
  /** The gRPC method, e.g. `/temporal.api.workflowservice.v1.WorkflowService/PollWorkflowTaskQueue`. */
  path: string;
  /** What `label` made of the request's `authorization` header. */
  authorization: string;
}

/** A running proxy. */
export interface GrpcRecordingProxy {
  /** `127.0.0.1:port`, for TEMPORAL_ADDRESS. */
  address: string;
  /** Every request received so far, in the order their headers arrived. */
  requests: RecordedRequest[];
  close(): Promise<void>;
}

/**
 * Starts a proxy to the frontend at `target` (`host:port`). `label` turns an `authorization` header
 * (undefined when absent) into what is recorded, e.g. which of the test's keys it carries.
 */
export async function startGrpcRecordingProxy(
  target: string,
  label: (authorization: string | undefined) => string,
): Promise<GrpcRecordingProxy> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<Socket>();
  let upstream: ClientHttp2Session | null = null;
  const session = (): ClientHttp2Session => {
    if (upstream === null || upstream.closed || upstream.destroyed) {
      upstream = connect(`http://${target}`);
      // A frontend gone away fails the streams on it; the next request opens a new session.
      upstream.on('error', () => undefined);
    }
    return upstream;
  };
  const server = createServer();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('stream', (down: ServerHttp2Stream, headers) => {
    const authorization = headers.authorization;
    requests.push({
      path: String(headers[':path']),
      authorization: label(Array.isArray(authorization) ? authorization.join(',') : authorization),
    });
    const up = session().request(headers);
    const reset = (stream: { destroyed: boolean; close(code: number): void }) => {
      if (!stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
    };
    up.on('error', () => reset(down));
    down.on('error', () => reset(up));
    // A caller that cancels (a worker shutting its long polls down) cancels the forwarded stream.
    down.on('close', () => reset(up));
    up.on('response', (responseHeaders) => {
      // A trailers-only answer (a gRPC error) carries grpc-status in its headers and no body.
      const trailersOnly = 'grpc-status' in responseHeaders;
      down.respond(responseHeaders, { endStream: trailersOnly, waitForTrailers: !trailersOnly });
    });
    let trailers: IncomingHttpHeaders = {};
    up.on('trailers', (received: IncomingHttpHeaders) => {
      trailers = received;
    });
    down.on('wantTrailers', () => down.sendTrailers(trailers));
    down.pipe(up);
    up.on('data', (chunk: Buffer) => down.write(chunk));
    up.on('end', () => {
      if (!down.destroyed && !down.writableEnded) down.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    requests,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      upstream?.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
