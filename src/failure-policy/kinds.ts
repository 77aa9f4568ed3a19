/**
 * The kinds of failure the table (./table.ts) has a row for, and the classifiers that turn an HTTP
 * status or a network error into one, for the API client and a job-end notice's sender alike.
 * Facts only: what a kind means is the table's. Pure: workflow code imports it.
 */

/** Each kind's value, and its text for people (the first column of docs/failure-policy.md). */
const KINDS = {
  Malformed: ['malformed', '400, 422 and other 4xx not named below: the request itself is wrong.'],
  NotSendable: [
    'not-sendable',
    'The client refused to send it: an ID or key that would address another URL or break a header.',
  ],
  KeyRefused: ['key-refused', '401: the key is unknown, expired or revoked.'],
  Forbidden: [
    'forbidden',
    '403: the key lacks a scope, or the request came from outside its IP allow-list, or a WAF page.',
  ],
  NotFound: ['not-found', '404.'],
  NotProcessed: ['not-processed', '408 and 425: the server says it did not process the request.'],
  RateLimited: ['rate-limited', '429.'],
  Unavailable: ['unavailable', '503: unavailable, not processed; may carry `Retry-After`.'],
  ServerError: [
    'server-error',
    '500, 502, 504 and other 5xx: the server failed somewhere after reading the request.',
  ],
  Redirect: [
    'redirect',
    '301, 302, 307, 308 (and 300, 305): the API is not where `AGENT_API_BASE_URL` points.',
  ],
  SeeOther: ['see-other', '303: the server processed a POST and points elsewhere for its result.'],
  OddStatus: ['odd-status', '1xx, 304, and any other status the API never answers.'],
  NotConnected: [
    'not-connected',
    'Connection refused, DNS failure, unreachable, or the egress proxy answered 502, 503 or 504 to the CONNECT (it could not reach the host): no byte left.',
  ],
  TlsRejected: [
    'tls-rejected',
    'The TLS handshake failed (untrusted, expired or mismatched certificate, https to a plain port): no byte of the request left.',
  ],
  ProxyRefused: [
    'proxy-refused',
    'The egress proxy refused the request or its CONNECT tunnel (407 Proxy Authentication Required, or an answer to CONNECT other than 200, 502, 503 and 504): nothing reached the host.',
  ],
  ConnectTimeout: ['connect-timeout', 'No connection within the connect timeout: no byte left.'],
  LostAfterSend: [
    'lost-after-send',
    'The connection broke after the request was written, or an unknown network error.',
  ],
  NoAnswerInTime: ['no-answer-in-time', 'No answer (headers or body) in time after the request was written.'],
  ShutdownBeforeSend: ['shutdown-before-send', 'The worker stopped before the request was sent.'],
  NotARecord: [
    'not-a-record',
    "A 2xx whose body is not JSON (a maintenance page, a proxy's page), or, for a create or message, broke off.",
  ],
  InvalidRecord: [
    'invalid-record',
    'A 2xx whose JSON is not a valid record (a field out of bounds, a `prLink` that is not a clean URL), or is larger than the cap: the same answer again will not change.',
  ],
} as const;

type KindName = keyof typeof KINDS;

/** The kinds by name: `FailureKind.NotFound` is `'not-found'`. */
export const FailureKind = Object.fromEntries(
  Object.entries(KINDS).map(([name, [kind]]) => [name, kind]),
) as { readonly [N in KindName]: (typeof KINDS)[N][0] };

/** One of the {@link FailureKind} values. */
export type FailureKind = (typeof FailureKind)[KindName];

/** What each {@link FailureKind} is, for people. */
export const KIND_TEXT = Object.fromEntries(
  Object.values(KINDS).map(([kind, text]) => [kind, text]),
) as Readonly<Record<FailureKind, string>>;

/** The kind of an HTTP status other than 2xx. */
export function kindOfStatus(status: number): FailureKind {
  const named = STATUS_KINDS[status];
  if (named !== undefined) return named;
  if (status >= 500) return FailureKind.ServerError;
  if (status >= 400) return FailureKind.Malformed;
  return FailureKind.OddStatus;
}

const STATUS_KINDS: Readonly<Record<number, FailureKind>> = {
  300: FailureKind.Redirect,
  301: FailureKind.Redirect,
  302: FailureKind.Redirect,
  303: FailureKind.SeeOther,
  305: FailureKind.Redirect,
  307: FailureKind.Redirect,
  308: FailureKind.Redirect,
  401: FailureKind.KeyRefused,
  403: FailureKind.Forbidden,
  404: FailureKind.NotFound,
  // Only a proxy answers it: the API never asks for proxy credentials.
  407: FailureKind.ProxyRefused,
  408: FailureKind.NotProcessed,
  425: FailureKind.NotProcessed,
  429: FailureKind.RateLimited,
  503: FailureKind.Unavailable,
};

/** Whether a status is a success whose body is the record. */
export function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

/** Whether a status is a redirect whose `Location` is worth naming in the message. */
export function namesLocation(kind: FailureKind): boolean {
  return kind === FailureKind.Redirect || kind === FailureKind.SeeOther;
}

/** A network failure's kind, and a short description for the message. */
interface NetworkKind {
  kind: FailureKind;
  what: string;
}

