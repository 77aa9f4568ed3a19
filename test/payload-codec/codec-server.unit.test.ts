/**
 * The codec server over real HTTP on loopback: Temporal's /encode and /decode protocol with the
 * payload codec on a key file, CORS as the Temporal UI needs it, the local-only allowance, and OIDC
 * access tokens verified against a JWKS served by a local identity provider over HTTP, with tokens
 * signed here (valid, wrong audience, expired, wrong key, missing claim). No Temporal server.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { defaultPayloadConverter, type Payload, type PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { createDispatcher } from '../../src/agent-api/dispatcher.js';
import { loadCodecServerConfig } from '../../src/config/codec-server.js';
import { ConfigError } from '../../src/config/settings.js';
import { MAX_IN_FLIGHT, MAX_WAITING } from '../../src/payload-codec/codec-server.js';
import {
  AccessTokenVerifier,
  AesGcmPayloadCodec,
  FileKeyRing,
  KEY_ID_METADATA_KEY,
  MAX_BODY_BYTES,
  startCodecServer,
  staticKeyRing,
  type CodecServer,
  type CodecServerSettings,
} from '../../src/payload-codec/index.js';
import { holdsText } from '../json-strings.js';
import { SecretVolume } from '../secret-volume.js';

const root = mkdtempSync(join(tmpdir(), 'codec-server-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

const MARKER = 'marker-5c1e-codec-server';
const UI_ORIGIN = 'http://localhost:8233';
const { Payloads } = proto.temporal.api.common.v1;

const newKey = () => randomBytes(32).toString('base64');
const ringText = (...keys: [string, string][]) => `${keys.map(([id, key]) => `${id} ${key}`).join('\n')}\n`;

/** Every line the servers log, to check that no payload, key or token reaches one. */
const logLines: string[] = [];
const logger = {
  info: (message: string, meta?: Record<string, unknown>) => logLines.push(JSON.stringify({ message, meta })),
  warn: (message: string, meta?: Record<string, unknown>) => logLines.push(JSON.stringify({ message, meta })),
};

const holdsMarker = (value: unknown) => holdsText(value, MARKER);

const prompt = (): Payload => defaultPayloadConverter.toPayload({ prompt: `Fix the docs. ${MARKER}` });
const toJson = (payloads: Payload[]) => JSON.stringify(Payloads.create({ payloads }).toJSON());
const fromJson = (body: unknown) => Payloads.fromObject(body as Record<string, unknown>).payloads;

const LOCAL_TOKEN = 'local-token-5c1e0123456789';
const LOCAL: CodecServerSettings = {
  host: '127.0.0.1',
  port: 0,
  allowedOrigins: [UI_ORIGIN],
  allowCredentials: true,
  accessToken: null,
  localToken: LOCAL_TOKEN,
};
const OIDC = { ...LOCAL, localToken: null };

/** The local server's endpoint as the UI and the CLI are given it: with the local token. */
const withToken = (server: CodecServer): CodecServer => ({ ...server, url: `${server.url}/${LOCAL_TOKEN}` });

async function post(
  server: CodecServer,
  path: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-namespace': 'default', ...headers },
    body,
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Record<string, unknown> };
}

