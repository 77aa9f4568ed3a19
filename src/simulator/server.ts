/**
 * The simulator's HTTP server: the three agent job endpoints with auth, validation, rate limit,
 * idempotency and faults, plus unauthenticated `/_sim/` admin endpoints. It binds to loopback by
 * default because those admin endpoints have no auth.
 */
import {
  createServer,
  STATUS_CODES,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { FaultState } from './faults.js';
import { JobStore, type CreateResult, type JobStats } from './jobs.js';
import { parseScenario, resolveScenario, type Endpoint, type FaultRule, type Scenario } from './scenario.js';

/** How to start a simulator. */
export interface SimulatorOptions {
  /** Interface to bind. Default 127.0.0.1: the `/_sim/` endpoints have no auth. */
  host?: string;
  /** Port; default 0, a free one (see {@link RunningSimulator.url}). */
  port?: number;
  /** Accepted bearer keys. */
  apiKeys: string[];
  /** Creates allowed per project in a rolling hour; default 100 (the API's limit); 0 = unlimited. */
  createsPerProjectPerHour?: number;
  /**
   * Uses (creates and follow-up messages) per project per rolling window, in seconds; replaces
   * `createsPerProjectPerHour` when set. `uses` 0 = unlimited.
   */
  budget?: { uses: number; windowSeconds: number };
  /** Send `Retry-After` on the budget's 429s; default true. The live API documents none. */
  retryAfter?: boolean;
  /** Scenario of every project without its own, over the built-in defaults. */
  defaultScenario?: Partial<Scenario>;
  /** Scenarios by project ID, over `defaultScenario`. */
  scenarios?: Record<string, Partial<Scenario>>;
  /** Terminal jobs become archived this many ms after their turn ended; default null (never). */
  archiveAfterMs?: number | null;
  /**
   * Honour `Idempotency-Key`: a create repeating a project's key and prompt answers 200 with the
   * same job, with another prompt 422, and a message repeating a key on a job starts no turn.
   * Default false, as the live API: the key is counted in the stats and otherwise ignored, so every
   * create is a new job and every message a new turn.
   */
  honourIdempotencyKey?: boolean;
  /** Receives one JSON line per request; false for none; default stdout. */
  log?: ((line: string) => void) | false;
}

/** What {@link RunningSimulator.stats} reports. Admin (`/_sim/`) requests are not counted. */
export interface SimulatorStats {
  /** Jobs created in total. */
  jobsCreated: number;
  /** Jobs created per project ID. */
  jobsPerProject: Record<string, number>;
  /**
   * Jobs created per create `Idempotency-Key` value: more than 1 is a duplicate agent job (keys are
   * ignored by default, so every create that reaches the store with the key makes one).
   */
  jobsPerIdempotencyKey: Record<string, number>;
  /**
   * Creates accepted per `Idempotency-Key` value: those the store processed (made a job, or with
   * keys honoured replayed one), not those refused (auth, validation, 422, 429) or stopped by a
   * fault before processing. With keys ignored it equals {@link jobsPerIdempotencyKey}; with keys
   * honoured the difference is the replays, so a test sees a retried create either way.
   */
  createsPerIdempotencyKey: Record<string, number>;
  /**
   * Follow-up messages accepted per `Idempotency-Key` value: those the store processed (started a
   * turn, or with keys honoured replayed one), not those refused or stopped by a fault first.
   */
  messagesPerIdempotencyKey: Record<string, number>;
  /** API requests per endpoint (`create`, `get`, `message`, `unknown`). */
  requestsPerEndpoint: Record<string, number>;
  /**
   * API requests per answered status, or per `hang`, `drop`, `reset` for those without a full
   * answer (`reset` counts `reset-after-store` and `reset-mid-body`).
   */
  requestsPerStatus: Record<string, number>;
  /** API requests per project ID, then per endpoint (`create`, `get`, `message`). */
  requestsPerProjectEndpoint: Record<string, Partial<Record<Endpoint, number>>>;
  /** Every job. */
  jobs: JobStats[];
}

/** A simulator that is listening. */
export interface RunningSimulator {
  /** `http://127.0.0.1:<port>`, with the port actually bound. */
  url: string;
  /** Replaces the project's scenario (over the default one) and restarts its fault counters. */
  setScenario(projectId: string, scenario: Partial<Scenario>): void;
  /** Archives a job now. @throws {Error} when the job does not exist */
  archiveJob(projectId: string, jobId: string): void;
  /**
   * Replaces the accepted bearer keys, as a key rotation at the live service does: a key left out
   * is refused from the next request on. Also `PUT /_sim/keys` with `{"apiKeys": [...]}`.
   * @throws {Error} for an empty list
   */
  setApiKeys(apiKeys: string[]): void;
  /** Counts so far. */
  stats(): SimulatorStats;
  /** Closes the server and destroys every open socket, hanging requests included. */
  stop(): Promise<void>;
}

/** Largest request body read; larger ones get 413. A prompt is text, not an upload. */
const MAX_BODY_BYTES = 1024 * 1024;

/** A decided answer. */
interface Reply {
  status: number;
  body: string;
  contentType?: string;
  headers?: Record<string, string>;
}

/** What a request turned out to be, for the log line and the stats. */
interface Exchange {
  endpoint: Endpoint | 'admin' | 'unknown';
  projectId: string | null;
  outcome: string | null;
  fault: FaultRule['kind'] | null;
}

/** A matched route. */
type Route =
  | { endpoint: 'create'; projectId: string }
  | { endpoint: 'get'; projectId: string; jobId: string }
  | { endpoint: 'message'; projectId: string; jobId: string }
  | { endpoint: 'admin-stats' }
  | { endpoint: 'admin-scenario'; projectId: string }
  | { endpoint: 'admin-archive'; projectId: string; jobId: string }
  | { endpoint: 'admin-keys' };

/**
 * Starts a simulator of the Background Agent Job API.
 *
 * @returns once it listens
 */
export async function startSimulator(options: SimulatorOptions): Promise<RunningSimulator> {
  const simulator = new Simulator(options);
  return simulator.listen(options.host ?? '127.0.0.1', options.port ?? 0);
}

/** Server state: jobs, scenarios, fault counters, request counts, pending latency timers. */
class Simulator {
  readonly #server: Server;
  #keys: ReadonlySet<string>;
  readonly #store: JobStore;
  readonly #defaultScenario: Partial<Scenario>;
  readonly #scenarios = new Map<string, Partial<Scenario>>();
  readonly #faults = new Map<string, FaultState>();
  readonly #perEndpoint = new Map<string, number>();
  readonly #perStatus = new Map<string, number>();
  readonly #perProject = new Map<string, Map<string, number>>();
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #log: ((line: string) => void) | null;
  readonly #retryAfter: boolean;

  constructor(options: SimulatorOptions) {
    if (options.apiKeys.length === 0) throw new Error('startSimulator: apiKeys must name at least one key');
    this.#keys = new Set(options.apiKeys);
    const budget = options.budget
      ? { uses: options.budget.uses, windowMs: options.budget.windowSeconds * 1000 }
      : { uses: options.createsPerProjectPerHour ?? 100, windowMs: 60 * 60 * 1000 };
    this.#store = new JobStore(budget, options.archiveAfterMs ?? null, options.honourIdempotencyKey ?? false);
    this.#retryAfter = options.retryAfter ?? true;
    this.#defaultScenario = options.defaultScenario ?? {};
    for (const [projectId, scenario] of Object.entries(options.scenarios ?? {})) {
      this.#scenarios.set(projectId, scenario);
    }
    this.#log =
      options.log === false
        ? null
        : (options.log ?? ((line: string) => void process.stdout.write(`${line}\n`)));
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  async listen(host: string, port: number): Promise<RunningSimulator> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address() as AddressInfo;
    const shownHost = address.address.includes(':') ? `[${address.address}]` : address.address;
    return {
      url: `http://${shownHost}:${address.port}`,
      setScenario: (projectId, scenario) => this.#setScenario(projectId, scenario),
      archiveJob: (projectId, jobId) => this.#archive(projectId, jobId),
      setApiKeys: (apiKeys) => {
        const keys = parseKeys(JSON.stringify({ apiKeys }));
        if (typeof keys === 'string') throw new Error(`setApiKeys: ${keys}`);
        this.#keys = new Set(keys);
      },
      stats: () => this.#stats(),
      stop: () => this.#stop(),
    };
  }

  #setScenario(projectId: string, scenario: Partial<Scenario>): void {
    this.#scenarios.set(projectId, scenario);
    // A new scenario starts its "first N" counts from zero.
    this.#faults.delete(projectId);
  }

  #scenario(projectId: string): Scenario {
    return resolveScenario(this.#defaultScenario, this.#scenarios.get(projectId));
  }

  #faultState(projectId: string, scenario: Scenario): FaultState {
    let state = this.#faults.get(projectId);
    if (state === undefined) {
      state = new FaultState(scenario.faults, projectId);
      this.#faults.set(projectId, state);
    }
    return state;
  }

  #archive(projectId: string, jobId: string): void {
    const job = this.#store.find(projectId, jobId);
    if (job === undefined) throw new Error(`no job ${jobId} in project ${projectId}`);
    this.#store.archive(job, Date.now());
  }

  #stats(): SimulatorStats {
    return {
      jobsCreated: this.#store.size,
      jobsPerProject: this.#store.jobsPerProject(),
      jobsPerIdempotencyKey: this.#store.jobsPerIdempotencyKey(),
      createsPerIdempotencyKey: this.#store.createsPerIdempotencyKey(),
      messagesPerIdempotencyKey: this.#store.messagesPerIdempotencyKey(),
      requestsPerEndpoint: Object.fromEntries(this.#perEndpoint),
      requestsPerStatus: Object.fromEntries(this.#perStatus),
      requestsPerProjectEndpoint: Object.fromEntries(
        [...this.#perProject].map(([projectId, counts]) => [projectId, Object.fromEntries(counts)]),
      ),
      jobs: this.#store.jobStats(Date.now()),
    };
  }

  async #stop(): Promise<void> {
    // Latency timers and trickle intervals alike: clearTimeout clears both kinds.
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    const closed = new Promise<void>((resolve, reject) => {
      this.#server.close((err) => (err === undefined ? resolve() : reject(err)));
    });
    // close() alone waits for open connections: hanging requests and idle keep-alive sockets.
    this.#server.closeAllConnections();
    await closed;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const started = performance.now();
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const exchange: Exchange = { endpoint: 'unknown', projectId: null, outcome: null, fault: null };
    res.on('close', () => this.#logLine(req.method ?? '', path, res, exchange, started));
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      const body = size > MAX_BODY_BYTES ? null : Buffer.concat(chunks).toString('utf8');
      this.#dispatch(req, res, path, body, exchange);
    });
  }

  #dispatch(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    body: string | null,
    exchange: Exchange,
  ): void {
    const route = matchRoute(req.method ?? '', path);
    if (route === null || typeof route === 'number') {
      this.#count(exchange, 'unknown', null);
      const status = route ?? 404;
      this.#send(
        res,
        exchange,
        0,
        errorReply(status, status === 405 ? 'method not allowed' : 'no such route'),
      );
      return;
    }
    if (route.endpoint.startsWith('admin')) {
      exchange.endpoint = 'admin';
      this.#send(res, exchange, 0, this.#admin(route, body));
      return;
    }
    this.#api(req, res, route, body, exchange);
  }

  #admin(route: Route, body: string | null): Reply {
    if (route.endpoint === 'admin-stats') return jsonReply(200, this.#stats());
    if (route.endpoint === 'admin-scenario') {
      let scenario: Partial<Scenario>;
      try {
        scenario = parseScenario(JSON.parse(body ?? ''));
      } catch (err) {
        return errorReply(400, `invalid scenario: ${(err as Error).message}`);
      }
      this.#setScenario(route.projectId, scenario);
      return jsonReply(200, { projectId: route.projectId, scenario: this.#scenario(route.projectId) });
    }
    if (route.endpoint === 'admin-archive') {
      const job = this.#store.find(route.projectId, route.jobId);
      if (job === undefined) return errorReply(404, 'job not found');
      this.#store.archive(job, Date.now());
      return jsonReply(200, this.#store.record(job, Date.now()));
    }
    if (route.endpoint === 'admin-keys') {
      const keys = parseKeys(body);
      if (typeof keys === 'string') return errorReply(400, keys);
      this.#keys = new Set(keys);
      // The keys are secrets even here: the answer and the log line carry their count only.
      return jsonReply(200, { apiKeys: keys.length });
    }
    return errorReply(404, 'no such route');
  }

  #api(
    req: IncomingMessage,
    res: ServerResponse,
    route: Route,
    body: string | null,
    exchange: Exchange,
  ): void {
    if (route.endpoint !== 'create' && route.endpoint !== 'get' && route.endpoint !== 'message') return;
    this.#count(exchange, route.endpoint, route.projectId);
    if (!this.#authorized(req.headers.authorization)) {
      this.#send(res, exchange, 0, errorReply(401, 'missing or invalid bearer token'));
      return;
    }
    const scenario = this.#scenario(route.projectId);
    const fault = this.#faultState(route.projectId, scenario).pick(route.endpoint, Date.now());
    exchange.fault = fault?.kind ?? null;
    const early = fault === null ? null : this.#faultBeforeHandling(fault, res, exchange);
    if (early === 'done') return;
    if (early !== null) {
      this.#send(res, exchange, scenario.latencyMs, early);
      return;
    }
    const reply = this.#handleApi(req, route, body, scenario);
    if (fault?.kind === 'reset-after-store') {
      exchange.outcome = 'reset';
      this.#after(fault.afterMs ?? 0, () => res.socket?.resetAndDestroy());
      return;
    }
    if (fault?.kind === 'slow') {
      this.#send(res, exchange, scenario.latencyMs + fault.ms, reply);
      return;
    }
    if (fault?.kind === 'oversized' && reply.status < 300) {
      this.#send(res, exchange, scenario.latencyMs, { ...reply, body: pad(reply.body, fault.bytes) });
      return;
    }
    if (fault?.kind === 'altered' && reply.status < 300) {
      this.#send(res, exchange, scenario.latencyMs, { ...reply, body: alter(reply.body, fault) });
      return;
    }
    if (fault?.kind === 'trickle' && reply.status < 300) {
      this.#after(scenario.latencyMs, () => this.#trickle(res, exchange, reply, fault));
      return;
    }
    if (fault?.kind === 'reset-mid-body' && reply.status < 300) {
      this.#after(scenario.latencyMs, () => this.#resetMidBody(res, exchange, reply, fault.bytes));
      return;
    }
    if (fault?.kind === 'truncated') {
      this.#send(res, exchange, scenario.latencyMs, { ...reply, status: 200, body: truncate(reply.body) });
      return;
    }
    this.#send(res, exchange, scenario.latencyMs, reply);
  }

  /** Faults that replace the handler: a reply, or 'done' when the socket was dealt with. */
  #faultBeforeHandling(fault: FaultRule, res: ServerResponse, exchange: Exchange): Reply | 'done' | null {
    switch (fault.kind) {
      case 'status':
        return errorReply(
          fault.status,
          fault.message ?? STATUS_CODES[fault.status] ?? 'error',
          retryAfter(fault),
        );
      case 'hang':
        // Nothing is written; stop() or the client's own timeout ends it.
        exchange.outcome = 'hang';
        this.#bump(this.#perStatus, 'hang');
        return 'done';
      case 'drop':
        exchange.outcome = 'drop';
        this.#bump(this.#perStatus, 'drop');
        res.socket?.destroy();
        return 'done';
      case 'html':
        return {
          status: fault.status,
          contentType: 'text/html; charset=utf-8',
          body: htmlPage(fault.status),
        };
      case 'truncated':
        return fault.status === 502
          ? { status: 502, body: truncate(JSON.stringify({ error: 'bad gateway' })) }
          : null;
      case 'reset-after-store':
        this.#bump(this.#perStatus, 'reset');
        return null;
      case 'altered':
      case 'oversized':
      case 'slow':
      case 'trickle':
      case 'reset-mid-body':
        // Handled as usual; the change, the padding, the delay or the cut goes onto the real reply.
        return null;
    }
  }

  #handleApi(req: IncomingMessage, route: Route, body: string | null, scenario: Scenario): Reply {
    const now = Date.now();
    if (route.endpoint === 'get') {
      const job = this.#store.find(route.projectId, route.jobId);
      if (job !== undefined) this.#store.noteRequest(job, 'get', now);
      const record = job === undefined ? null : this.#store.read(job, now);
      return record === null ? errorReply(404, 'agent job not found') : jsonReply(200, record);
    }
    const prompt = readPrompt(req, body);
    if (typeof prompt !== 'string') return prompt;
    const key = headerValue(req.headers['idempotency-key']);
    if (route.endpoint === 'message') {
      const job = this.#store.find(route.projectId, route.jobId);
      if (job === undefined) return errorReply(404, 'agent job not found');
      this.#store.noteRequest(job, 'message', now);
      const limited = this.#store.admitMessage(job, key, now);
      if (limited?.kind === 'rate-limited') return this.#rateLimited(limited);
      return jsonReply(200, this.#store.message(job, key, scenario, now));
    }
    if (route.endpoint !== 'create') return errorReply(404, 'no such route');
    if (!scenario.projectExists) return errorReply(404, 'project not found');
    const result = this.#store.create(route.projectId, prompt, key, scenario, now);
    switch (result.kind) {
      case 'created':
        return jsonReply(201, this.#store.record(result.job, now));
      case 'replayed':
        // 200, not 201: the same job, and nothing new was created.
        return jsonReply(200, this.#store.record(result.job, now));
      case 'key-reused':
        return errorReply(422, 'Idempotency-Key was already used with a different prompt');
      case 'rate-limited':
        return this.#rateLimited(result);
    }
  }

  #rateLimited(result: CreateResult & { kind: 'rate-limited' }): Reply {
    return errorReply(
      429,
      `rate limit: ${result.limit} creates and follow-up messages per project per ${result.windowSeconds}s`,
      this.#retryAfter ? { 'retry-after': String(result.retryAfterSeconds) } : undefined,
    );
  }

  #authorized(header: string | undefined): boolean {
    const match = /^Bearer (.+)$/i.exec(header ?? '');
    return match?.[1] !== undefined && this.#keys.has(match[1]);
  }

  /** Writes `reply` after the scenario's latency. */
  #send(res: ServerResponse, exchange: Exchange, latencyMs: number, reply: Reply): void {
    this.#after(latencyMs, () => {
      if (res.destroyed) return;
      res.end(this.#writeHead(res, exchange, reply, String(reply.status)));
    });
  }

  /** Runs `fn` after `ms`, at once for 0; stop() clears what is pending. */
  #after(ms: number, fn: () => void): void {
    if (ms <= 0) {
      fn();
      return;
    }
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
  }

  /** Writes the status and headers of `reply`, counting it under `outcome`; returns the body to write. */
  #writeHead(res: ServerResponse, exchange: Exchange, reply: Reply, outcome: string): Buffer {
    exchange.outcome = outcome;
    if (exchange.endpoint !== 'admin') this.#bump(this.#perStatus, outcome);
    const body = Buffer.from(reply.body, 'utf8');
    res.writeHead(reply.status, {
      'content-type': reply.contentType ?? 'application/json',
      'content-length': body.length,
      ...reply.headers,
    });
    return body;
  }

  /**
   * Writes `reply` a few bytes at a time: the headers and the first chunk now, then a chunk every
   * `intervalMs`. The interval ends with the body, when the socket closes, or at stop().
   */
  #trickle(
    res: ServerResponse,
    exchange: Exchange,
    reply: Reply,
    fault: FaultRule & { kind: 'trickle' },
  ): void {
    if (res.destroyed) return;
    const body = this.#writeHead(res, exchange, reply, String(reply.status));
    const step = fault.bytesPerChunk ?? 1;
    let sent = 0;
    const writeChunk = () => {
      const chunk = body.subarray(sent, sent + step);
      sent += chunk.length;
      if (sent < body.length) res.write(chunk);
      else res.end(chunk);
    };
    writeChunk();
    if (sent >= body.length) return;
    const interval = setInterval(() => {
      writeChunk();
      if (sent < body.length) return;
      clearInterval(interval);
      this.#timers.delete(interval);
    }, fault.intervalMs ?? 2000);
    this.#timers.add(interval);
    res.once('close', () => {
      clearInterval(interval);
      this.#timers.delete(interval);
    });
  }

  /**
   * Writes the headers of `reply` with its full length and the first `bytes` bytes of its body (by
   * default through the `"id":"..."` pair), then closes the socket. A plain close (FIN), not a TCP
   * reset: a reset may discard what the client had received but not yet read.
   */
  #resetMidBody(res: ServerResponse, exchange: Exchange, reply: Reply, bytes: number | undefined): void {
    if (res.destroyed) return;
    const body = this.#writeHead(res, exchange, reply, 'reset');
    const cut = Math.min(bytes ?? throughIdPair(body), body.length - 1);
    res.flushHeaders();
    if (cut > 0) res.write(body.subarray(0, cut));
    // end() flushes what is queued, then closes our side; the client sees the body stop short.
    res.socket?.end();
  }

  #count(exchange: Exchange, endpoint: Exchange['endpoint'], projectId: string | null): void {
    exchange.endpoint = endpoint;
    exchange.projectId = projectId;
    this.#bump(this.#perEndpoint, endpoint);
    if (projectId === null) return;
    let counts = this.#perProject.get(projectId);
    if (counts === undefined) {
      counts = new Map();
      this.#perProject.set(projectId, counts);
    }
    this.#bump(counts, endpoint);
  }

  #bump(counts: Map<string, number>, key: string): void {
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }

  /** One JSON line per request. Method, path, outcome and timing only: never a header value. */
  #logLine(method: string, path: string, res: ServerResponse, exchange: Exchange, started: number): void {
    if (this.#log === null) return;
    const line: Record<string, unknown> = {
      time: new Date().toISOString(),
      method,
      path,
      status: res.headersSent ? res.statusCode : null,
      latencyMs: Math.round((performance.now() - started) * 10) / 10,
    };
    if (!res.headersSent) line.outcome = exchange.outcome ?? 'closed';
    if (exchange.fault !== null) line.fault = exchange.fault;
    this.#log(JSON.stringify(line));
  }
}

