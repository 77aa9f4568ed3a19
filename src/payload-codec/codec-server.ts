/**
 * The codec server: Temporal's remote codec protocol (`POST <endpoint>/encode` and `/decode`, the
 * body and the answer the protobuf JSON of `temporal.api.common.v1.Payloads`) over this project's
 * payload codec, so that the Temporal UI and the CLI (`--codec-endpoint`) show sealed payloads
 * decoded to the people allowed to see them. Who may call, CORS, the limits and the memory they
 * bound: docs/payload-codec.md and docs/decisions/0018-codec-server.md.
 *
 * Nothing of a payload, a key or a token reaches a log line or an error answer, and no text the
 * caller chose is echoed: a bad body is answered with what is wrong with its shape.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger, Payload, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { isLoopbackHost } from '../agent-api/dispatcher.js';
import { KEY_ID_METADATA_KEY, keyIdOf, UNOPENED_ERROR_NAMES } from './codec.js';
import {
  AccessTokenVerifier,
  type AccessTokenPolicy,
  type AccessVerdict,
  type Refused,
} from './access-token.js';

const { Payloads } = proto.temporal.api.common.v1;

/** How the codec server listens and whom it answers: the CODEC_SERVER_* settings (docs/payload-codec.md). */
export interface CodecServerSettings {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  allowedOrigins: readonly string[];
  allowCredentials: boolean;
  /** The access tokens accepted; null: the local-only allowance (loopback, with `localToken`). */
  accessToken: AccessTokenPolicy | null;
  /** The local-only allowance's token, the first segment of every path (null with access tokens). */
  localToken: string | null;
}

/** A running codec server: its bound port, `url` the codec endpoint to give the UI and the CLI, and close. */
export type CodecServer = Awaited<ReturnType<typeof startCodecServer>>;

/**
 * Largest body read, and so the work of a request: every byte it decodes or seals is in it (the UI
 * and the CLI send one history field's payloads a request, at most 2.7 MB as base64). Why not 4
 * MiB: docs/payload-codec.md.
 */
export const MAX_BODY_BYTES = 3 * 2 ** 20;

/** Most payloads in a request: each costs a fixed overhead however small, so the body bounds too little. */
const MAX_PAYLOADS = 1_000;

/**
 * Most JSON values in a body, counted before it is parsed (each needs a `,`, `{` or `[`): 3 MiB of
 * `{},` would otherwise parse into a million objects. 16 a payload: a converter writes two or
 * three metadata entries.
 */
const MAX_VALUES = 16 * MAX_PAYLOADS;

/** Requests read and coded at once: the memory the body limit allows each is held this many times. */
export const MAX_IN_FLIGHT = 2;

/** Requests waiting for a turn, their bodies unread (in the socket's buffer, not this process's). */
export const MAX_WAITING = 32;

/** The seconds a caller refused for being one too many, or for an issuer out of reach, waits. */
const RETRY_AFTER_S = '5';

/** The answer to each kind of refused authorization. */
const REFUSED: Record<Refused, { status: number; headers: Record<string, string> }> = {
  unauthenticated: { status: 401, headers: { 'www-authenticate': 'Bearer error="invalid_token"' } },
  forbidden: { status: 403, headers: {} },
  unavailable: { status: 503, headers: { 'retry-after': RETRY_AFTER_S } },
};

/** A request refused, with the status and the message the caller sees. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/**
 * Starts the codec server over `codec`, `logger` getting a line per request (never a payload, key or token).
 * @throws {Error} when asked to run without access tokens on an address other than loopback, or
 *   when the address cannot be bound
 */