describe('the local-only codec server', () => {
  const keys = [newKey(), newKey()] as const;
  const volume = new SecretVolume(root, ringText(['k1', keys[0]]));
  const clock = { ms: 0 };
  const codec = new AesGcmPayloadCodec(
    new FileKeyRing(volume.path, { checkIntervalMs: 1_000, now: () => clock.ms }),
  );
  let server: CodecServer;
  before(async () => {
    server = withToken(await startCodecServer(codec, LOCAL, logger));
  });
  after(() => server.close());

  test('/encode seals what /decode opens, both as Payloads JSON; a worker codec with the ring opens it too', async () => {
    const encoded = await post(server, '/encode', toJson([prompt()]));
    assert.equal(encoded.status, 200);
    const sealed = fromJson(encoded.json);
    assert.equal(sealed.length, 1);
    assert.equal(Buffer.from(sealed[0]!.metadata![KEY_ID_METADATA_KEY]!).toString(), 'k1');
    assert.ok(!holdsMarker(encoded.json), 'the answer holds the marker in no value, as text or as bytes');
    // The UI adds this query; it changes nothing here.
    const decoded = await post(server, '/decode?preserveStorageRefs=true', JSON.stringify(encoded.json));
    assert.equal(decoded.status, 200);
    assert.deepEqual(defaultPayloadConverter.fromPayload(fromJson(decoded.json)[0]!), {
      prompt: `Fix the docs. ${MARKER}`,
    });
    const [opened] = await new AesGcmPayloadCodec(
      staticKeyRing([{ id: 'k1', key: Buffer.from(keys[0], 'base64') }]),
    ).decode(sealed);
    assert.deepEqual(defaultPayloadConverter.fromPayload(opened!), { prompt: `Fix the docs. ${MARKER}` });
  });

  test('a payload sealed by the worker opens through /decode; an unsealed one comes back as it was', async () => {
    const [sealed] = await codec.encode([prompt()]);
    const plain = defaultPayloadConverter.toPayload('plain');
    const decoded = await post(server, '/decode', toJson([sealed!, plain]));
    assert.equal(decoded.status, 200);
    const [a, b] = fromJson(decoded.json);
    assert.deepEqual(defaultPayloadConverter.fromPayload(a!), { prompt: `Fix the docs. ${MARKER}` });
    assert.equal(defaultPayloadConverter.fromPayload(b!), 'plain');
  });

  test('after key 2 becomes current in the file, /encode seals with it and key 1 payloads still open, without a restart', async () => {
    const [byKey1] = await codec.encode([prompt()]);
    volume.swap(ringText(['k2', keys[1]], ['k1', keys[0]]));
    clock.ms += 1_000;
    const encoded = await post(server, '/encode', toJson([prompt()]));
    assert.equal(Buffer.from(fromJson(encoded.json)[0]!.metadata![KEY_ID_METADATA_KEY]!).toString(), 'k2');
    const decoded = await post(server, '/decode', toJson([byKey1!, ...fromJson(encoded.json)]));
    assert.equal(decoded.status, 200);
    assert.deepEqual(
      fromJson(decoded.json).map((p) => defaultPayloadConverter.fromPayload(p)),
      [{ prompt: `Fix the docs. ${MARKER}` }, { prompt: `Fix the docs. ${MARKER}` }],
    );
  });

  test('bad bodies get 400 naming what is wrong, never quoting the body', async () => {
    const cases: [string, RegExp][] = [
      [`{"payloads": "${MARKER}"`, /does not parse as JSON/],
      [`["${MARKER}"]`, /is not an object/],
      [`{"payloads": "${MARKER}"}`, /payloads is not an array/],
      [`{"payloads": [{"data": "${MARKER}!"}]}`, /payloads\[0\]\.data is not base64/],
      [
        `{"payloads": [{"metadata": {"encoding": 5}}]}`,
        /payloads\[0\]\.metadata has a value that is not base64/,
      ],
      [`{"payloads": [null]}`, /payloads\[0\] is not an object/],
    ];
    for (const [body, message] of cases) {
      const res = await post(server, '/decode', body);
      assert.equal(res.status, 400, body);
      assert.match(String(res.json.message), message);
      assert.ok(!String(res.json.message).includes(MARKER));
    }
  });

  test('a body larger than the limit gets 413, with or without a Content-Length', async () => {
    const big = `{"payloads":[{"data":"${'A'.repeat(MAX_BODY_BYTES)}"}]}`;
    assert.equal((await post(server, '/decode', big)).status, 413);
    const chunked = await fetch(`${server.url}/decode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new Blob([big]).stream(),
      duplex: 'half',
    });
    assert.equal(chunked.status, 413);
  });

  test('a tampered payload gets 422 naming its key ID; an unknown key ID names the key, not key material', async () => {
    const [sealed] = await codec.encode([prompt()]);
    const data = Buffer.from(sealed!.data!);
    data[20] = data[20]! ^ 1;
    const tampered = await post(server, '/decode', toJson([{ ...sealed!, data }]));
    assert.equal(tampered.status, 422);
    // The key that sealed it is whichever is current when this test runs.
    const keyId = Buffer.from(sealed!.metadata![KEY_ID_METADATA_KEY]!).toString();
    assert.match(String(tampered.json.message), new RegExp(`sealed with key ${keyId} does not open`));
    const foreign = {
      ...sealed!,
      metadata: { ...sealed!.metadata, [KEY_ID_METADATA_KEY]: Buffer.from('k9') },
    };
    const unknown = await post(server, '/decode', toJson([foreign]));
    assert.equal(unknown.status, 422);
    assert.match(String(unknown.json.message), /sealed with key k9/);
    for (const key of keys) assert.ok(!JSON.stringify([tampered.json, unknown.json]).includes(key));
  });

  test('200,000 empty payloads (a 600 KB body) get 413 naming the limit, not a 29 MB answer', async () => {
    const res = await post(server, '/encode', `{"payloads":[${Array(200_000).fill('{}').join(',')}]}`);
    assert.equal(res.status, 413);
    assert.match(String(res.json.message), /at most 1000 payloads/);
  });

  test('a 1 MB key ID gets 422 saying what a key ID is, and is neither echoed nor logged', async () => {
    const [sealed] = await codec.encode([prompt()]);
    const keyId = `kid-${'x'.repeat(2 ** 20)}`;
    const foreign = {
      ...sealed!,
      metadata: { ...sealed!.metadata, [KEY_ID_METADATA_KEY]: Buffer.from(keyId) },
    };
    const res = await post(server, '/decode', toJson([foreign]));
    assert.equal(res.status, 422);
    assert.match(String(res.json.message), /payloads\[0\] names a key ID that is not 1 to 64 of/);
    assert.ok(!JSON.stringify(res.json).includes('xxxxxxxx'));
    assert.ok(!logLines.join('\n').includes('xxxxxxxx'));
  });

  test('the wrong method, path or content type is refused with its own status', async () => {
    assert.equal((await fetch(`${server.url}/decode`)).status, 405);
    assert.equal((await fetch(`${server.url}/other`, { method: 'POST' })).status, 404);
    const text = await fetch(`${server.url}/decode`, {
      method: 'POST',
      body: toJson([]),
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(text.status, 415);
    assert.equal((await fetch(new URL('/healthz', server.url))).status, 200);
  });

  test("CORS: the UI's origin gets its preflight and credentialed answers; another origin is refused", async () => {
    const preflight = await fetch(`${server.url}/decode`, {
      method: 'OPTIONS',
      headers: {
        origin: UI_ORIGIN,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type,x-namespace',
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), UI_ORIGIN);
    assert.equal(preflight.headers.get('access-control-allow-credentials'), 'true');
    const allowed = (preflight.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/,\s*/);
    for (const header of ['authorization', 'content-type', 'x-namespace'])
      assert.ok(allowed.includes(header), header);
    assert.match(preflight.headers.get('access-control-allow-methods') ?? '', /POST/);

    const answer = await post(server, '/encode', toJson([prompt()]), { origin: UI_ORIGIN });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('access-control-allow-origin'), UI_ORIGIN);

    const other = 'http://localhost:9999';
    const refusedPreflight = await fetch(`${server.url}/decode`, {
      method: 'OPTIONS',
      headers: { origin: other },
    });
    assert.equal(refusedPreflight.status, 403);
    assert.equal(refusedPreflight.headers.get('access-control-allow-origin'), null);
    const refused = await post(server, '/decode', toJson([]), { origin: other });
    assert.equal(refused.status, 403);
    assert.match(String(refused.json.message), /this origin is not allowed/);
    assert.ok(!JSON.stringify(refused.json).includes('9999'), 'the origin is not echoed');
  });

  test('local only: a Host that is not loopback (DNS rebinding) is refused', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${server.url}/decode`,
        { method: 'POST', headers: { host: 'attacker.example:8888', 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(toJson([]));
    });
    assert.equal(status, 403);
  });

  test('local only: a path without the local token, or with another, gets 403 (a forwarder on this machine relays no one); the token is never logged', async () => {
    const refusedPaths = ['/decode', '/not-the-local-token-0123/decode'];
    for (const path of refusedPaths) {
      const res = await post({ ...server, url: new URL(path, server.url).href }, '', toJson([]));
      assert.equal(res.status, 403, path);
      assert.match(String(res.json.message), /must end with the local token/);
    }
    assert.ok(!logLines.join('\n').includes(LOCAL_TOKEN));
    assert.match(logLines.join('\n'), /"path":"\/decode"/);
  });

  test('without access tokens it refuses to start on an address other than loopback', async () => {
    await assert.rejects(
      startCodecServer(codec, { ...LOCAL, host: '0.0.0.0' }, logger),
      /only on a loopback address and with a local token, not 0\.0\.0\.0/,
    );
  });
});

/** A local identity provider: discovery and JWKS over HTTP, and tokens signed with its key. */
class LocalIssuer {
  readonly kid = 'test-key-1';
  #server = createServer();
  issuer = '';
  private constructor(
    readonly privateKey: CryptoKey,
    readonly publicJwk: Record<string, unknown>,
  ) {}

  static async start(): Promise<LocalIssuer> {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    const issuer = new LocalIssuer(privateKey, { ...(await exportJWK(publicKey)), alg: 'ES256', use: 'sig' });
    await issuer.#listen();
    return issuer;
  }

  /** The absolute-form requests it answered as a proxy. */
  readonly proxied: string[] = [];

  async #listen(): Promise<void> {
    this.#server.on('request', (req, res) => {
      if (req.url?.startsWith('http://')) this.proxied.push(req.url);
      const path = new URL(req.url ?? '/', 'http://local').pathname;
      if (path === '/.well-known/openid-configuration') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ issuer: this.issuer, jwks_uri: `${this.issuer}/jwks` }));
      } else if (path === '/jwks') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ keys: [{ ...this.publicJwk, kid: this.kid }] }));
      } else res.writeHead(404).end();
    });
    this.#server.listen(0, '127.0.0.1');
    await once(this.#server, 'listening');
    const address = this.#server.address();
    this.issuer = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  }

  /** A token as this issuer signs it; `key` and `kid` replace the issuer's for the wrong-key case. */
  sign(
    claims: Record<string, unknown>,
    { audience = 'agent-job-codec', expiresIn = '5m', key = this.privateKey, kid = this.kid } = {},
  ): Promise<string> {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid })
      .setIssuer(this.issuer)
      .setAudience(audience)
      .setSubject('alice@example.com')
      .setIssuedAt(Math.floor(Date.now() / 1000) - 600)
      .setExpirationTime(expiresIn)
      .sign(key);
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