/**
 * The route of a request: a {@link Route}, 405 when the path exists under another method, or null.
 * Path segments are percent-decoded; a malformed escape is no route.
 */
function matchRoute(method: string, path: string): Route | 405 | null {
  let parts: string[];
  try {
    parts = path.split('/').slice(1).map(decodeURIComponent);
  } catch {
    // A malformed percent escape names no resource.
    return null;
  }
  const [a, b, c, d, e, f] = parts;
  const want = (expected: string, route: Route): Route | 405 => (method === expected ? route : 405);
  if (a === 'v2' && b === 'agent' && c && d === 'job') {
    if (parts.length === 4) return want('POST', { endpoint: 'create', projectId: c });
    if (parts.length === 5 && e) return want('GET', { endpoint: 'get', projectId: c, jobId: e });
    if (parts.length === 6 && e && f === 'message')
      return want('POST', { endpoint: 'message', projectId: c, jobId: e });
  }
  if (a === '_sim') {
    if (parts.length === 2 && b === 'stats') return want('GET', { endpoint: 'admin-stats' });
    if (parts.length === 2 && b === 'keys') return want('PUT', { endpoint: 'admin-keys' });
    if (parts.length === 3 && b === 'scenarios' && c)
      return want('PUT', { endpoint: 'admin-scenario', projectId: c });
    if (parts.length === 5 && b === 'jobs' && c && d && e === 'archive') {
      return want('POST', { endpoint: 'admin-archive', projectId: c, jobId: d });
    }
  }
  return null;
}

