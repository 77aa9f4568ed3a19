/**
 * What a simulated project does: how long a turn lasts, how it ends, and which faults its requests
 * meet. The types are checked at run time by zod, because scenarios also arrive as JSON from the
 * command line and the `/_sim/scenarios` endpoint.
 */
import { z } from 'zod';

/** The three API endpoints a fault can target; `any` matches all three. */
export type Endpoint = 'create' | 'get' | 'message';

/** A Retry-After header as a fault sends it. */
export interface RetryAfterSpec {
  /**
   * Seconds to wait. Negative only with `http-date`: a date that many seconds in the past, as a
   * server whose clock is behind sends it.
   */
  seconds: number;
  /** `seconds` sends `Retry-After: 2`; `http-date` sends the same moment as an IMF-fixdate. Default `seconds`. */
  form?: 'seconds' | 'http-date';
}

/** Which requests a fault applies to. Counters are per project and reset by `setScenario`. */
export interface FaultMatch {
  /** The endpoint; `any` counts every API request of the project. */
  endpoint: Endpoint | 'any';
  /** Apply to the first N matching requests (after `skip`). Without `first` and `rate`: every request. */
  first?: number;
  /** Let this many matching requests through before `first` starts counting. Default 0. */
  skip?: number;
  /** Apply to each matching request with this probability (0 to 1), drawn from the seeded generator. */
  rate?: number;
  /**
   * Apply only for this many ms (wall clock) from the first request the rule applies to, and never
   * again after that (until `setScenario` restarts the counts): minutes of maintenance pages, a
   * failover's 404s. Within the window `first`, `skip` and `rate` still apply; without them, every
   * matching request meets the fault.
   */
  forMs?: number;
}

/** What happens to a request a fault applies to. */
export type FaultAction =
  /** Answer this status with an `{"error": ...}` body (429 bursts, 5xx, 408, 422, ...). */
  | { kind: 'status'; status: number; retryAfter?: RetryAfterSpec; message?: string }
  /** Never answer: the request stays open until the client gives up or the simulator stops. */
  | { kind: 'hang' }
  /** Destroy the socket without a response; the request is not processed. */
  | { kind: 'drop' }
  /**
   * Answer an HTML page with `content-type: text/html`, the request not processed: with 200 a
   * maintenance page (a status page in front of the API), with 502 a proxy's error page.
   */
  | { kind: 'html'; status: 200 | 502 }
  /**
   * Answer JSON cut in half. With 200 the request is processed (a create stores its job) and its
   * real body is truncated; with 502 it is not processed and a gateway's error body is truncated.
   */
  | { kind: 'truncated'; status: 200 | 502 }
  /**
   * Process the request (store the job, start the turn), then reset the connection without a
   * response: at once, or `afterMs` later (a create held past a worker's shutdown, its answer lost).
   */
  | { kind: 'reset-after-store'; afterMs?: number }
  /**
   * Process the request and answer its real record padded with an unknown field `padding` of this
   * many bytes: a legal record, far larger than any real one.
   */
  | { kind: 'oversized'; bytes: number }
  /**
   * Process the request at once (a get reads the record as it is now) and answer this many ms
   * later: a slow answer, during which the job may move on. On create it is also the create
   * answered only after the worker has died: the job exists from the start, and when the client's
   * socket closes before `ms` the answer goes nowhere.
   */
  | { kind: 'slow'; ms: number }
  /**
   * Process the request, send the headers of its real 2xx answer with the full `content-length`,
   * then its body `bytesPerChunk` bytes (default 1) every `intervalMs` (default 2000): no gap is
   * long enough for a per-chunk body timeout, and the whole answer takes minutes. Non-2xx answers
   * are sent as usual.
   */
  | { kind: 'trickle'; intervalMs?: number; bytesPerChunk?: number }
  /**
   * Process the request, send the headers of its real 2xx answer with the full `content-length`
   * and the first `bytes` bytes of its body, then close the socket. Default: up to and including
   * the `"id":"..."` pair, so the job's ID is readable from what arrived; `bytes` is capped one
   * short of the body. Non-2xx answers are sent as usual.
   */
  | { kind: 'reset-mid-body'; bytes?: number }
  /**
   * Process the request and answer its real record with the fields of `set` replaced (or added)
   * and those of `remove` left out: a record that drifted from the documentation (a wrong-typed
   * field, a missing one), with the request applied all the same.
   */
  | { kind: 'altered'; set?: Record<string, unknown>; remove?: string[] };

/** One fault rule: which requests, and what happens to them. */
export type FaultRule = FaultMatch & FaultAction;

/**
 * The faults of a project. Rules are checked in order; the first that applies wins. Every rule
 * counts the matching requests it has seen on its own.
 */
export interface Faults {
  /** Rules in order. */
  rules?: FaultRule[];
  /** Seed of the generator behind `rate`: the same seed and requests give the same faults. Default 1. */
  seed?: number;
  /** After each create, this many reads of the new job answer 404 (read-after-write lag). */
  notFoundReadsAfterCreate?: number;
  /**
   * After each follow-up message, the message response and this many reads still show the record
   * from before the message (the previous turn's terminal record).
   */
  staleReadsAfterMessage?: number;
  /**
   * After each follow-up message answered with the fresh record (the new turn, `active`), this many
   * reads still show the record from before the message (the previous turn's terminal record): a
   * lagging read replica. Ignored when `staleReadsAfterMessage` is set, which makes the answer
   * itself stale.
   */
  staleReadsAfterAnsweredMessage?: number;
}