describe('the codec server with OIDC access tokens', () => {
  const codec = new AesGcmPayloadCodec(staticKeyRing([{ id: 'k1', key: randomBytes(32) }]));
  let issuer: LocalIssuer;
  let server: CodecServer;
  before(async () => {
    issuer = await LocalIssuer.start();
    server = await startCodecServer(
      codec,
      {
        // Any address may be used with access tokens; loopback keeps the test on this machine.
        ...OIDC,
        accessToken: {
          issuer: issuer.issuer,
          audience: 'agent-job-codec',
          jwksUrl: null,
          requiredClaim: { name: 'groups', value: 'temporal-codec' },
        },
      },
      logger,
    );
  });
  after(async () => {
    await server.close();
    await issuer.close();
  });

  const decodeWith = async (token: string | null) => {
    const [sealed] = await codec.encode([prompt()]);
    return post(
      server,
      '/decode',
      toJson([sealed!]),
      token === null ? {} : { authorization: `Bearer ${token}` },
    );
  };

  test('a valid token with the required claim opens payloads, found through OIDC discovery', async () => {
    const res = await decodeWith(await issuer.sign({ groups: ['temporal-codec', 'staff'] }));
    assert.equal(res.status, 200);
    assert.deepEqual(defaultPayloadConverter.fromPayload(fromJson(res.json)[0]!), {
      prompt: `Fix the docs. ${MARKER}`,
    });
  });

  test('no token, a wrong audience, an expired token, a foreign key: 401 with a reason; a missing claim: 403', async () => {
    const stranger = await generateKeyPair('ES256');
    const cases: [string, string | null, number, RegExp][] = [
      ['no token', null, 401, /no bearer access token/],
      [
        'wrong audience',
        await issuer.sign({ groups: ['temporal-codec'] }, { audience: 'other-api' }),
        401,
        /aud/,
      ],
      ['expired', await issuer.sign({ groups: ['temporal-codec'] }, { expiresIn: '-2m' }), 401, /expired/],
      [
        'signed with another key under the same kid',
        await issuer.sign({ groups: ['temporal-codec'] }, { key: stranger.privateKey }),
        401,
        /signature does not verify/,
      ],
      [
        'signed with a key the issuer does not publish',
        await issuer.sign({ groups: ['temporal-codec'] }, { key: stranger.privateKey, kid: 'other' }),
        401,
        /does not publish/,
      ],
      [
        'without the required claim',
        await issuer.sign({ groups: ['staff'] }),
        403,
        /groups claim does not hold temporal-codec/,
      ],
      ['not a JWT', 'not-a-jwt', 401, /not accepted/],
    ];
    for (const [name, token, status, reason] of cases) {
      const res = await decodeWith(token);
      assert.equal(res.status, status, name);
      assert.match(String(res.json.message), reason, name);
      assert.ok(!JSON.stringify(res.json).includes(MARKER), name);
      if (status === 401) assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/, name);
    }
    const logged = logLines.join('\n');
    for (const [, token] of cases) if (token) assert.ok(!logged.includes(token), 'no token in a log line');
    assert.match(logged, /alice@example\.com/, 'the subject of an accepted request is logged');
  });

  test('an issuer whose keys are out of reach gets 503, not a pass', async () => {
    const token = await issuer.sign({ groups: ['temporal-codec'] });
    const offline = await startCodecServer(
      codec,
      {
        ...OIDC,
        accessToken: {
          issuer: issuer.issuer,
          audience: 'agent-job-codec',
          jwksUrl: 'http://127.0.0.1:9/jwks',
          requiredClaim: null,
        },
      },
      logger,
    );
    try {
      const [sealed] = await codec.encode([prompt()]);
      const res = await post(offline, '/decode', toJson([sealed!]), { authorization: `Bearer ${token}` });
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '5');
      // The caller has not authenticated: it reads that the keys are out of reach, not why.
      assert.equal(res.json.message, "not authorized: the issuer's keys cannot be read now");
    } finally {
      await offline.close();
    }
  });

  test('no log line of either server holds a payload or the marker', () => {
    const logged = logLines.join('\n');
    assert.ok(!logged.includes(MARKER));
    assert.ok(!logLines.some((line) => holdsMarker(JSON.parse(line))), 'nor as base64 in any field');
  });
});

