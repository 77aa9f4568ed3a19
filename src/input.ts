/**
 * The agent-job workflow's input checked and completed with defaults. The workflow checks it before
 * any activity runs (a bad field fails it with `InvalidInput`, no agent job created); the library,
 * the starter and the Nexus service check it before they start one, so a person hears of a bad
 * field at once. Pure: workflow code imports it. Field meanings: docs/contract.md.
 */
import { MAX_JOB_ID_BYTES } from './agent-api/types.js';
import { InvalidInputError, MAX_PROJECT_ID_BYTES, MAX_PROMPT_LENGTH } from './contract.js';
import { durationMs } from './duration.js';
import { quoted } from './escape.js';
import { isWellFormed, utf8ByteLength } from './ids.js';
import { DEFAULT_POLL, type ResolvedPollSettings } from './poll-schedule.js';
import { DEFAULT_BLIP_TOLERANCE_MS, DEFAULT_CREDENTIAL_TOLERANCE_MS } from './failure-policy/streak.js';

/** Default of {@link AgentJobInput.timeout}: 6 hours. */
export const DEFAULT_TIMEOUT_MS = 6 * 60 * 60 * 1000;

/**
 * Longest {@link AgentJobInput.timeout}: 7 days. A job takes minutes to hours: a longer wait is almost
 * always a typo, and a bound keeps one workflow's worst-case history known.
 */
export const MAX_TIMEOUT_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * Validated input with every default applied. Without `jobId` the prompt creates the job; with one,
 * it is a first follow-up, or unset to watch.
 */
export type ResolvedInput = ReturnType<typeof resolveInput>;

/** Validates the workflow input and applies defaults; `InvalidInputError` names the first bad field. */
export function resolveInput(input: unknown) {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new InvalidInputError('input', 'must be one JSON object with projectId and prompt');
  }
  const raw = input as Record<string, unknown>;
  const projectId = checkId(raw.projectId, 'projectId', MAX_PROJECT_ID_BYTES);
  const target =
    raw.jobId === undefined
      ? { jobId: undefined, prompt: checkPrompt(raw.prompt) }
      : {
          jobId: checkId(raw.jobId, 'jobId', MAX_JOB_ID_BYTES),
          prompt: raw.prompt === undefined ? undefined : checkPrompt(raw.prompt),
        };
  const poll = resolvePoll(raw.poll);
  const timeoutMs = toMs(raw.timeout, 'timeout', DEFAULT_TIMEOUT_MS, 1_000);
  if (timeoutMs > MAX_TIMEOUT_MS) throw new InvalidInputError('timeout', 'must be at most 7 days');
  const continueAsNewAfterPolls = raw.continueAsNewAfterPolls as number | undefined;
  if (
    continueAsNewAfterPolls !== undefined &&
    !(Number.isInteger(continueAsNewAfterPolls) && continueAsNewAfterPolls >= 1)
  ) {
    throw new InvalidInputError('continueAsNewAfterPolls', 'must be a whole number of at least 1');
  }
  const blipToleranceMs = toMs(raw.blipTolerance, 'blipTolerance', DEFAULT_BLIP_TOLERANCE_MS, 1_000);
  const credentialToleranceMs = toMs(
    raw.credentialTolerance,
    'credentialTolerance',
    DEFAULT_CREDENTIAL_TOLERANCE_MS,
    1_000,
  );
  const previousCreate = raw.previousCreate ?? null;
  if (previousCreate !== null && (typeof previousCreate !== 'string' || previousCreate.length > 500)) {
    throw new InvalidInputError('previousCreate', 'must be a string of at most 500 characters');
  }
  if (previousCreate !== null && target.jobId !== undefined) {
    throw new InvalidInputError('previousCreate', 'applies to a create only, not with jobId');
  }
  return {
    projectId,
    ...target,
    poll,
    timeoutMs,
    continueAsNewAfterPolls,
    blipToleranceMs,
    credentialToleranceMs,
    previousCreate,
    notify: raw.notify === undefined ? null : checkNotifyTargetName(raw.notify),
  };
}

/**
 * A notification target's name (`notify`), safe as it is as the worker's key, a metric label, in a
 * log line and a header. Shape only: which names exist is the worker's to say.
 */
export const NOTIFY_TARGET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** `value` when it is a target name by {@link NOTIFY_TARGET_NAME}; `InvalidInputError` naming `field` otherwise. */
export function checkNotifyTargetName(value: unknown, field = 'notify'): string {
  if (typeof value !== 'string' || !NOTIFY_TARGET_NAME.test(value)) {
    const shown = typeof value === 'string' ? quoted(value.slice(0, 80)) : typeof value;
    throw new InvalidInputError(
      field,
      `${shown} is not a target name: 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit`,
    );
  }
  return value;
}

