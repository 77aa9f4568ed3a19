/**
 * What every process's configuration shares: the error a bad setting becomes, the one way to read
 * settings (a zod schema of them), and the kinds of setting more than one process reads. Entry
 * points call the loaders at start; nothing reads the environment at import time.
 */
import * as z from 'zod/mini';
import { FileApiKey } from '../agent-api/api-key.js';
import { durationMs } from '../duration.js';
import { AgentJobError, ErrorName } from '../errors.js';

/** A setting is missing or invalid. The message is the one line a person needs, never the value. */
export class ConfigError extends AgentJobError {
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(ErrorName.Config, `${setting}: ${message}`);
  }
}

/** The environment, or the variables a test or the Action gives instead. */
export type Env = Record<string, string | undefined>;

/**
 * Reads the settings `schema` names from `env` (trimmed, blank as unset), or throws a
 * {@link ConfigError} naming the first that does not pass, never its value: it may be a secret.
 */
export function readSettings<S extends z.ZodMiniObject>(schema: S, env: Env): z.output<S> {
  const settings = Object.keys(schema.shape).map((name) => [name, env[name]?.trim() || undefined]);
  const result = schema.safeParse(Object.fromEntries(settings));
  if (result.success) return result.data;
  const [issue] = result.error.issues;
  const [setting, ...within] = issue?.path ?? [];
  // A field inside a JSON setting (a project of the quota overrides) is named, not its value.
  const where = within.map((key) => `${JSON.stringify(key)} `).join('');
  throw new ConfigError(String(setting), `${where}${issue?.message}`);
}

/** Refuses a setting given both as its value and as a file holding it, before either is read. */
export function notBoth(env: Env, value: string, file: string, named = file): void {
  if (env[value]?.trim() && env[file]?.trim())
    throw new ConfigError(named, `set ${value} or ${file}, not both`);
}

/** One of `options`, in any case: `must be "a", "b" or "c"` otherwise. */
export function oneOf<const T extends string>(...options: [T, ...T[]]) {
  const quoted = options.map((option) => `"${option}"`);
  const error = `must be ${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
  const byCase = new Map(options.map((option) => [option.toLowerCase(), option]));
  return z.pipe(
    z.transform((value: string) => byCase.get(value.toLowerCase()) ?? value),
    z.enum(options, { error }),
  );
}

/** `yes` or `no` in any case, as true or false; nothing else (zod's default takes `1`, `y`...). */
const flag = (yes: string, no: string) =>
  z.stringbool({ truthy: [yes], falsy: [no], error: `must be "${yes}" or "${no}"` });
/** `on` or `off`. */
export const onOff = flag('on', 'off');
/** `true` or `false`. */
export const trueFalse = flag('true', 'false');

/** The log level of the worker and the codec server. */
export const logLevel = z._default(oneOf('DEBUG', 'INFO', 'WARN', 'ERROR'), 'INFO');

/** A whole number of at least `min`. */
export function wholeNumber(min: number) {
  const error = `must be a whole number of at least ${min}`;
  return z.coerce.number({ error }).check(z.int({ error }), z.gte(min, { error }));
}

/** Milliseconds, from a plain number of them or a duration such as `30s`, of at least `minMs`. */
export function duration(minMs = 0) {
  const error = minMs === 0 ? 'must be a duration such as "30s"' : `must be at least ${minMs / 1000}s`;
  return z.pipe(
    z.transform((value: string) => durationMs(/^\d+$/.test(value) ? Number(value) : value) ?? NaN),
    z.number({ error: 'must be a duration such as "30s"' }).check(z.gte(minMs, { error })),
  );
}

/** `host:port`: where a server of the process listens. */
export const hostPort = z
  .pipe(
    z.string().check(z.regex(/^.+:\d+$/, { error: 'must be host:port' })),
    z.transform((value) => {
      const colon = value.lastIndexOf(':');
      return { host: value.slice(0, colon), port: Number(value.slice(colon + 1)) };
    }),
  )
  .check(z.refine(({ port }) => port <= 65_535, { error: 'must be host:port' }));

/** An http(s) URL without credentials, trailing slashes dropped (a base URL, a collector). */
export const httpUrl = z
  .pipe(
    z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
    z.transform((value) => value.replace(/\/+$/, '')),
  )
  .check(
    z.refine((value) => {
      const { username, password } = new URL(value);
      return !username && !password;
    }, 'must not carry credentials'),
  );

/**
 * A setting naming a file that `open` reads now, so that a process never starts on one it cannot
 * use; the file's error (ours: the file and why, never the content) is the setting's.
 */
export function fileSetting<T>(open: (path: string) => T) {
  return z.pipe(
    z.string(),
    z.transform((path, ctx) => {
      try {
        return open(path);
      } catch (err) {
        if (!(err instanceof AgentJobError)) throw err;
        ctx.issues.push({ code: 'custom', message: err.message, input: path });
        return z.NEVER;
      }
    }),
  );
}

/** A file holding an API key: its key now, by the rules it is re-read with, and its path. */
export const keyFile = fileSetting((path) => ({ path, key: new FileApiKey(path).current() }));
