/**
 * The HTTP client of the Background Agent Job API. Plain undici and zod: no Temporal imports, so it
 * can be read and tested on its own. Every failure leaves as an {@link AgentApiError} with a type
 * from the contract, except a caller's own abort, which is passed through untouched.
 */
import { request, type Dispatcher } from 'undici';
import { staticApiKey, TOKEN, type ApiKeySource } from './api-key.js';
import type { AgentJobRecord } from './types.js';
import { getDispatcher } from './dispatcher.js';
import { AgentApiError, CallFailures, isTimeoutReason, type Call } from './errors.js';
import { FailureKind, isSuccess, kindOfNetworkError } from '../failure-policy/kinds.js';
import { InvalidAgentJobRecordError, parseAgentJobRecord } from './record.js';
import { tracedHttpCall } from './trace.js';
import { withTimeout } from './abort.js';

/** How to reach the API. */
export interface AgentApiClientOptions {
  /** Base URL, e.g. `https://api.mintlify.com` or `http://127.0.0.1:8787`; a path prefix is kept. */
  baseUrl: string;
  /**
   * The admin API key, or a source that can rotate it (a {@link FileApiKey}): sent only in the
   * Authorization header, and once more with the source's next key when the API refuses it.
   */
  apiKey: string | ApiKeySource;
  /** Connection pool to use. Default: the process-wide one from `getDispatcher()`. */
  dispatcher?: Dispatcher;
  /** Longest time one request may take, body included. Default {@link REQUEST_TIMEOUT_MS}. */
  requestTimeoutMs?: number;
}

/** Options every call takes. */
export interface CallOptions {
  /**
   * Aborts the call, which rejects with `signal.reason` as it is (a cancellation stays one), except
   * a `TimeoutError` reason, which becomes a retryable `RequestTimeout`.
   */
  signal?: AbortSignal;
  /** Longest time this call may take, when less than `requestTimeoutMs` (why not a signal: ./abort.ts). */
  timeoutMs?: number;
}

/**
 * Largest response body read: 256 KiB (a record is under 1 KiB). Past it a call fails instead of
 * reading megabytes into a worker; an error body is read up to it for its excerpt.
 */
export const MAX_RESPONSE_BYTES = 256 * 1024;

/**
 * Longest time one request takes, to the last byte of the answer: 60 s. The dispatcher's timeouts
 * are per pause, so a trickling body never trips them; this does, inside the activities' 75 s
 * attempt, so the job ID in the bytes that arrived is used (decision 0009).
 */
export const REQUEST_TIMEOUT_MS = 60_000;

/** Longest excerpt of a response body put into an error message. */
const EXCERPT_LENGTH = 200;