export async function startCodecServer(
  codec: PayloadCodec,
  settings: CodecServerSettings,
  logger: Pick<Logger, 'info' | 'warn'>,
) {
  const { accessToken, localToken } = settings;
  if (accessToken === null && (localToken === null || !isLoopbackHost(urlHost(settings.host))))
    throw new Error(
      `the codec server runs without access tokens only on a loopback address and with a local token, not ${settings.host}: configure an OIDC issuer and audience`,
    );
  const verifier = accessToken && new AccessTokenVerifier(accessToken);
  const authorize = (req: IncomingMessage, token: string): Promise<AccessVerdict> =>
    verifier
      ? verifier.verify(req.headers.authorization)
      : Promise.resolve(localOnly(req, token, localToken));
  const turns = new Turns();
  const server: Server = createServer((req, res) => {
    const started = performance.now();
    const route = routeOf(req, localToken !== null);
    handle(req, res, route, codec, settings, authorize, turns).then(
      (outcome) => {
        const meta = {
          method: req.method,
          path: route.path,
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
        logger.warn('codec request failed', { path: route.path, error: (err as Error).name });
        if (!res.headersSent) send(res, 500, { message: 'internal error' });
        else res.destroy();
      },
    );
  });
  const { port, close } = await listen(server, settings, 'the codec on');
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  return { port, url: `http://${host}:${port}`, close };
}

/**
 * Binds `server` (this one's and the worker's health server) to `host:port`, or throws `cannot serve
 * <what> host:port: <code>`, `inUse` added for EADDRINUSE. Gives the bound port (0 asks for a
 * free one) and a close that ends open connections too.
 */
export async function listen(
  server: Server,
  { host, port }: { host: string; port: number },
  what: string,
  inUse = '',
) {
  server.keepAliveTimeout = 5_000;
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    const hint = code === 'EADDRINUSE' ? inUse : '';
    throw new Error(`cannot serve ${what} ${host}:${port}: ${code}${hint}`, { cause: err });
  }
  const bound = server.address();
  return {
    port: typeof bound === 'object' && bound ? bound.port : port,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}

/** What a request's log line adds: who called, how many payloads, why it was refused. */
type Outcome = { subject?: string | null; payloads?: number; reason?: string; detail?: string };

/** A request's path without the local token, and the token it named (`/<token>/decode`). */
type Route = { path: string; token: string };

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  { path, token }: Route,
  codec: PayloadCodec,
  settings: CodecServerSettings,
  authorize: (req: IncomingMessage, token: string) => Promise<AccessVerdict>,
  turns: Turns,
): Promise<Outcome> {
  let subject: string | null | undefined;
  let detail: string | undefined;
  try {
    if (req.method === 'GET' && path === '/healthz') {
      send(res, 200, { ok: true });
      return {};
    }
    const origin = req.headers.origin;
    if (origin !== undefined) {
      if (!settings.allowedOrigins.includes(origin))
        throw new Refusal(403, 'this origin is not allowed (CODEC_SERVER_ALLOWED_ORIGINS)');
      res.setHeader('access-control-allow-origin', origin);
      if (settings.allowCredentials) res.setHeader('access-control-allow-credentials', 'true');
    }
    res.setHeader('vary', 'Origin');
    if (path !== '/encode' && path !== '/decode')
      throw new Refusal(404, 'the codec server answers POST /encode and POST /decode');
    if (req.method === 'OPTIONS') {
      // A preflight carries no credentials: it is answered for an allowed origin, unauthenticated.
      res.writeHead(204, {
        'access-control-allow-methods': 'POST, OPTIONS',
        'access-control-allow-headers': 'Authorization, Authorization-Extras, Content-Type, X-Namespace',
        'access-control-max-age': '600',
      });
      res.end();
      return {};
    }
    if (req.method !== 'POST') throw new Refusal(405, `${path} takes POST`, { allow: 'POST, OPTIONS' });
    const verdict = await authorize(req, token);
    if (!verdict.ok) {
      detail = verdict.detail;
      const { status, headers } = REFUSED[verdict.refusal];
      throw new Refusal(status, `not authorized: ${verdict.reason}`, headers);
    }
    subject = verdict.subject;
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
    if (type !== 'application/json') throw new Refusal(415, 'the body must be application/json');
    const turn = turns.take();
    if (turn === null)
      throw new Refusal(503, 'the codec server is busy: try again', { 'retry-after': RETRY_AFTER_S });
    await turn;
    // Given back once the answer is sent (or the caller gone): an answer not yet read holds memory. A
    // caller that stops sending or reading for 30 s is cut off, so that it cannot keep its turn.
    if (req.socket.destroyed) turns.give();
    else res.once('close', () => turns.give());
    req.socket.setTimeout(30_000);
    const payloads = parsePayloads(await readBody(req));
    const coded = path === '/encode' ? codec.encode(payloads) : codec.decode(payloads);
    send(res, 200, Payloads.create({ payloads: await coded.catch(unopened) }).toJSON());
    return { subject, payloads: payloads.length };
  } catch (err) {
    if (!(err instanceof Refusal)) throw err;
    // What is left of the body is dropped, so that the answer follows it.
    res.req.resume();
    send(res, err.status, { message: err.message }, err.headers);
    return { subject, reason: err.message, detail };
  }
}

/**
 * A payload that does not open is refused 422 with the codec's message, which names the key ID
 * (checked by parsePayloads) and what failed, never a key or a payload byte.
 */
function unopened(err: unknown): never {
  if (UNOPENED_ERROR_NAMES.has((err as Error).name)) throw new Refusal(422, (err as Error).message);
  throw err;
}

