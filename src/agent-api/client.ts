/**
 * The HTTP client of the Background Agent Job API. Plain undici and zod: no Temporal imports, so it
 * can be read and tested on its own. Every failure leaves as an {@link AgentApiError} with a type
 * from the contract, except a caller's own abort, which is passed through untouched.
 */
import { request, type Dispatcher } from 'undici';
import { staticApiKey, type ApiKeySource } from './api-key.js';
import type { AgentJobRecord } from './types.js';
import { getDispatcher } from './dispatcher.js';
import { AgentApiError } from './errors.js';
import { verdictOf, type ApiOperation } from './failure-policy.js';
import { FailureKind, isSuccess, kindOfNetworkError, kindOfStatus, namesLocation } from './failure-kinds.js';
import { InvalidAgentJobRecordError, parseAgentJobRecord, readableJobId } from './record.js';
import { parseRetryAfter } from './retry-after.js';
import { tracedHttpCall } from './trace.js';
import { withTimeout } from './abort.js';
import { AgentJobError, ErrorName } from '../errors.js';

/** How to reach the API. */
export interface AgentApiClientOptions {
  /** Base URL, e.g. `https://api.mintlify.com` or `http://127.0.0.1:8787`; a path prefix is kept. */
  baseUrl: string;
  /**
   * The admin API key, or a source that can rotate it (e.g. a {@link FileApiKey}). Sent only in the
   * Authorization header; never logged, never in a message. A call the API refuses with 401 is
   * sent once more when the source then has another key, so a rotation fails no call.
   */
  apiKey: string | ApiKeySource;
  /** Connection pool to use. Default: the process-wide one from `getDispatcher()`. */
  dispatcher?: Dispatcher;
  /**
   * Longest time one request may take, body included. Default {@link REQUEST_TIMEOUT_MS}.
   */
  requestTimeoutMs?: number;
}

/** Options every call takes. */
export interface CallOptions {
  /**
   * Aborts the call. The call then rejects promptly with `signal.reason` as it is (an activity's
   * cancellation stays a cancellation), except a `TimeoutError` reason (from `AbortSignal.timeout`),
   * which becomes a retryable `RequestTimeout`.
   */
  signal?: AbortSignal;
  /**
   * Longest time this call may take, when less than the client's `requestTimeoutMs`: a poll's
   * attempt bounds its GET tighter. Cheaper than a timeout signal of the caller's own for the same
   * bound (one timer and one joined signal per call, not two of each). It fails as a retryable
   * `RequestTimeout`, as the client's own bound does.
   */
  timeoutMs?: number;
}

/**
 * Largest response body read: 256 KiB. A record is well under 1 KiB; past the cap the call fails
 * with `UnexpectedResponse` instead of reading megabytes into a worker (and, bounded again by the
 * record budget, into workflow history). Error bodies are read up to the cap for their excerpt.
 */
export const MAX_RESPONSE_BYTES = 256 * 1024;

/**
 * Longest time one request takes, from sending to the last byte of the answer: 60 s. The
 * dispatcher's timeouts are per pause (undici's `bodyTimeout` is the silence between two chunks),
 * so a body that trickles in a byte every few seconds never trips them; this bound does, and it
 * ends inside the activities' 75 s start-to-close timeout, so a slow answer is read (and the job ID
 * in the bytes that did arrive is used) instead of the attempt timing out with nothing known.
 */
export const REQUEST_TIMEOUT_MS = 60_000;

/** Longest excerpt of a response body put into an error message. */
const EXCERPT_LENGTH = 200;
/** Longest project or job ID quoted in a message: IDs are opaque and could be anything. */
const ID_LENGTH = 100;
/** An HTTP header value made of visible ASCII only, which is what an API key or idempotency key is. */
const TOKEN = /^[\x21-\x7e]+$/;

/** One call, as the private helpers see it. */
interface Call {
  operation: ApiOperation;
  method: 'GET' | 'POST';
  projectId: string;
  jobId: string | null;
  prompt?: string;
  idempotencyKey?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
}

/**
 * Client of the three agent job endpoints. Holds no state besides its configuration; safe to share
 * between concurrent activities.
 */
export class AgentApiClient {
  // Private fields: util.inspect and JSON.stringify of a client never show the key.
  readonly #origin: string;
  readonly #base: string;
  readonly #key: ApiKeySource;
  readonly #dispatcher: Dispatcher | undefined;
  readonly #requestTimeoutMs: number;