/** Client of the three agent job endpoints; no state but its configuration, so shared by all activities. */
export class AgentApiClient {
  // Private fields: util.inspect and JSON.stringify of a client never show the key.
  readonly #origin: string;
  readonly #base: string;
  readonly #key: ApiKeySource;
  readonly #dispatcher: Dispatcher | undefined;
  readonly #requestTimeoutMs: number;
  /** What a failed call becomes, its messages redacted by {@link #excerpt}. */
  readonly #failures: CallFailures;

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
    this.#failures = new CallFailures(this.#origin, (text) => this.#excerpt(text));
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
    return this.#call({ ...options, operation: 'createJob', method: 'POST', projectId, jobId: null, prompt });
  }

  /** Reads an agent job. A 404 is a retryable `JobNotFound`: a fresh job may not be readable at once. */
  getJob(projectId: string, jobId: string, options: CallOptions = {}): Promise<AgentJobRecord> {
    return this.#call({ ...options, operation: 'getJob', method: 'GET', projectId, jobId });
  }

  /** Sends a follow-up prompt to an agent job; the API starts a new turn and answers at once. */
  sendMessage(
    projectId: string,
    jobId: string,
    prompt: string,
    options: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<AgentJobRecord> {
    return this.#call({ ...options, operation: 'sendMessage', method: 'POST', projectId, jobId, prompt });
  }

  /** One call, sent once more with a fresher key when the API refused the one it was sent with. */
  async #call(call: Call): Promise<AgentJobRecord> {
    // Arguments that would address another URL or make an invalid header fail before any request.
    const problem = argumentProblem(call);
    if (problem !== null) throw this.#failures.notSendable(call, problem);
    const key = this.#key.current();
    try {
      return await this.#send(call, key);
    } catch (err) {
      // A refused key means the request was not applied, so sending it again is safe even for a create.
      if (!(err instanceof AgentApiError) || err.verdict.bound !== 'credentials') throw err;
      const fresher = this.#key.afterRefusal(key);
      if (fresher === null) throw err;
      return this.#send(call, fresher);
    }
  }

  /** One HTTP request and its answer, in a trace span, bounded as a whole by {@link REQUEST_TIMEOUT_MS}. */
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
      throw this.#failures.network(call, err, false);
    }

    const { statusCode } = response;
    answered(statusCode);
    if (isSuccess(statusCode)) {
      const body = await readCapped(response.body);
      if ('error' in body) {
        // The server answered success, so the request was applied whatever happened to the body;
        // the bytes that did arrive may still name the job.
        const failure = this.#failures.network(call, body.error, true);
        if (call.method !== 'POST' || !(failure instanceof AgentApiError)) throw failure;
        throw this.#failures.unreadable(
          call,
          statusCode,
          `a body that could not be read to its end (${failure.message})`,
          body.text,
          failure,
        );
      }
      if (body.overCap) {
        throw this.#failures.unreadable(
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
    throw this.#failures.http(call, statusCode, response.headers, text);
  }

  #url(call: Call): string {
    // encodeURIComponent leaves no `$`, so no replacement pattern can appear in the values.
    const path = routeOf(call)
      .replace('{projectId}', encodeURIComponent(call.projectId))
      .replace('{jobId}', encodeURIComponent(call.jobId ?? ''));
    return this.#base + path;
  }

  /**
   * The body of an error response, for the message only: a failure to read it is reported in the
   * text (the status decides the outcome); a caller's abort still wins.
   */
  async #readErrorBody(call: Call, response: Dispatcher.ResponseData): Promise<string> {
    const body = await readCapped(response.body);
    if (!('error' in body)) return body.text;
    if (call.signal?.aborted && !isTimeoutReason(call.signal.reason)) throw call.signal.reason;
    return `(body unreadable: ${kindOfNetworkError(body.error).what})`;
  }

  #parseRecord(call: Call, status: number, text: string): AgentJobRecord {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw this.#failures.unreadable(call, status, 'a body that is not JSON', text, err);
    }
    try {
      return parseAgentJobRecord(json);
    } catch (err) {
      if (!(err instanceof InvalidAgentJobRecordError)) throw err;
      throw this.#failures.unreadable(
        call,
        status,
        `a body that is not an agent job record (${err.message})`,
        text,
        err,
        FailureKind.InvalidRecord,
      );
    }
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

/**
 * Reads a body up to {@link MAX_RESPONSE_BYTES}, then stops reading and closes it (`overCap`); a
 * body that fails before its end gives what arrived and the `error`.
 */
async function readCapped(
  body: Dispatcher.ResponseData['body'],
): Promise<{ text: string; overCap: boolean } | { text: string; error: unknown }> {
  const chunks: Buffer[] = [];
  const text = () => Buffer.concat(chunks).toString('utf8');
  let bytes = 0;
  try {
    for await (const chunk of body) {
      const buffer = chunk as Buffer;
      if (bytes + buffer.length > MAX_RESPONSE_BYTES) {
        chunks.push(buffer.subarray(0, MAX_RESPONSE_BYTES - bytes));
        body.destroy();
        return { text: text(), overCap: true };
      }
      chunks.push(buffer);
      bytes += buffer.length;
    }
  } catch (error) {
    return { text: text(), error };
  }
  return { text: text(), overCap: false };
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

/** The path of a call with its IDs as placeholders: the HTTP span's name and `url.template`. */
function routeOf(call: Call): string {
  if (call.operation === 'createJob') return '/v2/agent/{projectId}/job';
  if (call.operation === 'getJob') return '/v2/agent/{projectId}/job/{jobId}';
  return '/v2/agent/{projectId}/job/{jobId}/message';
}
