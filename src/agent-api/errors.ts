/**
 * What a failed call becomes: the {@link AgentApiError} of its {@link FailureKind}, its type,
 * finality and ambiguity the failure policy's (src/failure-policy/), with a message a person can
 * act on. No I/O here: ./client.ts sends.
 */
import type { Dispatcher } from 'undici';
import { FailureKind, kindOfNetworkError, kindOfStatus, namesLocation } from '../failure-policy/kinds.js';
import { hint, tlsHint } from '../failure-policy/messages.js';
import { verdictOf, type ApiOperation, type Verdict } from '../failure-policy/table.js';
import type { ApiFailureType } from '../failure-policy/types.js';
import { AgentJobError, ErrorName } from '../errors.js';
import { parsedOrNull, readableJobId } from './record.js';
import { parseRetryAfter } from './retry-after.js';

export type { ApiOperation } from '../failure-policy/table.js';

/**
 * What {@link AgentApiError} is built from; absent status, wait and job are null. `applied`: may
 * have been applied whatever the kind says (a 2xx whose body broke off); default: the policy's.
 */
type AgentApiErrorInit = Pick<AgentApiError, 'kind' | 'operation' | 'message'> &
  Partial<Pick<AgentApiError, 'status' | 'retryAfterMs' | 'jobId'>> & { applied?: boolean; cause?: unknown };

/**
 * A failed API call. `type` comes from the policy, never from the class name (a bundler may rename
 * it). The message never contains the API key or the Authorization header.
 */
export class AgentApiError extends AgentJobError {
  /** What happened, as the failure policy names it. */
  readonly kind: FailureKind;
  /** What the policy says it does, for this call. */
  readonly verdict: Verdict;
  /** The failure type: always one of the API-facing names in {@link ApiFailureType}. */
  readonly type: ApiFailureType;
  /** The client call that failed. */
  readonly operation: ApiOperation;
  /** The HTTP status, or null when no response arrived. */
  readonly status: number | null;
  /** False when the policy says no retry can help. */
  readonly retryable: boolean;
  /** The server's `Retry-After` (on 429 and 503) in ms, or null. */
  readonly retryAfterMs: number | null;
  /** True when the request may have taken effect (a create that may have made an agent job). */
  readonly requestMayHaveTakenEffect: boolean;
  /** For `UnreadableAnswer`: the agent job the request took effect on, when it can be named; else null. */
  readonly jobId: string | null;

  constructor(init: AgentApiErrorInit) {
    super(ErrorName.AgentApi, init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.verdict = verdictOf(init.kind, init.operation);
    this.type = this.verdict.type;
    this.operation = init.operation;
    this.status = init.status ?? null;
    this.retryable = this.verdict.bound !== 'final';
    this.retryAfterMs = init.retryAfterMs ?? null;
    this.requestMayHaveTakenEffect = init.applied ?? this.verdict.mayHaveBeenApplied;
    this.jobId = init.jobId ?? null;
  }
}

/** Longest project or job ID quoted in a message: IDs are opaque and could be anything. */
const ID_LENGTH = 100;
/** One call, as the client's helpers see it. */
export interface Call {
  operation: ApiOperation;
  method: 'GET' | 'POST';
  projectId: string;
  jobId: string | null;
  prompt?: string;
  idempotencyKey?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}

/** Builds the failures of the calls of one client. */
export class CallFailures {
  constructor(
    /** The API's origin, named in network failures. */
    private readonly origin: string,
    /** Cuts and redacts server text for a message (the client knows the keys to cut). */
    private readonly excerpt: (text: string) => string,
  ) {}

  /** A call refused before any request: `problem` says why. */
  notSendable(call: Call, problem: string): AgentApiError {
    return new AgentApiError({
      kind: FailureKind.NotSendable,
      operation: call.operation,
      message: `${describe(call)} was not sent: ${problem}`,
    });
  }

  /**
   * A failure without a usable response. `afterResponse` marks a failure while reading a success
   * body: the request was applied, whatever the error code says.
   */
  network(call: Call, err: unknown, afterResponse: boolean): unknown {
    if (call.signal?.aborted) {
      const reason: unknown = call.signal.reason;
      // The caller's own abort (an activity cancellation, a shutdown): not ours to reinterpret.
      if (!isTimeoutReason(reason)) return reason;
      return new AgentApiError({
        kind: FailureKind.NoAnswerInTime,
        operation: call.operation,
        message: `${describe(call)} failed: the caller's timeout aborted it before an answer from ${this.origin}${ambiguity(call)}`,
        cause: reason,
      });
    }
    const { kind, what } = kindOfNetworkError(err, 'the API');
    const mayHaveTakenEffect = afterResponse || verdictOf(kind, call.operation).mayHaveBeenApplied;
    const notSent = mayHaveTakenEffect ? ambiguity(call) : `; nothing was sent${tlsHint(kind)}`;
    return new AgentApiError({
      kind,
      operation: call.operation,
      applied: mayHaveTakenEffect,
      message: `${describe(call)} failed: ${what} (${this.origin})${notSent}`,
      cause: err,
    });
  }

