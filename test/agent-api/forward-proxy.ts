/**
 * A real forward proxy for test/agent-api/proxy.test.ts, run in a child process: the `proxy` package
 * (CONNECT and absolute-form requests) on 127.0.0.1, on a free port. Only this process resolves
 * `PROXY_ONLY_HOST`, to 127.0.0.1, so a request that reaches a server under that name went through
 * the proxy. With `PROXY_CREDENTIALS` (`user:password`), it answers 407 to a request without them.
 *
 * Prints `listening <port>`, then one JSON line per request as it authenticates it, before it
 * answers: `{ "method", "target", "authorized" }` (`target` is the CONNECT authority or the
 * absolute URL).
 */
import { Buffer } from 'node:buffer';
import dns from 'node:dns';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxy } from 'proxy';

const proxyOnlyHost = process.env.PROXY_ONLY_HOST?.toLowerCase();
if (!proxyOnlyHost) throw new Error('PROXY_ONLY_HOST is required');
const credentials = process.env.PROXY_CREDENTIALS;

type LookupCallback = (err: NodeJS.ErrnoException | null, address: unknown, family?: number) => void;
type Lookup = (hostname: string, options: unknown, callback?: LookupCallback) => void;
const systemLookup = dns.lookup as unknown as Lookup;

/**
 * The proxy's resolver: the one name to 127.0.0.1, every other one as the system resolves it. The
 * proxy connects with `net.connect` and `http.request`, which call `dns.lookup` when they connect.
 */
const lookup: Lookup = (hostname, options, callback) => {
  const done = (typeof options === 'function' ? options : callback) as LookupCallback;
  if (hostname.toLowerCase() !== proxyOnlyHost) {
    systemLookup(hostname, options, callback);
    return;
  }
  const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
  process.nextTick(() =>
    all ? done(null, [{ address: '127.0.0.1', family: 4 }]) : done(null, '127.0.0.1', 4),
  );
};
(dns as unknown as { lookup: Lookup }).lookup = lookup;

const proxy = createProxy(createServer());
proxy.authenticate = (req: IncomingMessage) => {
  const expected = credentials ? `Basic ${Buffer.from(credentials).toString('base64')}` : undefined;
  const authorized = expected === undefined || req.headers['proxy-authorization'] === expected;
  process.stdout.write(`${JSON.stringify({ method: req.method, target: req.url, authorized })}\n`);
  return authorized;
};
proxy.listen(0, '127.0.0.1');
await once(proxy, 'listening');
process.stdout.write(`listening ${(proxy.address() as AddressInfo).port}\n`);
