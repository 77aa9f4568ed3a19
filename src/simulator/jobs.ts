/**
 * The simulated agent jobs. Status is computed from the clock when a job is read, never by timers,
 * so ten thousand jobs cost ten thousand small objects and nothing else.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { AgentJobStatus } from '../contract.js';
import type { Scenario } from './scenario.js';

/** The record shape the simulator answers, as the API documents it. */
export interface SimulatedRecord {
  id: string;
  status: AgentJobStatus;
  source: { repository: string; ref: string };
  model: string;
  prLink: string | null;
  createdAt: string;
  archivedAt: string | null;
}

/** One turn: the initial prompt or a follow-up message. */
interface Turn {
  startedAt: number;
  durationMs: number;
  outcome: Scenario['outcome'];
  /** Pull request number, reserved when the turn starts if it will end with one. */
  prNumber: number | null;
}

/** A stored agent job. */
export interface Job {
  id: string;
  projectId: string;
  createdAt: number;
  turn: Turn;
  turns: number;
  /** Set by an explicit archive; `archiveAfterMs` archiving is computed instead. */
  archivedAt: number | null;
  /** Reads left that answer 404 although the job exists. */
  notFoundReads: number;
  /** The record a follow-up message left visible, and the reads left that still see it. */
  stale: { record: SimulatedRecord; reads: number } | null;
  /** Follow-up message idempotency keys already applied; stays empty while keys are ignored. */
  messageKeys: Set<string>;
  /** Requests that reached this job, by endpoint: see {@link JobStats.requests}. */
  requests: { get: JobRequests; message: JobRequests };
}

/** Requests of one endpoint that reached a job: how many, and when the last one arrived. */
export interface JobRequests {
  count: number;
  /** Epoch ms of the last one; null before the first. */
  lastAt: number | null;
}

/** A job's line in the stats. */
export interface JobStats {
  id: string;
  projectId: string;
  /** Epoch ms. */
  createdAt: number;
  /** Epoch ms the current turn became terminal; null while it is active. */
  terminalAt: number | null;
  status: AgentJobStatus;
  turns: number;
  /**
   * Get-job and follow-up message requests the simulator handled for this job, each with the
   * arrival of the last one. They count polls per job whatever the client's history shows (a poll
   * activity cancelled between attempts leaves no started event), and time what a request waits
   * on: a benchmark notes the moment it asks and reads the first arrival after it. Requests that a
   * fault or a refused key answered before handling are not counted.
   */
  requests: { get: JobRequests; message: JobRequests };
}

/** The outcome of a create. */
export type CreateResult =
  | { kind: 'created'; job: Job }
  | { kind: 'replayed'; job: Job }
  | { kind: 'rate-limited'; retryAfterSeconds: number; limit: number; windowSeconds: number }
  | { kind: 'key-reused' };

/** A budget of API uses (creates and follow-up messages) per project per rolling window; 0 uses = unlimited. */
export interface UseBudget {
  uses: number;
  windowMs: number;
}

/**
 * Every simulated job, the idempotency keys and the per-project rate limit windows.
 *
 * `honourKeys` false (the simulator's default) is the live API: an `Idempotency-Key` is counted
 * and otherwise ignored, so every accepted create is a new job and every accepted message a new
 * turn. true is the kind API some tests ask for: a repeated key replays.
 */
export class JobStore {
  readonly #jobs = new Map<string, Job>();
  /** `projectId` + NUL + key → job and the prompt's digest (a reused key with another prompt is refused). */
  readonly #createKeys = new Map<string, { job: Job; promptDigest: string }>();
  /** Use times (creates and follow-up messages) within the last window, oldest first, per project. */
  readonly #windows = new Map<string, number[]>();
  readonly #jobsPerProject = new Map<string, number>();
  readonly #jobsPerKey = new Map<string, number>();
  readonly #createsPerKey = new Map<string, number>();
  readonly #messagesPerKey = new Map<string, number>();
  #nextPr = 1;

  constructor(
    private readonly budget: UseBudget,
    private readonly archiveAfterMs: number | null,
    private readonly honourKeys: boolean,
  ) {}

