/**
 * The simulator's HTTP server: the three agent job endpoints with auth, validation, rate limit,
 * idempotency and faults, plus unauthenticated `/_sim/` admin endpoints. It binds to loopback by
 * default because those admin endpoints have no auth. It holds the state (keys, jobs, scenarios,
 * fault counters, request counts) and decides each answer; `routes.ts` reads the request and
 * `reply-writer.ts` writes the answer, with the latency and the fault.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { FaultState } from './faults.js';
import { JobStore, type CreateResult, type JobStats } from './jobs.js';
import { ReplyWriter, type Exchange } from './reply-writer.js';
import {
  errorReply,
  headerValue,
  jsonReply,
  matchRoute,
  MAX_BODY_BYTES,
  parseKeys,
  readPrompt,
  type Reply,
  type Route,
} from './routes.js';
import { parseScenario, resolveScenario, type Endpoint, type Scenario } from './scenario.js';

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

/**
 * Starts a simulator of the Background Agent Job API.
 *
 * @returns once it listens
 */
export async function startSimulator(options: SimulatorOptions): Promise<RunningSimulator> {
  const simulator = new Simulator(options);
  return simulator.listen(options.host ?? '127.0.0.1', options.port ?? 0);
}

/** Server state: keys, jobs, scenarios, fault counters, request counts. Pending timers are the writer's. */
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
  readonly #writer = new ReplyWriter((outcome) => this.#bump(this.#perStatus, outcome));
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
    this.#writer.cancelPending();
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
      this.#writer.send(
        res,
        exchange,
        0,
        errorReply(status, status === 405 ? 'method not allowed' : 'no such route'),
      );
      return;
    }
    if (route.endpoint.startsWith('admin')) {
      exchange.endpoint = 'admin';
      this.#writer.send(res, exchange, 0, this.#admin(route, body));
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
      this.#writer.send(res, exchange, 0, errorReply(401, 'missing or invalid bearer token'));
      return;
    }
    const scenario = this.#scenario(route.projectId);
    const fault = this.#faultState(route.projectId, scenario).pick(route.endpoint, Date.now());
    exchange.fault = fault?.kind ?? null;
    if (fault !== null && this.#writer.preempt(res, exchange, fault, scenario.latencyMs)) return;
    const reply = this.#handleApi(req, route, body, scenario);
    this.#writer.deliver(res, exchange, scenario.latencyMs, reply, fault);
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
