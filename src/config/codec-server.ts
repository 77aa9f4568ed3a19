/** The codec server's settings (`npm run codec-server`, docs/payload-codec.md), read at start. */
import { randomBytes } from 'node:crypto';
import * as z from 'zod/mini';
import { isLoopbackHost } from '../agent-api/dispatcher.js';
import { urlHost, type AccessTokenPolicy, type CodecServerSettings } from '../payload-codec/index.js';
import { ConfigError, hostPort, logLevel, readSettings, trueFalse, type Env } from './settings.js';
import { payloadKeysFile } from './temporal.js';

/**
 * An issuer or JWKS URL, as written (an issuer's trailing slash is part of its `iss`); http only to
 * loopback: keys fetched over plain HTTP from elsewhere could be replaced on the way.
 */
const oidcUrl = z.string().check(
  z.refine((value) => {
    const url = URL.parse(value);
    if (url === null || url.username || url.password) return false;
    return url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname));
  }, 'must be an https URL (http only to a loopback host), without credentials'),
);

const ORIGINS =
  'must be comma-separated origins such as "https://temporal.example.com" (scheme, host and port only, no path or trailing slash)';

const CodecServerEnv = z.object({
  TEMPORAL_PAYLOAD_KEYS_FILE: z.pipe(
    z.string({ error: 'is required: the codec server opens payloads with that ring' }),
    payloadKeysFile,
  ),
  // Loopback by default: the local-only allowance, the dev stack's.
  CODEC_SERVER_ADDRESS: z.prefault(hostPort, '127.0.0.1:8888'),
  CODEC_SERVER_ALLOWED_ORIGINS: z._default(
    z.pipe(
      z.transform((value: string) => value.split(',').flatMap((origin) => origin.trim() || [])),
      z.array(z.string()).check(
        z.minLength(1, ORIGINS),
        z.refine(
          (origins) => origins.every((origin) => URL.canParse(origin) && new URL(origin).origin === origin),
          ORIGINS,
        ),
      ),
    ),
    [],
  ),
  CODEC_SERVER_ALLOW_CREDENTIALS: z._default(trueFalse, false),
  CODEC_SERVER_LOCAL_TOKEN: z.optional(
    z
      .string()
      .check(z.regex(/^[A-Za-z0-9_-]{16,}$/, 'must be 16 or more of A-Z a-z 0-9 _ - (it goes in a URL)')),
  ),
  CODEC_SERVER_OIDC_ISSUER: z.optional(oidcUrl),
  CODEC_SERVER_OIDC_AUDIENCE: z.optional(z.string()),
  CODEC_SERVER_OIDC_JWKS_URL: z.optional(oidcUrl),
  CODEC_SERVER_OIDC_REQUIRED_CLAIM: z.optional(
    z.pipe(
      z
        .string()
        .check(
          z.regex(
            /^[^=\s]+=\S+$/,
            'must be "<claim>=<value>", such as "groups=temporal-codec" or "scope=codec:decode"',
          ),
        ),
      z.transform((value) => {
        const at = value.indexOf('=');
        return { name: value.slice(0, at), value: value.slice(at + 1) };
      }),
    ),
  ),
  LOG_LEVEL: logLevel,
});

/** The environment variables the codec server reads (docs/configuration.md). */
export const CODEC_SERVER_SETTINGS = Object.keys(CodecServerEnv.shape);

/**
 * Loads the codec server's settings. Without CODEC_SERVER_OIDC_ISSUER only a loopback address is
 * allowed, so an open codec server never starts; its token is then CODEC_SERVER_LOCAL_TOKEN, or one
 * made here when there is a `terminal` to print it to. Never logged.
 */
export function loadCodecServerConfig(env: Env = process.env, terminal = process.stderr.isTTY === true) {
  const settings = readSettings(CodecServerEnv, env);
  const { host, port } = settings.CODEC_SERVER_ADDRESS;
  const accessToken = accessTokenPolicy(settings);
  if (accessToken === null && !isLoopbackHost(urlHost(host)))
    throw new ConfigError(
      'CODEC_SERVER_ADDRESS',
      'is not loopback, and without CODEC_SERVER_OIDC_ISSUER the codec server has no authorization: set CODEC_SERVER_OIDC_ISSUER and CODEC_SERVER_OIDC_AUDIENCE, or bind to 127.0.0.1',
    );
  let localToken = settings.CODEC_SERVER_LOCAL_TOKEN ?? null;
  if (accessToken === null && localToken === null) {
    if (!terminal)
      throw new ConfigError(
        'CODEC_SERVER_LOCAL_TOKEN',
        'is required without CODEC_SERVER_OIDC_ISSUER when no terminal shows the one the codec server would make',
      );
    localToken = randomBytes(24).toString('base64url');
  }
  return {
    payloadKeysFile: settings.TEMPORAL_PAYLOAD_KEYS_FILE,
    server: {
      host: host.replace(/^\[(.*)\]$/, '$1'),
      port,
      allowedOrigins: settings.CODEC_SERVER_ALLOWED_ORIGINS,
      allowCredentials: settings.CODEC_SERVER_ALLOW_CREDENTIALS,
      accessToken,
      localToken,
    } satisfies CodecServerSettings,
    logLevel: settings.LOG_LEVEL,
  };
}

/** Everything the codec server needs. */
export type CodecServerConfig = ReturnType<typeof loadCodecServerConfig>;

/** The OIDC settings, all or none: an issuer without an audience would accept any of its tokens. */
function accessTokenPolicy(settings: z.output<typeof CodecServerEnv>): AccessTokenPolicy | null {
  const issuer = settings.CODEC_SERVER_OIDC_ISSUER;
  const audience = settings.CODEC_SERVER_OIDC_AUDIENCE;
  if (issuer === undefined) {
    const stray = (
      [
        'CODEC_SERVER_OIDC_AUDIENCE',
        'CODEC_SERVER_OIDC_JWKS_URL',
        'CODEC_SERVER_OIDC_REQUIRED_CLAIM',
      ] as const
    ).find((name) => settings[name] !== undefined);
    if (stray) throw new ConfigError(stray, 'takes effect only with CODEC_SERVER_OIDC_ISSUER');
    return null;
  }
  if (settings.CODEC_SERVER_LOCAL_TOKEN !== undefined)
    throw new ConfigError('CODEC_SERVER_LOCAL_TOKEN', 'takes effect only without CODEC_SERVER_OIDC_ISSUER');
  if (audience === undefined)
    throw new ConfigError(
      'CODEC_SERVER_OIDC_AUDIENCE',
      'is required with CODEC_SERVER_OIDC_ISSUER (the aud the tokens must name)',
    );
  return {
    issuer,
    audience,
    jwksUrl: settings.CODEC_SERVER_OIDC_JWKS_URL ?? null,
    requiredClaim: settings.CODEC_SERVER_OIDC_REQUIRED_CLAIM ?? null,
  };
}