test(`a busy codec server runs ${MAX_IN_FLIGHT}, queues ${MAX_WAITING}, and answers one more 503 with Retry-After`, async () => {
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let coded = 0;
  const slow: PayloadCodec = {
    encode: async (payloads) => {
      await gate;
      coded++;
      return payloads;
    },
    decode: (payloads) => Promise.resolve(payloads),
  };
  const server = withToken(await startCodecServer(slow, LOCAL, logger));
  try {
    const sends = Array.from({ length: MAX_IN_FLIGHT + MAX_WAITING + 1 }, () =>
      post(server, '/encode', toJson([prompt()])),
    );
    // Nothing else can answer before the gate opens.
    const first = await Promise.race(sends);
    assert.equal(first.status, 503);
    assert.equal(first.headers.get('retry-after'), '5');
    assert.match(String(first.json.message), /busy/);
    release();
    const statuses = (await Promise.all(sends)).map((res) => res.status);
    assert.equal(statuses.filter((status) => status === 200).length, MAX_IN_FLIGHT + MAX_WAITING);
    assert.equal(coded, MAX_IN_FLIGHT + MAX_WAITING);
  } finally {
    await server.close();
  }
});

test("the issuer's discovery document and JWKS are fetched through HTTP_PROXY", async () => {
  // The local issuer doubles as the proxy: it answers absolute-form requests for a host that does
  // not resolve, so the token verifies only if both fetches went through it.
  const idp = await LocalIssuer.start();
  const proxy = idp.issuer;
  idp.issuer = 'http://issuer.invalid';
  const policy = { issuer: idp.issuer, audience: 'agent-job-codec', jwksUrl: null, requiredClaim: null };
  const token = `Bearer ${await idp.sign({})}`;
  try {
    const proxied = new AccessTokenVerifier(policy, createDispatcher({}, { HTTP_PROXY: proxy }));
    assert.deepEqual(await proxied.verify(token), { ok: true, subject: 'alice@example.com' });
    assert.deepEqual(idp.proxied, [
      'http://issuer.invalid/.well-known/openid-configuration',
      'http://issuer.invalid/jwks',
    ]);
    const direct = await new AccessTokenVerifier(policy, createDispatcher({}, {})).verify(token);
    assert.ok(!direct.ok && direct.refusal === 'unavailable');
  } finally {
    await idp.close();
  }
});

