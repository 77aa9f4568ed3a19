/**
 * What a person reads of a failure beyond what happened (./kinds.ts): what to check, what a call
 * that may have been applied means, a delivery's bound. Pure.
 */
import { FailureKind } from './kinds.js';
import type { ApiOperation } from './table.js';

/**
 * What a person should do about a failed API call of this kind, or '' when the kind says it all.
 * `jobId`: the call's, named in a 404's advice; `retryAfterMs`: the server's wait, when it asked.
 */
export function hint(
  kind: FailureKind,
  operation: ApiOperation,
  jobId: string | null,
  retryAfterMs: number | null,
): string {
  const after =
    retryAfterMs === null ? '' : `; the server asks to retry after ${Math.ceil(retryAfterMs / 1000)}s`;
  switch (kind) {
    case FailureKind.KeyRefused:
      return 'The API refused the admin API key (unknown, expired or revoked): check AGENT_API_KEY (or the file AGENT_API_KEY_FILE names) and that the key belongs to the organization that owns the project';
    case FailureKind.Forbidden:
      return "The API refused the admin API key for this request (a missing read or write scope, or a caller outside the key's IP allow-list): check the key's scopes and allow-list";
    case FailureKind.NotFound:
      return operation === 'createJob'
        ? 'Check the project ID, and that the admin API key belongs to the organization that owns it'
        : `No agent job ${JSON.stringify(jobId)} in this project (a job created a moment ago may not be readable yet)`;
    case FailureKind.Malformed:
      return 'The API rejected the request as invalid; repeating it will not help';
    case FailureKind.ProxyRefused:
      return 'The egress proxy refused the request (nothing reached the API): check the credentials in HTTPS_PROXY or HTTP_PROXY';
    case FailureKind.RateLimited:
      return `Rate limited (the API allows 100 creates per project per hour)${after}`;
    case FailureKind.Unavailable:
    case FailureKind.NotProcessed:
    case FailureKind.ServerError:
      return `The API is unavailable for now${after}`;
    default:
      return '';
  }
}

/** What to check after a failed TLS handshake, to follow "nothing was sent"; '' for any other kind. */
export function tlsHint(kind: FailureKind): string {
  return kind === FailureKind.TlsRejected
    ? ": check that AGENT_API_BASE_URL is the API's https address, and for a private CA set NODE_EXTRA_CA_CERTS"
    : '';
}

/** Why a create or message that may have been applied (`why` may have reached the API) is not sent again under `fail`. */
export function notSentAgain(operation: 'createJob' | 'sendMessage', why: string): string {
  const look =
    operation === 'createJob'
      ? `The agent job may or may not have been created (${why} may have reached the API): look for the job in the project before starting again, and follow it with { projectId, jobId } if it exists.`
      : `The follow-up message may or may not have started a turn (${why} may have reached the API): look at the job before sending it again.`;
  return `${look} The ambiguous-call policy is "fail" (AGENT_API_AMBIGUOUS_CREATE), so it is not sent again.`;
}

/** `24h`, `90m`, `3s`: a delivery's bound as AGENT_NOTIFY_RETRY_FOR is written. */
export function formatBound(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  return `${Math.round(ms / 1000)}s`;
}