  /** @throws {TypeError} for a base URL that is not absolute http(s), or an empty or malformed key */
  constructor(options: AgentApiClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch (err) {
      throw new TypeError('baseUrl must be an absolute http(s) URL such as https://api.mintlify.com', {
        cause: err,
      });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`baseUrl must use http or https, not ${url.protocol}`);
    }
    if (typeof options.apiKey === 'string' && !TOKEN.test(options.apiKey)) {
      // The message must not echo the value: it may be a real key with a stray newline.
      throw new TypeError(
        'apiKey must be a non-empty string of visible ASCII characters (no spaces or newlines)',
      );
    }
    this.#origin = url.origin;
    this.#base = url.origin + url.pathname.replace(/\/+$/, '');
    this.#key = typeof options.apiKey === 'string' ? staticApiKey(options.apiKey) : options.apiKey;
    this.#dispatcher = options.dispatcher;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  }

  /**
   * Creates an agent job. `idempotencyKey` goes out as the `Idempotency-Key` header: the API does not
   * document one, but a server that honours it turns a retried ambiguous create into the same job.
   */
  createJob(
    projectId: string,
    prompt: string,
    options: CallOptions & { idempotencyKey: string },
  ): Promise<AgentJobRecord> {
    return this.#call({
      operation: 'createJob',
      method: 'POST',
      projectId,
      jobId: null,
      prompt,
      idempotencyKey: options.idempotencyKey,
      ...callOptions(options),
    });
  }

  /** Reads an agent job. A 404 is a retryable `JobNotFound`: a fresh job may not be readable at once. */
  getJob(projectId: string, jobId: string, options: CallOptions = {}): Promise<AgentJobRecord> {
    return this.#call({ operation: 'getJob', method: 'GET', projectId, jobId, ...callOptions(options) });
  }

  /** Sends a follow-up prompt to an agent job; the API starts a new turn and answers at once. */
  sendMessage(
    projectId: string,
    jobId: string,
    prompt: string,
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<AgentJobRecord> {
    return this.#call({
      operation: 'sendMessage',
      method: 'POST',
      projectId,
      jobId,
      prompt,
      idempotencyKey: options.idempotencyKey,
      ...callOptions(options),
    });
  }

  /** One call, sent once more with a fresher key when the API refused the one it was sent with. */
  async #call(call: Call): Promise<AgentJobRecord> {
    const invalid = this.#checkArguments(call);
    if (invalid !== null) throw invalid;
    const key = this.#key.current();
    try {
      return await this.#send(call, key);
    } catch (err) {
      // A refused key means the request was not applied, so sending it again is safe even for a create.
      if (!(err instanceof AgentApiError) || !err.verdict.refusesKey) throw err;
      const fresher = this.#key.afterRefusal(key);
      if (fresher === null) throw err;
      return this.#send(call, fresher);
    }
  }

  /**
   * One HTTP request and its answer, in its own trace span (src/agent-api/trace.ts), bounded as a
   * whole by {@link REQUEST_TIMEOUT_MS}: the bound's abort reads as a `TimeoutError`, like a
   * caller's `AbortSignal.timeout`.
   */
  #send(call: Call, apiKey: string): Promise<AgentJobRecord> {
    const url = this.#url(call);
    const boundMs = Math.min(call.timeoutMs ?? Infinity, this.#requestTimeoutMs);
    return withTimeout(call.signal, boundMs, (signal) =>
      tracedHttpCall({ ...call, route: routeOf(call), url: new URL(url) }, (traceHeaders, answered) =>
        this.#request({ ...call, signal }, url, apiKey, traceHeaders, answered),
      ),
    );
  }

  async #request(
    call: Call,
    url: string,
    apiKey: string,
    traceHeaders: Record<string, string>,
    answered: (status: number) => void,
  ): Promise<AgentJobRecord> {
    const headers: Record<string, string> = {
      ...traceHeaders,
      authorization: `Bearer ${apiKey}`,
      accept: 'application/json',
    };
    let body: string | undefined;
    if (call.prompt !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify({ prompt: call.prompt });
    }
    if (call.idempotencyKey !== undefined) headers['idempotency-key'] = call.idempotencyKey;

    let response: Dispatcher.ResponseData;
    try {
      response = await request(url, {
        method: call.method,
        headers,
        body,
        signal: call.signal,
        dispatcher: this.#dispatcher ?? getDispatcher(),
      });
    } catch (err) {
      throw this.#networkFailure(call, err, false);
    }

    const { statusCode } = response;
    answered(statusCode);
    if (isSuccess(statusCode)) {
      let body: CappedBody;
      try {
        body = await readCapped(response.body);
      } catch (err) {
        // The server answered success, so the request was applied whatever happened to the body;
        // the bytes that did arrive may still name the job.
        const partial = err instanceof PartialBodyError ? err : null;
        const failure = this.#networkFailure(call, partial?.cause ?? err, true);
        if (call.method !== 'POST' || !(failure instanceof AgentApiError)) throw failure;
        throw this.#unreadable(
          call,
          statusCode,
          `a body that could not be read to its end (${failure.message})`,
          partial?.text ?? '',
          failure,
        );
      }
      if (body.overCap) {
        throw this.#unexpected(
          call,
          statusCode,
          `a body larger than the client's cap of ${MAX_RESPONSE_BYTES} bytes (an agent job record is under 1 KiB)`,
          body.text,
          null,
          // The same record comes again at every read: not a blip to wait out.
          FailureKind.InvalidRecord,
        );
      }
      return this.#parseRecord(call, statusCode, body.text);
    }
    const text = await this.#readErrorBody(call, response);
    throw this.#httpFailure(call, statusCode, response.headers, text);
  }

  /** Arguments that would address another URL or make an invalid header fail before any request. */
  #checkArguments(call: Call): AgentApiError | null {
    const problem = argumentProblem(call);
    if (problem === null) return null;
    return new AgentApiError({
      kind: FailureKind.NotSendable,
      operation: call.operation,
      status: null,
      retryAfterMs: null,
      message: `${describe(call)} was not sent: ${problem}`,
    });
  }

  #url(call: Call): string {
    // encodeURIComponent leaves no `$`, so no replacement pattern can appear in the values.
    const path = routeOf(call)
      .replace('{projectId}', encodeURIComponent(call.projectId))
      .replace('{jobId}', encodeURIComponent(call.jobId ?? ''));
    return this.#base + path;
  }

  /**
   * A failure without a usable response. `afterResponse` marks a failure while reading a success
   * body: the request was applied, whatever the error code says.
   */
  #networkFailure(call: Call, err: unknown, afterResponse: boolean): unknown {
    const reason: unknown = call.signal?.aborted ? call.signal.reason : undefined;
    if (call.signal?.aborted && !isTimeoutReason(reason)) {
      // The caller's own abort (an activity cancellation, a shutdown): not ours to reinterpret.
      return reason;
    }
    if (call.signal?.aborted) {
      return new AgentApiError({
        kind: FailureKind.NoAnswerInTime,
        operation: call.operation,
        status: null,
        retryAfterMs: null,
        message: `${describe(call)} failed: the caller's timeout aborted it before an answer from ${this.#origin}${ambiguity(call)}`,
        cause: reason,
      });
    }
    const { kind, what } = kindOfNetworkError(err);
    const mayHaveTakenEffect = afterResponse || verdictOf(kind, call.operation).mayHaveBeenApplied;
    const notSent = mayHaveTakenEffect ? ambiguity(call) : `; nothing was sent${tlsHint(kind)}`;
    return new AgentApiError({
      kind,
      operation: call.operation,
      status: null,
      retryAfterMs: null,
      applied: mayHaveTakenEffect,
      message: `${describe(call)} failed: ${what} (${this.#origin})${notSent}`,
      cause: err,
    });
  }

  /**
   * The body of an error response, for the message only. A failure to read it does not change the
   * outcome (the status decides), so it is reported in the text instead of thrown; a caller's abort
   * still wins.
   */
  async #readErrorBody(call: Call, response: Dispatcher.ResponseData): Promise<string> {
    try {
      return (await readCapped(response.body)).text;
    } catch (err) {
      if (call.signal?.aborted && !isTimeoutReason(call.signal.reason)) throw call.signal.reason;
      return `(body unreadable: ${kindOfNetworkError(err).what})`;
    }
  }

  #parseRecord(call: Call, status: number, text: string): AgentJobRecord {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw this.#unexpected(call, status, 'a body that is not JSON', text, err, FailureKind.NotARecord);
    }
    try {
      return parseAgentJobRecord(json);
    } catch (err) {
      if (!(err instanceof InvalidAgentJobRecordError)) throw err;
      throw this.#unexpected(
        call,
        status,
        `a body that is not an agent job record (${err.message})`,
        text,
        err,
        FailureKind.InvalidRecord,
      );
    }
  }

  /** A 2xx whose body is not a record: retryable for a get, {@link #unreadable} for a create or message. */
  #unexpected(
    call: Call,
    status: number,
    what: string,
    text: string,
    err: unknown,
    kind: FailureKind,
  ): AgentApiError {
    // JSON.parse quotes the body in its message: rebuild the cause from redacted text.
    const cause = err instanceof SyntaxError ? new SyntaxError(this.#excerpt(err.message)) : err;
    if (call.method === 'POST') return this.#unreadable(call, status, what, text, cause, kind);
    return new AgentApiError({
      kind,
      operation: call.operation,
      status,
      retryAfterMs: null,
      // A 2xx means the server took the request; only the body got lost.
      applied: true,
      message: `${describe(call)} got HTTP ${status} with ${what}${ambiguity(call)}: ${JSON.stringify(this.#excerpt(text))}`,
      cause: cause ?? undefined,
    });
  }

  /**
   * A create or follow-up message answered 2xx with a body that is not a record. The request took
   * effect, and the API documents no idempotency key: it must not be sent again. The failure names
   * the agent job when the call or the answer does, so the caller can go on with it.
   */
  #unreadable(
    call: Call,
    status: number,
    what: string,
    text: string,
    cause: unknown,
    kind: FailureKind = FailureKind.NotARecord,
  ): AgentApiError {
    const jobId = call.jobId ?? readableJobId(text);
    const project = quote(call.projectId);
    let effect: string;
    if (call.operation === 'sendMessage') {
      effect = `the follow-up message to agent job ${quote(jobId ?? '')} was applied, and was not sent again (a second message would start a second turn)`;
    } else if (jobId === null) {
      effect = `the agent job was created, but the answer names no job ID. The create was not sent again (the API documents no idempotency key, so a second create could make a second agent job): find the new job in project ${project} and pass its ID as jobId to follow it`;
    } else {
      effect = `agent job ${quote(jobId)} was created, and the create was not sent again (the API documents no idempotency key, so a second create could make a second agent job)`;
    }
    const excerpt = text === '' ? '' : `: ${JSON.stringify(this.#excerpt(text))}`;
    return new AgentApiError({
      kind,
      operation: call.operation,
      status,
      retryAfterMs: null,
      jobId,
      message: `${describe(call)} got HTTP ${status} with ${what}; ${effect}${excerpt}`,
      cause: cause ?? undefined,
    });
  }

  #httpFailure(
    call: Call,
    status: number,
    headers: Dispatcher.ResponseData['headers'],
    text: string,
  ): AgentApiError {
    const kind = kindOfStatus(status);
    const verdict = verdictOf(kind, call.operation);
    const retryAfterMs = verdict.readsRetryAfter ? parseRetryAfter(firstValue(headers['retry-after'])) : null;
    const serverMessage = namesLocation(kind) ? '' : this.#excerpt(serverText(text));
    const parts = [`${describe(call)} failed with HTTP ${status}`];
    if (serverMessage !== '') parts[0] += `: ${serverMessage}`;
    parts.push(
      namesLocation(kind)
        ? this.#redirectHint(call, kind, firstValue(headers.location))
        : hint(kind, call, retryAfterMs),
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
    const to = location === undefined ? 'no Location' : `Location ${JSON.stringify(this.#excerpt(location))}`;
    const sent =
      call.method === 'POST' && verdictOf(kind, call.operation).mayHaveBeenApplied
        ? 'a 303 means the server processed the request'
        : 'the request was not processed and is not sent again';
    return `The server redirected (${to}): AGENT_API_BASE_URL (${this.#origin}) does not point at the API itself; ${sent}`;
  }

  /** One line, at most {@link EXCERPT_LENGTH} characters, with any key cut out should a server echo it. */
  #excerpt(text: string): string {
    const line = this.#key
      .known()
      .reduce((redacted, key) => redacted.split(key).join('[redacted]'), text)
      // Control and format characters (escape sequences, bidi overrides) never reach a person raw.
      .replace(/[\s\p{Cc}\p{Cf}]+/gu, ' ')
      .trim();
    return line.length <= EXCERPT_LENGTH ? line : `${line.slice(0, EXCERPT_LENGTH - 1)}…`;
  }
}