  /**
   * A 2xx whose body is not a record. A get reads again (as the table says). A create or follow-up
   * message took effect, and the API documents no idempotency key: it must not be sent again, and
   * the failure names the agent job when the call or the answer does, so the caller can go on with it.
   */
  unreadable(
    call: Call,
    status: number,
    what: string,
    text: string,
    err: unknown,
    kind: FailureKind = FailureKind.NotARecord,
  ): AgentApiError {
    // JSON.parse quotes the body in its message: rebuild the cause from redacted text.
    const cause =
      (err instanceof SyntaxError ? new SyntaxError(this.excerpt(err.message)) : err) ?? undefined;
    const init = { kind, operation: call.operation, status, cause };
    const got = `${describe(call)} got HTTP ${status} with ${what}`;
    if (call.method === 'GET') {
      // A 2xx means the server took the request; only the body got lost.
      const message = `${got}: ${JSON.stringify(this.excerpt(text))}`;
      return new AgentApiError({ ...init, applied: true, message });
    }
    const jobId = call.jobId ?? readableJobId(text);
    const notAgain =
      'not sent again (the API documents no idempotency key, so a second create could make a second agent job)';
    let effect: string;
    if (call.operation === 'sendMessage') {
      effect = `the follow-up message to agent job ${quote(jobId ?? '')} was applied, and was not sent again (a second message would start a second turn)`;
    } else if (jobId === null) {
      effect = `the agent job was created, but the answer names no job ID. The create was ${notAgain}: find the new job in project ${quote(call.projectId)} and pass its ID as jobId to follow it`;
    } else {
      effect = `agent job ${quote(jobId)} was created, and the create was ${notAgain}`;
    }
    const excerpt = text === '' ? '' : `: ${JSON.stringify(this.excerpt(text))}`;
    return new AgentApiError({ ...init, jobId, message: `${got}; ${effect}${excerpt}` });
  }

  http(call: Call, status: number, headers: Dispatcher.ResponseData['headers'], text: string): AgentApiError {
    const kind = kindOfStatus(status);
    const verdict = verdictOf(kind, call.operation);
    const retryAfterMs = verdict.readsRetryAfter ? parseRetryAfter(firstValue(headers['retry-after'])) : null;
    const serverMessage = namesLocation(kind) ? '' : this.excerpt(serverText(text));
    const parts = [`${describe(call)} failed with HTTP ${status}`];
    if (serverMessage !== '') parts[0] += `: ${serverMessage}`;
    parts.push(
      namesLocation(kind)
        ? this.#redirectHint(call, kind, firstValue(headers.location))
        : hint(kind, call.operation, call.jobId, retryAfterMs),
    );
    if (verdict.mayHaveBeenApplied && call.method === 'POST')
      parts.push('The request may have been applied.');
    return new AgentApiError({
      kind,
      operation: call.operation,
      status,
      retryAfterMs,
      message: parts.filter((part) => part !== '').join('. '),
    });
  }

  /**
   * What a person should know of a redirect: where it points and where the client was sent. Not
   * followed: a create or message sent on to another host would carry the key there, and the API
   * never redirects.
   */
  #redirectHint(call: Call, kind: FailureKind, location: string | undefined): string {
    const to = location === undefined ? 'no Location' : `Location ${JSON.stringify(this.excerpt(location))}`;
    const sent =
      call.method === 'POST' && verdictOf(kind, call.operation).mayHaveBeenApplied
        ? 'a 303 means the server processed the request'
        : 'the request was not processed and is not sent again';
    return `The server redirected (${to}): AGENT_API_BASE_URL (${this.origin}) does not point at the API itself; ${sent}`;
  }
}

/** An ID quoted for a message, cut to {@link ID_LENGTH} characters. */
function quote(id: string): string {
  return JSON.stringify(id.length > ID_LENGTH ? `${id.slice(0, ID_LENGTH)}…` : id);
}

/** `createJob (project "p", job "j")`: what and on what, for the start of every message. */
function describe(call: Call): string {
  const job = call.jobId === null ? '' : `, job ${quote(call.jobId)}`;
  return `${call.operation} (project ${quote(call.projectId)}${job})`;
}

/** The warning that matters for a create (a second agent job) and a message (a second turn). */
function ambiguity(call: Call): string {
  return call.method === 'POST' ? '; the request may have been applied' : '';
}

/**
 * The human part of an error body: `message`, `error` (a string or an object with a message) and
 * `code` of a JSON object, or the text as it is. Only ever used for the message.
 */
function serverText(text: string): string {
  const json = parsedOrNull(text);
  // Not a JSON object: a proxy's page or plain text is shown as it is.
  if (typeof json !== 'object' || json === null) return text;
  const fields = json as Record<string, unknown>;
  const nested =
    typeof fields.error === 'object' && fields.error !== null
      ? (fields.error as Record<string, unknown>)
      : {};
  const message = [fields.message, fields.error, nested.message].find((value) => typeof value === 'string');
  const code = [fields.code, nested.code].find(
    (value) => typeof value === 'string' || typeof value === 'number',
  );
  if (typeof message !== 'string') return text;
  return code === undefined ? message : `${message} [${String(code)}]`;
}

function firstValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** `AbortSignal.timeout()` aborts with a DOMException named TimeoutError. */
export function isTimeoutReason(reason: unknown): boolean {
  return (reason as { name?: unknown } | null | undefined)?.name === 'TimeoutError';
}