/** Failures before a byte of the request can reach the server. */
const NOT_CONNECTED: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host name not found (DNS)',
  EAI_AGAIN: 'host name lookup failed (DNS)',
  EAI_NONAME: 'host name not found (DNS)',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EADDRNOTAVAIL: 'address not available',
};

/**
 * TLS handshake failures (Node's `tls` error codes, and OpenSSL's for a handshake that was not
 * TLS at all): the request is written only after the handshake, so it never left.
 */
const TLS_REJECTED: Readonly<Record<string, string>> = {
  DEPTH_ZERO_SELF_SIGNED_CERT: 'the server certificate is self-signed and not trusted',
  SELF_SIGNED_CERT_IN_CHAIN: 'the server certificate chain has a self-signed certificate that is not trusted',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'the server certificate cannot be verified (unknown issuer)',
  UNABLE_TO_GET_ISSUER_CERT: 'the server certificate issuer is unknown',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'the server certificate issuer is not trusted here',
  CERT_HAS_EXPIRED: 'the server certificate has expired',
  CERT_NOT_YET_VALID: 'the server certificate is not valid yet',
  CERT_REVOKED: 'the server certificate is revoked',
  CERT_UNTRUSTED: 'the server certificate is not trusted',
  CERT_SIGNATURE_FAILURE: 'the server certificate signature is invalid',
  INVALID_CA: 'the server certificate chain has an invalid CA',
  ERR_TLS_CERT_ALTNAME_INVALID: 'the server certificate does not name this host',
  ERR_SSL_WRONG_VERSION_NUMBER: 'the server did not answer TLS (https to a plain http port?)',
  ERR_SSL_PACKET_LENGTH_TOO_LONG: 'the server did not answer TLS (https to a plain http port?)',
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: 'the server refused the handshake (unknown CA)',
  ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE: 'the TLS handshake failed',
  ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION: 'no TLS version in common with the server',
  UND_ERR_PRX_TLS: 'the TLS handshake with the proxy failed',
  EPROTO: 'the TLS handshake failed',
};

/** Failures after the connection was open: the server may have read and applied the request. */
const LOST_AFTER_SEND: Readonly<Record<string, string>> = {
  ECONNRESET: 'connection reset',
  EPIPE: 'connection closed while sending',
  ECONNABORTED: 'connection aborted',
  UND_ERR_SOCKET: 'connection closed by the server',
  UND_ERR_CLOSED: 'connection closed',
};

/**
 * Classifies an error thrown by undici, by its `code` (on the error, its cause, or an aggregate's
 * first error). `target`: what the request was for, named where undici's error does not say.
 */
export function kindOfNetworkError(err: unknown, target = 'the host'): NetworkKind {
  const code = errorCode(err);
  if (code === 'UND_ERR_CONNECT_TIMEOUT')
    return { kind: FailureKind.ConnectTimeout, what: 'connect timeout' };
  if (code === 'UND_ERR_HEADERS_TIMEOUT') {
    return { kind: FailureKind.NoAnswerInTime, what: 'no response headers in time' };
  }
  if (code === 'UND_ERR_BODY_TIMEOUT')
    return { kind: FailureKind.NoAnswerInTime, what: 'response body stalled' };
  const proxy = proxyAnswer(err, target);
  if (proxy !== null) return proxy;
  for (const [table, kind] of [
    [NOT_CONNECTED, FailureKind.NotConnected],
    [TLS_REJECTED, FailureKind.TlsRejected],
    [LOST_AFTER_SEND, FailureKind.LostAfterSend],
  ] as const) {
    if (code !== undefined && code in table) return { kind, what: `${table[code] ?? code} (${code})` };
  }
  // Unknown failure: assume the worst for a create (it may have been applied) but let it be retried.
  return { kind: FailureKind.LostAfterSend, what: code ?? 'network failure' };
}

/**
 * An egress proxy's answer other than a tunnel, which undici reports without a code of its own:
 * `Proxy Authentication Required (407)` for a request in absolute form, `Proxy response (503) !==
 * 200 when HTTP Tunneling` for a CONNECT; null for any other error. A CONNECT answered 502, 503 or
 * 504 never reached the host (undici sends nothing before the tunnel is open): the proxy could not
 * reach it for now, like a refused connection.
 */
function proxyAnswer(err: unknown, target: string): NetworkKind | null {
  const message = err instanceof Error ? err.message : '';
  const status = /^Proxy (?:Authentication Required \((\d{3})\)|response \((\d{3})\))/.exec(message);
  const answered = status?.[1] ?? status?.[2];
  if (answered === undefined) return null;
  if (answered === '407') {
    const what =
      'the proxy answered 407 Proxy Authentication Required (check the credentials in HTTPS_PROXY or HTTP_PROXY)';
    return { kind: FailureKind.ProxyRefused, what };
  }
  const what = `the proxy answered ${answered} instead of opening a tunnel to ${target}`;
  if (['502', '503', '504'].includes(answered)) {
    return { kind: FailureKind.NotConnected, what: `${what} (it could not reach it for now)` };
  }
  return { kind: FailureKind.ProxyRefused, what };
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, cause, errors } = err as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string') return code;
  // Happy-eyeballs connects (several addresses tried) fail with an AggregateError.
  if (Array.isArray(errors) && errors.length > 0) return errorCode(errors[0]);
  return cause === undefined ? undefined : errorCode(cause);
}