  /**
   * Creates a job. With keys honoured, returns instead the job an earlier create of the project
   * with the same key and prompt made, or refuses the key with another prompt.
   */
  create(
    projectId: string,
    prompt: string,
    key: string | undefined,
    scenario: Scenario,
    now: number,
  ): CreateResult {
    const honoured = this.honourKeys ? key : undefined;
    const digest = createHash('sha256').update(prompt).digest('hex');
    const previous = honoured === undefined ? undefined : this.#createKeys.get(`${projectId}\0${honoured}`);
    if (previous !== undefined) {
      if (previous.promptDigest !== digest) return { kind: 'key-reused' };
      this.#bump(this.#createsPerKey, honoured);
      return { kind: 'replayed', job: previous.job };
    }
    const limited = this.#takeSlot(projectId, now);
    if (limited !== null) return limited;
    const job: Job = {
      id: `job_${randomUUID().replaceAll('-', '')}`,
      projectId,
      createdAt: now,
      turn: this.#newTurn(scenario, now),
      turns: 1,
      archivedAt: null,
      notFoundReads: scenario.faults.notFoundReadsAfterCreate ?? 0,
      stale: null,
      messageKeys: new Set(),
      requests: { get: { count: 0, lastAt: null }, message: { count: 0, lastAt: null } },
    };
    this.#jobs.set(job.id, job);
    this.#jobsPerProject.set(projectId, (this.#jobsPerProject.get(projectId) ?? 0) + 1);
    if (honoured !== undefined)
      this.#createKeys.set(`${projectId}\0${honoured}`, { job, promptDigest: digest });
    this.#bump(this.#jobsPerKey, key);
    this.#bump(this.#createsPerKey, key);
    return { kind: 'created', job };
  }

  /** The job, if it exists in this project. */
  find(projectId: string, jobId: string): Job | undefined {
    const job = this.#jobs.get(jobId);
    return job?.projectId === projectId ? job : undefined;
  }

  /** Counts a get-job or message request that reached `job` at `now`. */
  noteRequest(job: Job, endpoint: 'get' | 'message', now: number): void {
    const seen = job.requests[endpoint];
    seen.count += 1;
    seen.lastAt = now;
  }

  /** A read as get-job answers it: null while the job must still look missing. Consumes fault reads. */
  read(job: Job, now: number): SimulatedRecord | null {
    if (job.notFoundReads > 0) {
      job.notFoundReads -= 1;
      return null;
    }
    if (job.stale !== null) {
      const { record } = job.stale;
      job.stale.reads -= 1;
      if (job.stale.reads < 0) job.stale = null;
      else return record;
    }
    return this.record(job, now);
  }