/** How a simulated project behaves. */
export interface Scenario {
  /** How long a turn stays `active`, in ms. Default 3000. */
  durationMs: number;
  /** `pr`: completed with a pull request link; `no-changes`: completed with prLink null; `failed`. */
  outcome: 'pr' | 'no-changes' | 'failed';
  /** false: create answers 404 (the project does not exist). Default true. */
  projectExists: boolean;
  /** Added to every response of the project, in ms. Default 0. */
  latencyMs: number;
  /** Faults; default none. */
  faults: Faults;
}

/** The scenario of every project that has none of its own. */
export const DEFAULT_SCENARIO: Readonly<Scenario> = {
  durationMs: 3000,
  outcome: 'pr',
  projectExists: true,
  latencyMs: 0,
  faults: {},
};

const count = z.number().int().min(0);

const retryAfterSchema = z
  .strictObject({
    seconds: z.number().int(),
    form: z.enum(['seconds', 'http-date']).optional(),
  })
  .refine((spec) => spec.seconds >= 0 || spec.form === 'http-date', {
    message: 'negative seconds (a date in the past) need form "http-date"',
  });

const matchShape = {
  endpoint: z.enum(['create', 'get', 'message', 'any']),
  first: count.optional(),
  skip: count.optional(),
  rate: z.number().min(0).max(1).optional(),
  forMs: z.number().int().min(1).optional(),
};

const ruleSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    ...matchShape,
    kind: z.literal('status'),
    status: z.number().int().min(100).max(599),
    retryAfter: retryAfterSchema.optional(),
    message: z.string().optional(),
  }),
  z.strictObject({ ...matchShape, kind: z.literal('hang') }),
  z.strictObject({ ...matchShape, kind: z.literal('drop') }),
  z.strictObject({
    ...matchShape,
    kind: z.literal('html'),
    status: z.union([z.literal(200), z.literal(502)]),
  }),
  z.strictObject({
    ...matchShape,
    kind: z.literal('truncated'),
    status: z.union([z.literal(200), z.literal(502)]),
  }),
  z.strictObject({
    ...matchShape,
    kind: z.literal('reset-after-store'),
    afterMs: z.number().int().nonnegative().optional(),
  }),
  z.strictObject({ ...matchShape, kind: z.literal('slow'), ms: z.number().int().min(1).max(600_000) }),
  z.strictObject({
    ...matchShape,
    kind: z.literal('trickle'),
    intervalMs: z.number().int().min(1).max(600_000).optional(),
    bytesPerChunk: z.number().int().min(1).optional(),
  }),
  z.strictObject({ ...matchShape, kind: z.literal('reset-mid-body'), bytes: count.optional() }),
  z.strictObject({
    ...matchShape,
    kind: z.literal('altered'),
    set: z.record(z.string(), z.unknown()).optional(),
    remove: z.array(z.string()).optional(),
  }),
  z.strictObject({
    ...matchShape,
    kind: z.literal('oversized'),
    bytes: z
      .number()
      .int()
      .min(1)
      .max(64 * 1024 * 1024),
  }),
]);

const faultsSchema = z.strictObject({
  rules: z.array(ruleSchema).optional(),
  seed: z.number().int().optional(),
  notFoundReadsAfterCreate: count.optional(),
  staleReadsAfterMessage: count.optional(),
  staleReadsAfterAnsweredMessage: count.optional(),
});

/** Run-time check of a `Partial<Scenario>` from JSON; unknown fields are errors, to catch typos. */
export const partialScenarioSchema = z.strictObject({
  durationMs: count.optional(),
  outcome: z.enum(['pr', 'no-changes', 'failed']).optional(),
  projectExists: z.boolean().optional(),
  latencyMs: count.optional(),
  faults: faultsSchema.optional(),
});

/** Run-time check of scenarios keyed by project ID. */
export const scenarioMapSchema = z.record(z.string(), partialScenarioSchema);

/**
 * Validates a `Partial<Scenario>` that came in as JSON.
 *
 * @throws {Error} with a one-line list of the problems
 */
export function parseScenario(value: unknown): Partial<Scenario> {
  const result = partialScenarioSchema.safeParse(value);
  if (!result.success) throw new Error(summarize(result.error));
  return result.data;
}

/**
 * Validates scenarios keyed by project ID that came in as JSON.
 *
 * @throws {Error} with a one-line list of the problems
 */
export function parseScenarioMap(value: unknown): Record<string, Partial<Scenario>> {
  const result = scenarioMapSchema.safeParse(value);
  if (!result.success) throw new Error(summarize(result.error));
  return result.data;
}

function summarize(error: z.ZodError): string {
  return error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(top)'}: ${issue.message}`)
    .join('; ');
}

/**
 * A scenario with every default applied: `override` over `base` over {@link DEFAULT_SCENARIO}. A
 * field set to undefined counts as not set, so it never blanks out a default.
 */
export function resolveScenario(
  base: Partial<Scenario> | undefined,
  override: Partial<Scenario> | undefined,
): Scenario {
  return { ...DEFAULT_SCENARIO, ...definedFields(base), ...definedFields(override) };
}

function definedFields(scenario: Partial<Scenario> | undefined): Partial<Scenario> {
  if (scenario === undefined) return {};
  return Object.fromEntries(Object.entries(scenario).filter(([, value]) => value !== undefined));
}