/** The prompt rule of a create and every follow-up: non-blank, at most {@link MAX_PROMPT_LENGTH} chars. */
export function checkPrompt(value: unknown, field = 'prompt'): string {
  const prompt = checkText(value, field);
  if (prompt.length > MAX_PROMPT_LENGTH) {
    throw new InvalidInputError(field, `is ${prompt.length} characters; the limit is ${MAX_PROMPT_LENGTH}`);
  }
  return prompt;
}

function checkText(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidInputError(field, 'is required and must be a non-blank string');
  }
  return value;
}

/**
 * A non-blank ID of well-formed Unicode within `maxBytes` of UTF-8, that names one thing in a URL
 * path and in a workflow ID: a lone surrogate has no UTF-8 form, and a longer ID would break a
 * workflow ID or a search attribute at the server once the workflow had started. `.` and `..`
 * address another path (URL parsing removes dot segments even percent-encoded; the API client
 * refuses them too, but only once a quota use is taken). Surrounding white space is refused, not
 * trimmed: trimming would make a second workflow ID (and quota workflow) for one project or job.
 * Control characters come from a broken paste or a template, never on purpose.
 */
function checkId(input: unknown, field: string, maxBytes: number): string {
  const value = checkText(input, field);
  if (!isWellFormed(value)) {
    throw new InvalidInputError(field, 'must be well-formed Unicode (it holds a lone UTF-16 surrogate)');
  }
  const bytes = utf8ByteLength(value);
  if (bytes > maxBytes) {
    throw new InvalidInputError(field, `is ${bytes} bytes of UTF-8; the limit is ${maxBytes}`);
  }
  const trimmed = value.trim();
  if (trimmed === '.' || trimmed === '..') {
    throw new InvalidInputError(
      field,
      `${JSON.stringify(value)} is not a usable ID: a URL path reads "." and ".." as the current and parent folder, so no API request could name it`,
    );
  }
  if (trimmed !== value) {
    throw new InvalidInputError(
      field,
      `${JSON.stringify(value)} has leading or trailing white space; send ${JSON.stringify(trimmed)}`,
    );
  }
  const control = /\p{Cc}/u.exec(value);
  if (control !== null) {
    const code = control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
    throw new InvalidInputError(
      field,
      `${JSON.stringify(value)} holds the control character U+${code}; an ID is printable text`,
    );
  }
  return value;
}

function resolvePoll(value: unknown): ResolvedPollSettings {
  if (value === undefined) return DEFAULT_POLL;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidInputError('poll', 'must be an object');
  }
  const raw = value as Record<string, unknown>;
  const initialIntervalMs = toMs(raw.initialInterval, 'poll.initialInterval', DEFAULT_POLL.initialIntervalMs);
  const maxIntervalMs = toMs(
    raw.maxInterval,
    'poll.maxInterval',
    Math.max(DEFAULT_POLL.maxIntervalMs, initialIntervalMs),
  );
  const backoffCoefficient = raw.backoffCoefficient ?? DEFAULT_POLL.backoffCoefficient;
  // Sub-10ms polls would hammer the API; the floor still lets tests run fast.
  if (initialIntervalMs < 10) throw new InvalidInputError('poll.initialInterval', 'must be at least 10ms');
  if (maxIntervalMs < initialIntervalMs) {
    throw new InvalidInputError('poll.maxInterval', 'must be at least poll.initialInterval');
  }
  if (typeof backoffCoefficient !== 'number' || !Number.isFinite(backoffCoefficient)) {
    throw new InvalidInputError('poll.backoffCoefficient', 'must be a number');
  }
  if (backoffCoefficient < 1 || backoffCoefficient > 10) {
    throw new InvalidInputError('poll.backoffCoefficient', 'must be between 1 and 10');
  }
  return { initialIntervalMs, maxIntervalMs, backoffCoefficient };
}

/** `value` in milliseconds, `defaultMs` when unset; `minMs` is 1 second or none. */
function toMs(value: unknown, field: string, defaultMs: number, minMs: 0 | 1_000 = 0): number {
  if (value === undefined) return defaultMs;
  if (typeof value !== 'number' && (typeof value !== 'string' || value.trim() === '')) {
    throw new InvalidInputError(field, 'must be a duration such as "10s" or a number of milliseconds');
  }
  const ms = durationMs(value);
  if (typeof value === 'number' && (ms === undefined || ms <= 0)) {
    throw new InvalidInputError(field, 'must be a positive number of milliseconds');
  }
  if (ms === undefined) {
    throw new InvalidInputError(field, `"${value}" is not a duration such as "10s" or "5 minutes"`);
  }
  if (ms <= 0) throw new InvalidInputError(field, `"${value}" is not a positive duration`);
  if (ms < minMs) throw new InvalidInputError(field, 'must be at least 1 second');
  return ms;
}
