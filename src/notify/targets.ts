/**
 * The notification targets a worker knows, by name (docs/notifications.md, "Targets on the worker").
 * A target's URL and secret are credentials (a Slack webhook URL is one by itself): no message,
 * reason or event of this module holds them, nor the text they came from.
 */
import { z } from 'zod';
import { isLoopbackHost } from '../agent-api/dispatcher.js';
import { WatchedFile, type Parsed, type WatchedFileOptions } from '../agent-api/watched-file.js';
import { AgentJobError, ErrorName } from '../errors.js';
import { NOTIFY_TARGET_NAME } from '../input.js';

/** Shortest webhook secret: a 128-bit key in hex, or a 192-bit one in base64. */
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

/**
 * Why `value` cannot be a target URL, or null. `http:` only to a loopback host: a notice holds the
 * project, the job and its pull request, which plain HTTP shows to anyone on the path.
 */
function urlProblem(value: string): string | null {
  const url = URL.parse(value);
  if (url === null) return 'is not a URL';
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an https URL';
  if (url.username || url.password) return 'must not carry a user or password';
  if (url.protocol === 'http:' && !isLoopbackHost(url.hostname))
    return 'must be https (http only to a loopback host)';
  return null;
}

// Every message is ours and names the field: zod's own may quote a value, and a bad URL may still be
// a working secret.
const url = z.string({ error: 'url is missing or invalid' }).superRefine((value, ctx) => {
  const problem = urlProblem(value);
  if (problem !== null) ctx.addIssue({ code: 'custom', message: `url ${problem}` });
});
const onlyFields = {
  error: (issue: z.core.$ZodRawIssue) =>
    issue.code === 'unrecognized_keys'
      ? `unknown field ${issue.keys.map((key) => `"${key}"`).join(', ')}`
      : undefined,
};
const SECRET = `secret must be a string of at least ${MIN_WEBHOOK_SECRET_LENGTH} characters`;
const TARGETS = z.record(
  z.string().regex(NOTIFY_TARGET_NAME),
  z.discriminatedUnion(
    'type',
    [
      z.strictObject(
        {
          type: z.literal('webhook'),
          url,
          secret: z.string({ error: SECRET }).min(MIN_WEBHOOK_SECRET_LENGTH, SECRET),
        },
        onlyFields,
      ),
      z.strictObject({ type: z.literal('slack'), url }, onlyFields),
    ],
    { error: 'must be an object with "type": "webhook" (url, secret) or "slack" (url)' },
  ),
  {
    error: (issue) =>
      issue.code === 'invalid_key'
        ? `target name ${JSON.stringify(String(issue.path?.[0]).slice(0, 64))} is not 1 to 64 letters, digits, ".", "_" or "-"`
        : 'must be one JSON object, a target per name',
  },
);

/** One target: a webhook (signed under `secret`: ./signature.ts) or a Slack incoming webhook (./notice.ts). */
export type NotifyTarget = z.infer<typeof TARGETS>[string];

/** The targets by name. */
export type NotifyTargets = ReadonlyMap<string, NotifyTarget>;

/** Where targets come from now: the settings' fixed map, or a watched file's current one. */
export interface NotifyTargetSource {
  current(): NotifyTargets;
}

/** The targets in `text`, or why there are none usable (naming a target and its field, never a value). */
export function parseNotifyTargets(text: string): Parsed<NotifyTargets> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { reason: 'is not JSON (one object: {"<name>": {"type": "webhook" | "slack", "url": …}})' };
  }
  const parsed = TARGETS.safeParse(json);
  if (parsed.success) return { value: new Map(Object.entries(parsed.data)) };
  const [issue] = parsed.error.issues;
  const name = issue?.code === 'invalid_key' ? undefined : issue?.path[0];
  return { reason: name === undefined ? `${issue?.message}` : `target "${String(name)}": ${issue?.message}` };
}

/** Targets that never change: from `AGENT_NOTIFY_TARGETS`, or a test's own. */
export function fixedNotifyTargets(targets: NotifyTargets): NotifyTargetSource {
  return { current: () => targets };
}

/**
 * `AGENT_NOTIFY_TARGETS_FILE`: read at start (a {@link NotifyTargetsError} without usable targets),
 * then re-read when it changes, as the API key file is.
 */
export class FileNotifyTargets extends WatchedFile<NotifyTargets> implements NotifyTargetSource {
  constructor(path: string, options: WatchedFileOptions = {}) {
    super(path, parseNotifyTargets, ({ reason, cause }) => new NotifyTargetsError(path, reason, { cause }), {
      ...options,
      same: (a, b) =>
        a.size === b.size &&
        [...a].every(([name, target]) => JSON.stringify(b.get(name)) === JSON.stringify(target)),
    });
  }
}