/** The prompt of a create or message body, or the 400/413 reply that refuses it. */
function readPrompt(req: IncomingMessage, body: string | null): string | Reply {
  if (body === null) return errorReply(413, `body larger than ${MAX_BODY_BYTES} bytes`);
  const mediaType = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
  if (mediaType !== 'application/json') return errorReply(400, 'Content-Type must be application/json');
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    // The parser's own message would echo the body; a fixed one is enough.
    return errorReply(400, 'body is not valid JSON');
  }
  const prompt =
    typeof json === 'object' && json !== null ? (json as { prompt?: unknown }).prompt : undefined;
  if (typeof prompt !== 'string' || prompt.length === 0) {
    return errorReply(400, 'prompt is required and must be a non-empty string');
  }
  return prompt;
}

/** The keys of a `PUT /_sim/keys` body, or why it is refused (never quoting a key). */
function parseKeys(body: string | null): string[] | string {
  let json: unknown;
  try {
    json = JSON.parse(body ?? '');
  } catch {
    return 'body is not valid JSON';
  }
  const keys =
    typeof json === 'object' && json !== null ? (json as { apiKeys?: unknown }).apiKeys : undefined;
  if (!Array.isArray(keys) || keys.length === 0) return 'apiKeys must be a non-empty array of keys';
  if (!keys.every((key): key is string => typeof key === 'string' && /^[\x21-\x7e]+$/.test(key))) {
    return 'every key must be a non-empty string of visible ASCII characters';
  }
  return keys;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function jsonReply(status: number, value: unknown): Reply {
  return { status, body: JSON.stringify(value) };
}

function errorReply(status: number, error: string, headers?: Record<string, string>): Reply {
  return { status, body: JSON.stringify({ error }), headers };
}

/** The fault's Retry-After header, in the form it asks for. */
function retryAfter(fault: FaultRule & { kind: 'status' }): Record<string, string> | undefined {
  if (fault.retryAfter === undefined) return undefined;
  const { seconds, form } = fault.retryAfter;
  if (form === 'http-date') return { 'retry-after': new Date(Date.now() + seconds * 1000).toUTCString() };
  return { 'retry-after': String(seconds) };
}

/** A JSON record with an unknown field `padding` of `bytes` characters added. */
function pad(body: string, bytes: number): string {
  const record = JSON.parse(body) as Record<string, unknown>;
  return JSON.stringify({ ...record, padding: 'x'.repeat(bytes) });
}

/** A JSON record with the fields of `set` replaced and those of `remove` left out. */
function alter(body: string, fault: FaultRule & { kind: 'altered' }): string {
  const record = { ...(JSON.parse(body) as Record<string, unknown>), ...fault.set };
  for (const field of fault.remove ?? []) delete record[field];
  return JSON.stringify(record);
}

/** The length of a JSON record's text up to and including its `"id":"..."` pair; half of it without one. */
function throughIdPair(body: Buffer): number {
  const text = body.toString('utf8');
  const match = /"id"\s*:\s*"(?:[^"\\]|\\.)*"/.exec(text);
  if (match === null) return Math.floor(body.length / 2);
  return Buffer.byteLength(text.slice(0, match.index + match[0].length), 'utf8');
}

/** The HTML page of an `html` fault: a maintenance page with 200, a proxy's error page with 502. */
function htmlPage(status: 200 | 502): string {
  if (status === 200) {
    return (
      // The title stays "200 OK" (a status page's generic one): clients' error excerpts start with it.
      '<html><head><title>200 OK</title></head><body><h1>Down for maintenance</h1>' +
      '<p>We&rsquo;ll be back soon. The service is down for scheduled maintenance; ' +
      'please try again in a few minutes.</p></body></html>'
    );
  }
  return `<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1><p>upstream said no</p></body></html>`;
}

/** The first half of a JSON text: what a client sees when a proxy cuts a response short. */
function truncate(body: string): string {
  return body.slice(0, Math.max(1, Math.floor(body.length / 2)));
}