/** Admits {@link MAX_IN_FLIGHT} requests at once, and queues {@link MAX_WAITING} more. */
class Turns {
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  /** A turn now or later; null when too many wait already. */
  take(): Promise<void> | null {
    if (this.#running < MAX_IN_FLIGHT) {
      this.#running++;
      return Promise.resolve();
    }
    if (this.#waiting.length >= MAX_WAITING) return null;
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** Ends a turn: the next waiting request takes it. */
  give(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#running--;
  }
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

/** The local-only allowance: a loopback peer, naming a loopback host, and the local token. */
function localOnly(req: IncomingMessage, token: string, localToken: string | null): AccessVerdict {
  const forbidden = (reason: string): AccessVerdict => ({ ok: false, refusal: 'forbidden', reason });
  const peer = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
  if (!isLoopbackHost(urlHost(peer))) return forbidden('without access tokens only this machine may call');
  const host = /^(\[[^\]]*\]|[^:]*)/.exec(req.headers.host ?? '')?.[1] ?? '';
  if (!isLoopbackHost(host)) return forbidden('without access tokens the Host must be loopback');
  // Digests, so that the comparison takes as long whatever the caller sent.
  const digest = (text: string) => createHash('sha256').update(text).digest();
  if (!timingSafeEqual(digest(token), digest(localToken ?? '')))
    return forbidden(
      'without access tokens the endpoint must end with the local token (http://127.0.0.1:8888/<CODEC_SERVER_LOCAL_TOKEN>)',
    );
  return { ok: true, subject: null };
}

/** A host as a URL spells it (`[::1]`), which is what isLoopbackHost reads. */
export function urlHost(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

function routeOf(req: IncomingMessage, local: boolean): Route {
  const path = (req.url ?? '/').split('?')[0] ?? '/';
  const match = local ? /^\/([^/]+)(\/.*)$/.exec(path) : null;
  return match ? { token: match[1] as string, path: match[2] as string } : { token: '', path };
}

/** The namespace the UI names, for the log line, bounded. */
function namespaceOf(req: IncomingMessage): string | undefined {
  const value = req.headers['x-namespace'];
  return typeof value === 'string' ? value.slice(0, 255) : undefined;
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const tooLarge = new Refusal(413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) throw tooLarge;
  // Past the limit the rest is read and dropped, not kept, so the answer follows a whole request.
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  if (size > MAX_BODY_BYTES) throw tooLarge;
  return Buffer.concat(chunks);
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/**
 * The payloads of a body. @throws {Refusal} naming what is wrong with its shape, never a value (400);
 * too many payloads or JSON values (413); a key ID that is not one (422), before the codec reads it
 */
function parsePayloads(body: Buffer): Payload[] {
  const bad = (why: string) =>
    new Refusal(400, `the body is not temporal.api.common.v1.Payloads as JSON: ${why}`);
  let values = 0;
  for (const byte of body) if (byte === 0x2c || byte === 0x7b || byte === 0x5b) values++;
  if (values > MAX_VALUES)
    throw new Refusal(
      413,
      `the body holds more than ${MAX_VALUES} JSON values: a request takes at most ${MAX_PAYLOADS} payloads of a few metadata entries each`,
    );
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    throw bad('it does not parse as JSON');
  }
  if (!isObject(json)) throw bad('it is not an object');
  const list = json.payloads ?? [];
  if (!Array.isArray(list)) throw bad('payloads is not an array');
  if (list.length > MAX_PAYLOADS)
    throw new Refusal(
      413,
      `the body holds more than ${MAX_PAYLOADS} payloads: send them in several requests`,
    );
  // Protobuf JSON takes base64 in either alphabet, as Buffer does; protobufjs reads bytes as given.
  const bytes = (value: unknown) =>
    typeof value === 'string' && BASE64.test(value) ? Buffer.from(value, 'base64') : null;
  for (const [i, payload] of list.entries()) {
    if (!isObject(payload)) throw bad(`payloads[${i}] is not an object`);
    const metadata = payload.metadata ?? {};
    if (!isObject(metadata)) throw bad(`payloads[${i}].metadata is not an object`);
    for (const [key, value] of Object.entries(metadata)) {
      const decoded = bytes(value);
      if (decoded === null) throw bad(`payloads[${i}].metadata has a value that is not base64`);
      metadata[key] = decoded;
    }
    if (metadata[KEY_ID_METADATA_KEY] !== undefined && keyIdOf(metadata as Payload['metadata']) === null)
      throw new Refusal(422, `payloads[${i}] names a key ID that is not 1 to 64 of A-Z a-z 0-9 . _ -`);
    const data = bytes(payload.data ?? '');
    if (data === null) throw bad(`payloads[${i}].data is not base64`);
    payload.data = data;
  }
  return Payloads.fromObject(json).payloads;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