/** A response body read up to {@link MAX_RESPONSE_BYTES}. */
interface CappedBody {
  /** The body, or its first {@link MAX_RESPONSE_BYTES} bytes when it is longer. */
  text: string;
  /** The body was longer than the cap; the rest was not read. */
  overCap: boolean;
}

/** A body that stopped before its end: what arrived, and why it stopped (the `cause`). */
class PartialBodyError extends AgentJobError {
  constructor(
    readonly text: string,
    cause: unknown,
  ) {
    super(ErrorName.PartialBody, 'the response body stopped before its end', { cause });
  }
}

/**
 * Reads a body up to the cap, then stops reading and closes it.
 * @throws {PartialBodyError} with the bytes read so far when the body fails before its end
 */
async function readCapped(body: Dispatcher.ResponseData['body']): Promise<CappedBody> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for await (const chunk of body) {
      const buffer = chunk as Buffer;
      if (bytes + buffer.length > MAX_RESPONSE_BYTES) {
        chunks.push(buffer.subarray(0, MAX_RESPONSE_BYTES - bytes));
        body.destroy();
        return { text: Buffer.concat(chunks).toString('utf8'), overCap: true };
      }
      chunks.push(buffer);
      bytes += buffer.length;
    }
  } catch (err) {
    throw new PartialBodyError(Buffer.concat(chunks).toString('utf8'), err);
  }
  return { text: Buffer.concat(chunks).toString('utf8'), overCap: false };
}

