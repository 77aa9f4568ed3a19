/**
 * The codec server's one authorization mechanism: an OIDC access token (a JWT) in the
 * `Authorization: Bearer` header, verified against the issuer's published keys (JWKS); why this
 * one, and how a UI signed in through a proxy's cookie reaches it: docs/decisions/0018-codec-server.md.
 * The token itself is never logged nor echoed: a refusal names what failed (expired, audience,
 * signature), which is what an operator needs, and nothing a replay could use.
 */
import { createRemoteJWKSet, customFetch, errors, jwtVerify, type JWTPayload } from 'jose';
import { fetch, type Dispatcher } from 'undici';
import { getDispatcher } from '../agent-api/dispatcher.js';

/**
 * What a token must be to be accepted: the CODEC_SERVER_OIDC_* settings (docs/payload-codec.md, whose
 * table says each); `jwksUrl` null reads it by OIDC discovery, `requiredClaim` null takes any valid token.
 */
export interface AccessTokenPolicy {
  issuer: string;
  audience: string;
  jwksUrl: string | null;
  requiredClaim: { name: string; value: string } | null;
}

/**
 * A request's verdict: the caller it is, or the status to refuse it with and why; `detail`, for the
 * log only, says what went wrong on this side (a caller that has not authenticated is not told).
 */
export type AccessVerdict =
  { ok: true; subject: string | null } | { ok: false; refusal: Refused; reason: string; detail?: string };

/** Why a request is refused: no acceptable token, a valid one without the required claim, the issuer's keys out of reach. */
export type Refused = 'unauthenticated' | 'forbidden' | 'unavailable';

/** Tolerated clock difference between the issuer and this process for `exp` and `nbf`. */
const CLOCK_TOLERANCE_S = 30;

/** How long a key fetch (discovery or JWKS) may take before the request is refused with 503. */
const FETCH_TIMEOUT_MS = 5_000;

/**
 * Verifies access tokens against one issuer's keys, fetched once and re-fetched on an unknown `kid`,
 * through `dispatcher` (the process's, which honours HTTPS_PROXY and NO_PROXY).
 */
export class AccessTokenVerifier {
  readonly #policy: AccessTokenPolicy;
  readonly #fetch: typeof globalThis.fetch;
  #keys: Promise<ReturnType<typeof createRemoteJWKSet>> | null = null;

  constructor(policy: AccessTokenPolicy, dispatcher: Dispatcher = getDispatcher()) {
    this.#policy = policy;
    // undici's own fetch, which takes a dispatcher; its Response is the global one's twin.
    this.#fetch = ((url: string, init: RequestInit) =>
      fetch(url, { ...(init as object), dispatcher })) as unknown as typeof globalThis.fetch;
  }

  /** The verdict on a request's `Authorization` header (undefined when it has none). */
  async verify(authorization: string | undefined): Promise<AccessVerdict> {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) return refused('unauthenticated', 'no bearer access token');
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(match[1] as string, await this.#jwks(), {
        issuer: this.#policy.issuer,
        audience: this.#policy.audience,
        clockTolerance: CLOCK_TOLERANCE_S,
        requiredClaims: ['exp'],
      }));
    } catch (err) {
      return refusalOf(err);
    }
    const claim = this.#policy.requiredClaim;
    if (claim !== null && !claimHolds(payload[claim.name], claim.value))
      return refused('forbidden', `the token's ${claim.name} claim does not hold ${claim.value}`);
    return { ok: true, subject: typeof payload.sub === 'string' ? payload.sub : null };
  }

  #jwks(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    // A failed discovery is not kept: the next request tries again.
    this.#keys ??= jwksUrlOf(this.#policy, this.#fetch).then(
      (url) =>
        createRemoteJWKSet(new URL(url), { timeoutDuration: FETCH_TIMEOUT_MS, [customFetch]: this.#fetch }),
      (err: unknown) => {
        this.#keys = null;
        throw err;
      },
    );
    return this.#keys;
  }
}

/** The JWKS URL: configured, or from the issuer's discovery document. */
async function jwksUrlOf(policy: AccessTokenPolicy, fetch: typeof globalThis.fetch): Promise<string> {
  if (policy.jwksUrl !== null) return policy.jwksUrl;
  const url = `${policy.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  const response = await fetch(url, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  if (!response.ok) throw new DiscoveryError(`${url} answered ${response.status}`);
  const document = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
  if (document.issuer !== policy.issuer)
    throw new DiscoveryError(`${url} names another issuer than ${policy.issuer}`);
  if (typeof document.jwks_uri !== 'string') throw new DiscoveryError(`${url} has no jwks_uri`);
  return document.jwks_uri;
}

/** The issuer's discovery document could not be used. */
class DiscoveryError extends Error {}

function claimHolds(claim: unknown, value: string): boolean {
  if (typeof claim === 'string') return claim === value || claim.split(' ').includes(value);
  return Array.isArray(claim) && claim.includes(value);
}

function refused(refusal: Refused, reason: string, detail?: string): AccessVerdict {
  return { ok: false, refusal, reason, detail };
}

/**
 * A refusal naming what failed in the caller's token; when the issuer's keys are out of reach, 503
 * and the error for the log only.
 */
function refusalOf(err: unknown): AccessVerdict {
  if (
    err instanceof errors.JWKSTimeout ||
    err instanceof errors.JWKSInvalid ||
    err instanceof DiscoveryError ||
    !(err instanceof errors.JOSEError)
  ) {
    const detail =
      err instanceof Error
        ? `${err.message}${err.cause instanceof Error ? `: ${err.cause.message}` : ''}`
        : String(err);
    return refused('unavailable', "the issuer's keys cannot be read now", detail);
  }
  if (err instanceof errors.JWTExpired) return refused('unauthenticated', 'the token has expired');
  if (err instanceof errors.JWTClaimValidationFailed)
    return refused('unauthenticated', `the token's ${err.claim} claim is not accepted (${err.reason})`);
  if (err instanceof errors.JWKSNoMatchingKey)
    return refused('unauthenticated', 'the token is signed with a key the issuer does not publish');
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return refused('unauthenticated', 'the token signature does not verify');
  return refused('unauthenticated', `the token is not accepted (${err.code})`);
}