  /**
   * Starts a new turn (any job, archived ones too: the message revives it), unless keys are
   * honoured and `key` was applied to the job before. Answers what the client sees: the stale
   * record when the scenario asks for stale reads.
   */
  message(job: Job, key: string | undefined, scenario: Scenario, now: number): SimulatedRecord {
    this.#bump(this.#messagesPerKey, key);
    if (this.#replays(job, key)) return job.stale?.record ?? this.record(job, now);
    if (this.honourKeys && key !== undefined) job.messageKeys.add(key);
    const before = this.record(job, now);
    job.turn = this.#newTurn(scenario, now);
    job.turns += 1;
    job.archivedAt = null;
    const staleReads = scenario.faults.staleReadsAfterMessage ?? 0;
    if (staleReads > 0) {
      job.stale = { record: before, reads: staleReads };
      return before;
    }
    // A lagging replica: the answer is the new turn, and the next reads still see the old one.
    const laggingReads = scenario.faults.staleReadsAfterAnsweredMessage ?? 0;
    job.stale = laggingReads > 0 ? { record: before, reads: laggingReads } : null;
    return this.record(job, now);
  }

  /**
   * Takes a use of the project's budget for a follow-up message, or says when one frees. A message
   * replayed by its key takes none.
   */
  admitMessage(job: Job, key: string | undefined, now: number): CreateResult | null {
    if (this.#replays(job, key)) return null;
    return this.#takeSlot(job.projectId, now);
  }

  /** Archives the job now (a no-op for one already archived). */
  archive(job: Job, now: number): void {
    if (this.record(job, now).status !== 'archived') job.archivedAt = now;
  }

  /** The job's record at `now`. */
  record(job: Job, now: number): SimulatedRecord {
    const turnEnd = job.turn.startedAt + job.turn.durationMs;
    const archivedAt = this.#archivedAt(job, turnEnd, now);
    const ended = now >= turnEnd;
    let status: AgentJobStatus = 'active';
    if (archivedAt !== null) status = 'archived';
    else if (ended) status = job.turn.outcome === 'failed' ? 'failed' : 'completed';
    // An archived job keeps the link of a turn that finished before the archive.
    const prVisible = job.turn.prNumber !== null && ended && (archivedAt === null || archivedAt >= turnEnd);
    const repository = repositoryOf(job.projectId);
    return {
      id: job.id,
      status,
      source: { repository, ref: 'main' },
      model: 'sim-agent-1',
      prLink: prVisible ? `https://github.com/${repository}/pull/${job.turn.prNumber}` : null,
      createdAt: new Date(job.createdAt).toISOString(),
      archivedAt: archivedAt === null ? null : new Date(archivedAt).toISOString(),
    };
  }

  /** Created jobs per project. */
  jobsPerProject(): Record<string, number> {
    return Object.fromEntries(this.#jobsPerProject);
  }

  /** Created jobs per create Idempotency-Key value. */
  jobsPerIdempotencyKey(): Record<string, number> {
    return Object.fromEntries(this.#jobsPerKey);
  }

  /** Creates the store accepted (a job made, or replayed with keys honoured) per Idempotency-Key value. */
  createsPerIdempotencyKey(): Record<string, number> {
    return Object.fromEntries(this.#createsPerKey);
  }

  /** Follow-up messages the store accepted (a turn started, or replayed with keys honoured) per Idempotency-Key value. */
  messagesPerIdempotencyKey(): Record<string, number> {
    return Object.fromEntries(this.#messagesPerKey);
  }

  /** One line per job. */
  jobStats(now: number): JobStats[] {
    return [...this.#jobs.values()].map((job) => {
      const turnEnd = job.turn.startedAt + job.turn.durationMs;
      const archivedAt = this.#archivedAt(job, turnEnd, now);
      const ends = [turnEnd, archivedAt].filter((at): at is number => at !== null && at <= now);
      return {
        id: job.id,
        projectId: job.projectId,
        createdAt: job.createdAt,
        terminalAt: ends.length > 0 ? Math.min(...ends) : null,
        status: this.record(job, now).status,
        turns: job.turns,
        requests: { get: { ...job.requests.get }, message: { ...job.requests.message } },
      };
    });
  }

  /** Total jobs created. */
  get size(): number {
    return this.#jobs.size;
  }

  /** Whether a message with `key` is a replay: keys honoured and the key applied to the job before. */
  #replays(job: Job, key: string | undefined): boolean {
    return this.honourKeys && key !== undefined && job.messageKeys.has(key);
  }

  #bump(counts: Map<string, number>, key: string | undefined): void {
    if (key !== undefined) counts.set(key, (counts.get(key) ?? 0) + 1);
  }

  #archivedAt(job: Job, turnEnd: number, now: number): number | null {
    if (job.archivedAt !== null && job.archivedAt <= now) return job.archivedAt;
    if (this.archiveAfterMs === null) return null;
    const automatic = turnEnd + this.archiveAfterMs;
    return automatic <= now ? automatic : null;
  }

  #newTurn(scenario: Scenario, now: number): Turn {
    const prNumber = scenario.outcome === 'pr' ? this.#nextPr++ : null;
    return { startedAt: now, durationMs: scenario.durationMs, outcome: scenario.outcome, prNumber };
  }

  /** Takes a use of the rolling window, or says when the oldest one frees. */
  #takeSlot(projectId: string, now: number): CreateResult | null {
    const { uses, windowMs } = this.budget;
    if (uses === 0) return null;
    const window = (this.#windows.get(projectId) ?? []).filter((at) => at > now - windowMs);
    this.#windows.set(projectId, window);
    const oldest = window[0];
    if (window.length >= uses && oldest !== undefined) {
      return {
        kind: 'rate-limited',
        retryAfterSeconds: Math.max(1, Math.ceil((oldest + windowMs - now) / 1000)),
        limit: uses,
        windowSeconds: windowMs / 1000,
      };
    }
    window.push(now);
    return null;
  }
}

/** `sim-org/<project>`: a believable repository name made only of URL-safe characters. */
function repositoryOf(projectId: string): string {
  const slug = projectId.replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 80) || 'project';
  return `sim-org/${slug}`;
}