describe('the codec server configuration', () => {
  const ring = join(root, 'ring');
  writeFileSync(ring, ringText(['k1', newKey()]));
  const env = (extra: Record<string, string>) => ({ TEMPORAL_PAYLOAD_KEYS_FILE: ring, ...extra });
  const refused = (extra: Record<string, string>, setting: string, message: RegExp) =>
    assert.throws(
      () => loadCodecServerConfig(env(extra), false),
      (err: unknown) => err instanceof ConfigError && err.setting === setting && message.test(err.message),
    );

  test('defaults: loopback 127.0.0.1:8888, local only, no origin', () => {
    const config = loadCodecServerConfig(env({ CODEC_SERVER_LOCAL_TOKEN: LOCAL_TOKEN }));
    assert.deepEqual(config.server, {
      host: '127.0.0.1',
      port: 8888,
      allowedOrigins: [],
      allowCredentials: false,
      accessToken: null,
      localToken: LOCAL_TOKEN,
    });
  });

  test('the local token: made when a terminal shows it, required without one, refused with OIDC', () => {
    const made = loadCodecServerConfig(env({}), true).server.localToken;
    assert.match(made ?? '', /^[A-Za-z0-9_-]{32}$/);
    assert.notEqual(loadCodecServerConfig(env({}), true).server.localToken, made);
    refused({}, 'CODEC_SERVER_LOCAL_TOKEN', /is required without CODEC_SERVER_OIDC_ISSUER/);
    refused({ CODEC_SERVER_LOCAL_TOKEN: 'short' }, 'CODEC_SERVER_LOCAL_TOKEN', /16 or more/);
    refused(
      {
        CODEC_SERVER_LOCAL_TOKEN: LOCAL_TOKEN,
        CODEC_SERVER_OIDC_ISSUER: 'https://id.example.com/',
        CODEC_SERVER_OIDC_AUDIENCE: 'x',
      },
      'CODEC_SERVER_LOCAL_TOKEN',
      /only without CODEC_SERVER_OIDC_ISSUER/,
    );
  });

  test('no auth on an address other than loopback, a half OIDC setup, a bad origin or no ring: refused at start', () => {
    refused({ CODEC_SERVER_ADDRESS: '0.0.0.0:8888' }, 'CODEC_SERVER_ADDRESS', /not loopback/);
    refused(
      { CODEC_SERVER_OIDC_ISSUER: 'https://id.example.com/' },
      'CODEC_SERVER_OIDC_AUDIENCE',
      /is required/,
    );
    refused(
      { CODEC_SERVER_OIDC_AUDIENCE: 'x' },
      'CODEC_SERVER_OIDC_AUDIENCE',
      /only with CODEC_SERVER_OIDC_ISSUER/,
    );
    refused({ CODEC_SERVER_OIDC_ISSUER: 'http://id.example.com' }, 'CODEC_SERVER_OIDC_ISSUER', /https URL/);
    refused({ CODEC_SERVER_OIDC_ISSUER: 'not a url' }, 'CODEC_SERVER_OIDC_ISSUER', /https URL/);
    refused(
      { CODEC_SERVER_ALLOWED_ORIGINS: 'http://localhost:8080/' },
      'CODEC_SERVER_ALLOWED_ORIGINS',
      /no path or trailing slash/,
    );
    assert.throws(() => loadCodecServerConfig({}), /TEMPORAL_PAYLOAD_KEYS_FILE: is required/);
  });

  test('with an issuer and an audience it binds anywhere, keeping the issuer exactly as written', () => {
    const config = loadCodecServerConfig(
      env({
        CODEC_SERVER_ADDRESS: '0.0.0.0:8888',
        CODEC_SERVER_OIDC_ISSUER: 'https://tenant.example.com/',
        CODEC_SERVER_OIDC_AUDIENCE: 'agent-job-codec',
        CODEC_SERVER_OIDC_REQUIRED_CLAIM: 'groups=temporal-codec',
        CODEC_SERVER_ALLOWED_ORIGINS: 'https://temporal.example.com, http://localhost:8080',
        CODEC_SERVER_ALLOW_CREDENTIALS: 'true',
      }),
    );
    assert.equal(config.server.host, '0.0.0.0');
    assert.deepEqual(config.server.accessToken, {
      issuer: 'https://tenant.example.com/',
      audience: 'agent-job-codec',
      jwksUrl: null,
      requiredClaim: { name: 'groups', value: 'temporal-codec' },
    });
    assert.deepEqual(config.server.allowedOrigins, ['https://temporal.example.com', 'http://localhost:8080']);
    assert.equal(config.server.allowCredentials, true);
  });
});