/**
 * Why the call cannot be sent, or null. An empty ID, `.` or `..` would address another path: URL
 * parsing removes dot segments even when percent-encoded.
 */
function argumentProblem(call: Call): string | null {
  for (const [name, id] of [
    ['projectId', call.projectId],
    ['jobId', call.jobId],
  ] as const) {
    if (id === null) continue;
    if (id === '' || id === '.' || id === '..') return `${name} ${JSON.stringify(id)} is not a usable ID`;
  }
  if (call.idempotencyKey !== undefined && !TOKEN.test(call.idempotencyKey)) {
    return 'idempotencyKey must be visible ASCII without spaces';
  }
  return null;
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

/** What a person should do about a failure of this kind. */
function hint(kind: FailureKind, call: Call, retryAfterMs: number | null): string {
  const after =
    retryAfterMs === null ? '' : `; the server asks to retry after ${Math.ceil(retryAfterMs / 1000)}s`;
  switch (kind) {
    case FailureKind.KeyRefused:
      return 'The API refused the admin API key (unknown, expired or revoked): check AGENT_API_KEY (or the file AGENT_API_KEY_FILE names) and that the key belongs to the organization that owns the project';
    case FailureKind.Forbidden:
      return "The API refused the admin API key for this request (a missing read or write scope, or a caller outside the key's IP allow-list): check the key's scopes and allow-list";
    case FailureKind.NotFound:
      return call.operation === 'createJob'
        ? 'Check the project ID, and that the admin API key belongs to the organization that owns it'
        : `No agent job ${JSON.stringify(call.jobId)} in this project (a job created a moment ago may not be readable yet)`;
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

/** What to check after a failed TLS handshake. */
function tlsHint(kind: FailureKind): string {
  return kind === FailureKind.TlsRejected
    ? ": check that AGENT_API_BASE_URL is the API's https address, and for a private CA set NODE_EXTRA_CA_CERTS"
    : '';
}

/**
 * The human part of an error body: `message`, `error` (a string or an object with a message) and
 * `code` of a JSON object, or the text as it is. Only ever used for the message.
 */
function serverText(text: string): string {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // Not JSON: a proxy's page or plain text is shown as it is.
    return text;
  }
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

/** The {@link CallOptions} a call carries. */
function callOptions({ signal, timeoutMs }: CallOptions): Pick<Call, 'signal' | 'timeoutMs'> {
  return { signal, timeoutMs };
}

/** `AbortSignal.timeout()` aborts with a DOMException named TimeoutError. */
function isTimeoutReason(reason: unknown): boolean {
  return (
    typeof reason === 'object' && reason !== null && (reason as { name?: unknown }).name === 'TimeoutError'
  );
}

/** The path of a call with its IDs as placeholders: the HTTP span's name and `url.template`. */
function routeOf(call: Call): string {
  if (call.operation === 'createJob') return '/v2/agent/{projectId}/job';
  if (call.operation === 'getJob') return '/v2/agent/{projectId}/job/{jobId}';
  return '/v2/agent/{projectId}/job/{jobId}/message';
}
