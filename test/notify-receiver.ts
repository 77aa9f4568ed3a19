/**
 * A notification receiver for tests: a real HTTP server on a loopback port (node:http, real
 * sockets) that keeps every request it is sent, verifies webhook signatures the way
 * docs/notifications.md tells a receiver to, and answers each path as the test says (a few 503s
 * before a 200, say).
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { NOTIFY_HEADERS, verifyNotice } from '../src/notify/signature.js';
import type { JobEndNotice } from '../src/notify/notice.js';
import { onCleanup } from './harness.js';

/** One request the receiver was sent. */
export interface ReceivedNotice {
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  /** What the receiver answered. */
  answered: number;
}

/** A running receiver. */
export interface NotifyReceiver {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Every request so far, in order. */
  received: ReceivedNotice[];
  /** The requests to `path`. */
  to(path: string): ReceivedNotice[];
  /** Answers to the next requests to `path`, in order; 200 once they are used up. */
  answer(path: string, statuses: number[]): void;
}

/** Starts a receiver on a free loopback port, closed after the file's tests. */
export async function startNotifyReceiver(): Promise<NotifyReceiver> {
  const received: ReceivedNotice[] = [];
  const planned = new Map<string, number[]>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '/';
      const answered = planned.get(path)?.shift() ?? 200;
      received.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answered });
      res.writeHead(answered, { 'content-type': 'text/plain' }).end(answered === 200 ? 'ok' : 'not now');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  onCleanup(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    to: (path) => received.filter((r) => r.path === path),
    answer: (path, statuses) => planned.set(path, [...statuses]),
  };
}

/** A request's notice, after its signature was checked under `secret` (fails the test when it does not hold). */
export function verifiedNotice(request: ReceivedNotice, secret: string): JobEndNotice {
  const header = (name: string) => {
    const value = request.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const problem = verifyNotice({
    secret,
    body: request.body,
    signature: header(NOTIFY_HEADERS.signature),
    timestamp: header(NOTIFY_HEADERS.timestamp),
    nowSeconds: Math.floor(Date.now() / 1000),
  });
  if (problem !== null) throw new Error(`the receiver refuses the notice: ${problem}`);
  const notice = JSON.parse(request.body) as JobEndNotice;
  if (header(NOTIFY_HEADERS.deliveryId) !== notice.deliveryId) {
    throw new Error('the delivery ID header is not the notice delivery ID');
  }
  return notice;
}
