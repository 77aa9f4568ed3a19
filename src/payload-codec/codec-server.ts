/**
 * The codec server: Temporal's remote codec protocol over this project's payload codec, so that
 * the Temporal UI and the Temporal CLI (`--codec-endpoint`) show sealed payloads decoded to the
 * people allowed to see them, and nothing else ever needs the key ring.
 *
 * The protocol, as the UI (2.54) and the CLI speak it: `POST <endpoint>/encode` and
 * `POST <endpoint>/decode` (the UI adds `?preserveStorageRefs=true`, ignored here), the body and
 * the answer the protobuf JSON of `temporal.api.common.v1.Payloads`
 * (`{"payloads":[{"metadata":{"encoding":"<base64>"},"data":"<base64>"}]}`). The UI sends
 * `Content-Type`, `X-Namespace`, and with `codec.passAccessToken` `Authorization: Bearer <the
 * signed-in user's access token>` (and `Authorization-Extras`, its ID token), from the browser,
 * so every answer to an allowed origin carries CORS headers and a preflight is answered.
 *
 * Who may call: with an {@link AccessTokenPolicy}, the holder of a valid access token
 * (src/payload-codec/access-token.ts); without one, only this machine (the dev stack's local-only
 * allowance): the server refuses to start on an address other than loopback, and refuses a peer or
 * a `Host` that is not loopback (a DNS rebinding page would name its own host). Any request whose
 * `Origin` is not configured is refused, whatever the mode.
 *
 * Nothing of a payload, a key or a token reaches a log line or an error answer: a bad body is
 * answered with what is wrong with its shape, a payload that does not open with the codec's message
 * (the key ID, never key material).
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { isLoopbackHost } from '../agent-api/dispatcher.js';
import { ErrorName } from '../errors.js';
import {
  AccessTokenVerifier,
  type AccessTokenPolicy,
  type AccessVerdict,
  type Refused,
} from './access-token.js';

const { Payloads } = proto.temporal.api.common.v1;

/** How the codec server listens and whom it answers. */
export interface CodecServerSettings {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  /** Web origins (scheme://host[:port], exactly) whose pages may call it: the Temporal UI's. */
  allowedOrigins: readonly string[];
  /** Answer allowed origins' credentialed requests (the UI's `codec.includeCredentials`). */
  allowCredentials: boolean;
  /** The access tokens accepted; null: the local-only allowance (loopback address and peers only). */
  accessToken: AccessTokenPolicy | null;
}

/** Where the codec server writes its lines: one per request, never a payload, key or token. */
export interface CodecServerLogger {
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
}

/** A running codec server. */
export interface CodecServer {
  /** The bound port (useful when 0 was asked for). */
  port: number;
  /** `http://<host>:<port>`: the codec endpoint to give the UI and the CLI. */
  url: string;
  close(): Promise<void>;
}

/** Largest body read: a history event's payloads are each at most 2 MB (Temporal's default limit). */
export const MAX_BODY_BYTES = 16 * 2 ** 20;

/** The request headers the Temporal UI sends, which a preflight must allow. */
const ALLOWED_HEADERS = 'Authorization, Authorization-Extras, Content-Type, X-Namespace';

/** How long a browser may keep a preflight's answer. */
const PREFLIGHT_MAX_AGE_S = 600;

/** The answer to each kind of refused authorization. */
const REFUSED: Record<Refused, { status: number; headers: Record<string, string> }> = {
  unauthenticated: { status: 401, headers: { 'www-authenticate': 'Bearer error="invalid_token"' } },
  forbidden: { status: 403, headers: {} },
  unavailable: { status: 503, headers: {} },
};

/** A request refused before the codec ran, with the status and the message the caller sees. */
class Refusal {
  constructor(
    readonly status: number,
    readonly message: string,
    readonly headers: Record<string, string> = {},
  ) {}
}

/**
 * Starts the codec server over `codec`.
 * @throws {Error} when asked to run without access tokens on an address other than loopback, or
 *   when the address cannot be bound
 */
