/**
 * The notification targets a worker knows, by name: from `AGENT_NOTIFY_TARGETS` (the JSON itself)
 * or `AGENT_NOTIFY_TARGETS_FILE` (a mounted Secret holding it, re-read when it changes, as the API
 * key file is). One JSON object, a target per name:
 *
 * ```json
 * { "ci": { "type": "webhook", "url": "https://ci.example.com/hooks/agent-jobs", "secret": "…" },
 *   "docs-team": { "type": "slack", "url": "https://hooks.slack.com/services/T0/B0/XXXX" } }
 * ```
 *
 * A target's URL and secret are credentials (a Slack webhook URL is one by itself): no message,
 * reason or event of this module holds them, nor the text they came from. Reasons name the target
 * and the field only.
 */
import { z } from 'zod';
import { isLoopbackHost } from '../agent-api/dispatcher.js';
import { WatchedFile, type WatchedFileOptions } from '../agent-api/watched-file.js';
import { AgentJobError, ErrorName } from '../errors.js';
import { NOTIFY_TARGET_NAME } from '../input.js';

/** A generic webhook: the notice as JSON, signed with HMAC-SHA256 under `secret` (./signature.ts). */
export interface WebhookTarget {
  type: 'webhook';
  url: string;
  secret: string;
}

/** A Slack incoming webhook: a message in Slack's format (./notice.ts); its URL is its secret. */
export interface SlackTarget {
  type: 'slack';
  url: string;
}

/** One configured target. */
export type NotifyTarget = WebhookTarget | SlackTarget;

/** The targets by name. */
export type NotifyTargets = ReadonlyMap<string, NotifyTarget>;

/**
 * Shortest webhook secret: 32 characters, the length of a 128-bit key in hex or a 192-bit one in
 * base64. `openssl rand -hex 32` makes a good one.
 */
export const MIN_WEBHOOK_SECRET_LENGTH = 32;

/** The targets' text holds none that can be used; the message names the source and why, never a URL or secret. */
export class NotifyTargetsError extends AgentJobError {
  constructor(
    readonly source: string,
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(ErrorName.NotifyTargets, `${source}: ${reason}`, options);
  }
}

/** Where targets come from now: the settings' fixed map, or a watched file's current one. */
export interface NotifyTargetSource {
  /** The targets now (a file is checked first when its interval has passed). */
  current(): NotifyTargets;
}

const url = z.string().refine((value) => checkUrl(value) === null);
const TARGET = z.discriminatedUnion('type', [
  z.object({ type: z.literal('webhook'), url, secret: z.string().min(MIN_WEBHOOK_SECRET_LENGTH) }).strict(),
  z.object({ type: z.literal('slack'), url }).strict(),
]);

/**
 * Why `value` cannot be a target URL, or null: http(s), no user or password in it, and `http:`
 * only to a loopback host (a receiver on the same machine): a notice holds the prompt's project,
 * the job and its pull request, which plain HTTP shows to anyone on the path.
 */
function checkUrl(value: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return 'is not a URL';
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return 'must be an https URL';
  if (parsed.username || parsed.password) return 'must not carry a user or password';
  if (parsed.protocol === 'http:' && !isLoopbackHost(parsed.hostname)) {
    return 'must be https (http only to a loopback host)';
  }
  return null;
}

/**
 * The targets in `text` (the JSON object above), or why there are none usable. The reason names a
 * target and its field, never a value: a bad URL may still be a working secret.
 */
export function parseNotifyTargets(text: string): { value: NotifyTargets } | { reason: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { reason: 'is not JSON (one object: {"<name>": {"type": "webhook" | "slack", "url": …}})' };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    return { reason: 'must be one JSON object, a target per name' };
  }
  const targets = new Map<string, NotifyTarget>();
  for (const [name, raw] of Object.entries(json)) {
    if (!NOTIFY_TARGET_NAME.test(name)) {
      return {
        reason: `target name ${JSON.stringify(name.slice(0, 64))} is not 1 to 64 letters, digits, ".", "_" or "-"`,
      };
    }
    const parsed = TARGET.safeParse(raw);
    if (!parsed.success) return { reason: `target "${name}": ${problemOf(parsed.error, raw)}` };
    targets.set(name, parsed.data);
  }
  return { value: targets };
}

/** What is wrong with a target, by field: zod's messages would quote a value. */
function problemOf(error: z.ZodError, raw: unknown): string {
  const issue = error.issues[0];
  const field = issue?.path.join('.') ?? '';
  if (field === 'url' && typeof (raw as { url?: unknown }).url === 'string') {
    return `url ${checkUrl((raw as { url: string }).url) ?? 'is invalid'}`;
  }
  if (issue?.code === 'unrecognized_keys')
    return `unknown field ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  if (field === 'secret')
    return `secret must be a string of at least ${MIN_WEBHOOK_SECRET_LENGTH} characters`;
  if (field === 'type' || field === '')
    return 'must be an object with "type": "webhook" (url, secret) or "slack" (url)';
  return `${field} is missing or invalid`;
}

/** Targets that never change: from `AGENT_NOTIFY_TARGETS`, or a test's own. */
export function fixedNotifyTargets(targets: NotifyTargets): NotifyTargetSource {
  return { current: () => targets };
}

/**
 * `AGENT_NOTIFY_TARGETS_FILE`: read at start (a {@link NotifyTargetsError} when it holds no
 * usable targets), then re-read when it changes; a change that breaks it keeps the last good
 * targets and is reported through `onEvent`, without the content.
 */
export class FileNotifyTargets implements NotifyTargetSource {
  readonly #file: WatchedFile<NotifyTargets>;

  constructor(path: string, options: WatchedFileOptions = {}) {
    this.#file = new WatchedFile(
      path,
      parseNotifyTargets,
      ({ reason, cause }) => new NotifyTargetsError(path, reason, { cause }),
      { ...options, same: sameTargets },
    );
  }

  current(): NotifyTargets {
    return this.#file.current();
  }
}

function sameTargets(a: NotifyTargets, b: NotifyTargets): boolean {
  if (a.size !== b.size) return false;
  for (const [name, target] of a) {
    const other = b.get(name);
    if (other === undefined || JSON.stringify(other) !== JSON.stringify(target)) return false;
  }
  return true;
}