export async function startCodecServer(
  codec: PayloadCodec,
  settings: CodecServerSettings,
  logger: CodecServerLogger,
): Promise<CodecServer> {
  if (settings.accessToken === null && !isLoopbackHost(urlHost(settings.host)))
    throw new Error(
      `the codec server runs without access tokens only on a loopback address, not ${settings.host}: configure an OIDC issuer and audience`,
    );
  const verifier = settings.accessToken && new AccessTokenVerifier(settings.accessToken);
  const authorize = (req: IncomingMessage): Promise<AccessVerdict> =>
    verifier ? verifier.verify(req.headers.authorization) : Promise.resolve(localOnly(req));
  const server: Server = createServer((req, res) => {
    const started = performance.now();
    handle(req, res, codec, settings, authorize).then(
      (outcome) => {
        const meta = {
          method: req.method,
          path: pathOf(req),
          status: res.statusCode,
          namespace: namespaceOf(req),
          ms: Math.round(performance.now() - started),
          ...outcome,
        };
        if (outcome.reason !== undefined) logger.warn('codec request refused', meta);
        else if (req.method === 'POST') logger.info('codec request', meta);
      },
      (err: unknown) => {
        // Only the name: a message from below might quote what it was handed.
        logger.warn('codec request failed', { path: pathOf(req), error: (err as Error).name });
        if (!res.headersSent) send(res, 500, { message: 'internal error' });
        else res.destroy();
      },
    );
  });
  server.keepAliveTimeout = 5_000;
  server.listen(settings.port, settings.host);
  try {
    await once(server, 'listening');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new Error(`cannot serve the codec on ${settings.host}:${settings.port}: ${code}`, { cause: err });
  }
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : settings.port;
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  return {
    port,
    url: `http://${host}:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

/** What a request's log line adds: who called, how many payloads, why it was refused. */
type Outcome = { subject?: string | null; payloads?: number; reason?: string };

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  codec: PayloadCodec,
  settings: CodecServerSettings,
  authorize: (req: IncomingMessage) => Promise<AccessVerdict>,
): Promise<Outcome> {
  const path = pathOf(req);
  if (req.method === 'GET' && path === '/healthz') {
    send(res, 200, { ok: true });
    return {};
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !settings.allowedOrigins.includes(origin))
    return refuse(res, new Refusal(403, `origin ${origin} is not allowed (CODEC_SERVER_ALLOWED_ORIGINS)`));
  if (origin !== undefined) {
    res.setHeader('access-control-allow-origin', origin);
    if (settings.allowCredentials) res.setHeader('access-control-allow-credentials', 'true');
  }
  res.setHeader('vary', 'Origin');
  if (path !== '/encode' && path !== '/decode')
    return refuse(res, new Refusal(404, 'the codec server answers POST /encode and POST /decode'));
  if (req.method === 'OPTIONS') {
    // A preflight carries no credentials: it is answered for an allowed origin, unauthenticated.
    res.writeHead(204, {
      'access-control-allow-methods': 'POST, OPTIONS',
      'access-control-allow-headers': ALLOWED_HEADERS,
      'access-control-max-age': String(PREFLIGHT_MAX_AGE_S),
    });
    res.end();
    return {};
  }
  if (req.method !== 'POST')
    return refuse(res, new Refusal(405, `${path} takes POST`, { allow: 'POST, OPTIONS' }));
  const verdict = await authorize(req);
  if (!verdict.ok) {
    const { status, headers } = REFUSED[verdict.refusal];
    req.resume();
    return refuse(res, new Refusal(status, `not authorized: ${verdict.reason}`, headers), verdict.reason);
  }
  const outcome = { subject: verdict.subject };
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (type !== 'application/json') {
    req.resume();
    return { ...outcome, ...refuse(res, new Refusal(415, 'the body must be application/json')) };
  }
  const body = await readBody(req);
  if (body instanceof Refusal) return { ...outcome, ...refuse(res, body) };
  const payloads = parsePayloads(body);
  if (payloads instanceof Refusal) return { ...outcome, ...refuse(res, payloads) };
  let result: Payload[];
  try {
    result = path === '/encode' ? await codec.encode(payloads) : await codec.decode(payloads);
  } catch (err) {
    const name = (err as Error).name;
    if (name !== ErrorName.SealedPayload && name !== ErrorName.UnknownPayloadKey) throw err;
    // The codec's own messages name the key ID and what failed, never a key or a payload byte.
    return { ...outcome, ...refuse(res, new Refusal(422, (err as Error).message)) };
  }
  send(res, 200, Payloads.create({ payloads: result }).toJSON());
  return { ...outcome, payloads: payloads.length };
}

function refuse(res: ServerResponse, refusal: Refusal, reason?: string): Outcome {
  send(res, refusal.status, { message: refusal.message }, refusal.headers);
  return { reason: reason ?? refusal.message };
}

function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(JSON.stringify(body));
}

/** The local-only allowance: a loopback peer, naming a loopback host. */
function localOnly(req: IncomingMessage): AccessVerdict {
  const peer = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
  if (!isLoopbackHost(urlHost(peer)))
    return { ok: false, refusal: 'forbidden', reason: 'without access tokens only this machine may call' };
  const host = /^(\[[^\]]*\]|[^:]*)/.exec(req.headers.host ?? '')?.[1] ?? '';
  if (!isLoopbackHost(host))
    return { ok: false, refusal: 'forbidden', reason: 'without access tokens the Host must be loopback' };
  return { ok: true, subject: null };
}

/** A host as a URL spells it (`[::1]`), which is what isLoopbackHost reads. */
function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

function pathOf(req: IncomingMessage): string {
  return (req.url ?? '/').split('?')[0] ?? '/';
}

/** The namespace the UI names, for the log line, bounded. */
function namespaceOf(req: IncomingMessage): string | undefined {
  const value = req.headers['x-namespace'];
  return typeof value === 'string' ? value.slice(0, 255) : undefined;
}

async function readBody(req: IncomingMessage): Promise<Buffer | Refusal> {
  const tooLarge = new Refusal(413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) {
    req.resume();
    return tooLarge;
  }
  // Past the limit the rest is read and dropped, not kept, so the answer follows a whole request.
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  return size > MAX_BODY_BYTES ? tooLarge : Buffer.concat(chunks);
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** Why a body is not `Payloads` JSON, naming the place and never the value. */
function parsePayloads(body: Buffer): Payload[] | Refusal {
  const bad = (why: string) =>
    new Refusal(400, `the body is not temporal.api.common.v1.Payloads as JSON: ${why}`);
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return bad('it does not parse as JSON');
  }
  if (!isObject(json)) return bad('it is not an object');
  const list = json.payloads ?? [];
  if (!Array.isArray(list)) return bad('payloads is not an array');
  for (const [i, payload] of list.entries()) {
    if (!isObject(payload)) return bad(`payloads[${i}] is not an object`);
    const metadata = payload.metadata ?? {};
    if (!isObject(metadata)) return bad(`payloads[${i}].metadata is not an object`);
    for (const [key, value] of Object.entries(metadata))
      if (typeof value !== 'string' || !BASE64.test(value))
        return bad(`payloads[${i}].metadata[${JSON.stringify(key.slice(0, 64))}] is not base64`);
    const data = payload.data ?? '';
    if (typeof data !== 'string' || !BASE64.test(data)) return bad(`payloads[${i}].data is not base64`);
  }
  // Protobuf JSON takes base64 in either alphabet; protobufjs reads the standard one.
  const standard = JSON.parse(body.toString('utf8'), (_key, value: unknown) =>
    typeof value === 'string' ? value.replace(/-/g, '+').replace(/_/g, '/') : value,
  ) as Record<string, unknown>;
  try {
    return Payloads.fromObject(standard).payloads;
  } catch {
    return bad('a base64 value does not decode');
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
