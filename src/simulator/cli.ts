/**
 * Command-line and environment parsing of the simulator program. Kept apart from `main.ts` so the
 * rules can be tested without spawning a process.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseScenarioMap, type Scenario } from './scenario.js';
import type { SimulatorOptions } from './server.js';
import { UsageError } from '../errors.js';

export { UsageError };

/** The one usage line printed for `--help` and after a bad flag. */
export const USAGE =
  'usage: npm run simulator -- [--port N] [--host ADDR] [--key KEY]... [--creates-per-hour N] [--budget K/W] [--no-retry-after] ' +
  '[--honour-idempotency-key] ' +
  '[--duration 3s] ' +
  '[--outcome pr|no-changes|failed] [--scenarios JSON|FILE] [--archive-after 10m] [--quiet] [--help]';

/** What `--help` prints: the usage line, then each flag with its environment variable and default. */
export const HELP = `${USAGE}

  --port N               SIMULATOR_PORT              port to listen on; 0 picks a free one (default 8787)
  --host ADDR            SIMULATOR_HOST              interface to bind (default 127.0.0.1; /_sim/ has no auth)
  --key KEY (repeat)     SIMULATOR_API_KEYS (a,b)    accepted bearer keys (default sim-local-key)
  --creates-per-hour N   SIMULATOR_CREATES_PER_HOUR  creates and follow-up messages per project per rolling hour;
                                                     0 = unlimited (default 100)
  --budget K/W           SIMULATOR_BUDGET            K creates and follow-up messages per project per rolling W
                                                     seconds, e.g. 3/20; replaces --creates-per-hour
  --no-retry-after       SIMULATOR_NO_RETRY_AFTER=1  429s carry no Retry-After (as the live API documents)
  --honour-idempotency-key
                         SIMULATOR_HONOUR_IDEMPOTENCY_KEY=1
                                                     a repeated Idempotency-Key replays the create or message;
                                                     default off: keys are ignored, as the live API does
  --duration D           SIMULATOR_JOB_DURATION      how long a turn stays active: 1500, 1500ms, 3s, 2m (default 3s)
  --outcome O            SIMULATOR_OUTCOME           pr, no-changes or failed (default pr)
  --scenarios S          SIMULATOR_SCENARIOS         JSON text or a JSON file: scenarios keyed by project ID
  --archive-after D                                  archive terminal jobs this long after they end (default never)
  --quiet                                            no request log
`;

/** A flag or environment value the simulator cannot use; `main.ts` prints it with {@link USAGE}. */

/** What the command line asks for: options to start with, or help. */
export type Command =
  { help: true } | { help: false; options: SimulatorOptions & { port: number; host: string } };

/**
 * Reads flags, falling back to environment variables, then to defaults.
 *
 * @throws {UsageError} for an unknown flag or a value that does not parse
 */
export function parseCommandLine(argv: string[], env: NodeJS.ProcessEnv): Command {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        key: { type: 'string', multiple: true },
        'creates-per-hour': { type: 'string' },
        budget: { type: 'string' },
        'no-retry-after': { type: 'boolean' },
        'honour-idempotency-key': { type: 'boolean' },
        duration: { type: 'string' },
        outcome: { type: 'string' },
        scenarios: { type: 'string' },
        'archive-after': { type: 'string' },
        quiet: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message, { cause: err });
  }
  if (values.help === true) return { help: true };

  const keys = values.key ?? splitList(env.SIMULATOR_API_KEYS) ?? ['sim-local-key'];
  if (keys.length === 0 || keys.some((key) => !/^[\x21-\x7e]+$/.test(key))) {
    throw new UsageError('--key / SIMULATOR_API_KEYS: keys must be non-empty visible ASCII without spaces');
  }
  const defaultScenario: Partial<Scenario> = {};
  const duration = values.duration ?? env.SIMULATOR_JOB_DURATION;
  if (duration !== undefined) defaultScenario.durationMs = parseDuration(duration, '--duration');
  const outcome = values.outcome ?? env.SIMULATOR_OUTCOME;
  if (outcome !== undefined) defaultScenario.outcome = parseOutcome(outcome);
  const archiveAfter = values['archive-after'];
  const scenarios = values.scenarios ?? env.SIMULATOR_SCENARIOS;
  const createsPerHour = values['creates-per-hour'] ?? env.SIMULATOR_CREATES_PER_HOUR;
  const budget = values.budget ?? env.SIMULATOR_BUDGET;
  const noRetryAfter = values['no-retry-after'] === true || env.SIMULATOR_NO_RETRY_AFTER === '1';
  const honourKeys =
    values['honour-idempotency-key'] === true || env.SIMULATOR_HONOUR_IDEMPOTENCY_KEY === '1';

  return {
    help: false,
    options: {
      host: values.host ?? env.SIMULATOR_HOST ?? '127.0.0.1',
      port: parseWhole(values.port ?? env.SIMULATOR_PORT ?? '8787', '--port', 65_535),
      apiKeys: keys,
      createsPerProjectPerHour:
        createsPerHour === undefined ? undefined : parseWhole(createsPerHour, '--creates-per-hour'),
      budget: budget === undefined ? undefined : parseBudget(budget),
      retryAfter: noRetryAfter ? false : undefined,
      honourIdempotencyKey: honourKeys ? true : undefined,
      defaultScenario,
      scenarios: scenarios === undefined ? undefined : readScenarios(scenarios),
      archiveAfterMs: archiveAfter === undefined ? null : parseDuration(archiveAfter, '--archive-after'),
      log: values.quiet === true ? false : undefined,
    },
  };
}

function splitList(text: string | undefined): string[] | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

function parseWhole(text: string, flag: string, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(text.trim()) || Number(text) > max) {
    throw new UsageError(`${flag}: "${text}" is not a whole number between 0 and ${max}`);
  }
  return Number(text);
}

/** `K/W`: K uses per rolling W seconds (`3/20`, `3/20s`, `0/1` for unlimited). */
function parseBudget(text: string): { uses: number; windowSeconds: number } {
  const match = /^(\d+)\s*\/\s*(\d+(?:\.\d+)?)s?$/.exec(text.trim());
  const uses = Number(match?.[1]);
  const windowSeconds = Number(match?.[2]);
  if (!match || !(windowSeconds > 0)) {
    throw new UsageError(`--budget: "${text}" is not K/W, uses per window of W seconds, such as 3/20`);
  }
  return { uses, windowSeconds };
}

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `1500`, `1500ms`, `3s`, `2m`, `1h`: milliseconds. */
function parseDuration(text: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$/.exec(text.trim());
  const amount = match?.[1];
  if (amount === undefined)
    throw new UsageError(`${flag}: "${text}" is not a duration such as 1500, 3s, 2m or 1h`);
  return Math.round(Number(amount) * (UNIT_MS[match?.[2] ?? 'ms'] ?? 1));
}

function parseOutcome(text: string): Scenario['outcome'] {
  if (text === 'pr' || text === 'no-changes' || text === 'failed') return text;
  throw new UsageError(`--outcome: "${text}" is not one of pr, no-changes, failed`);
}

/** JSON text (starting with `{`) or the path of a JSON file, keyed by project ID. */
function readScenarios(text: string): Record<string, Partial<Scenario>> {
  const source = text.trim().startsWith('{') ? 'text' : 'file';
  let json: unknown;
  try {
    json = JSON.parse(source === 'text' ? text : readFileSync(text, 'utf8'));
  } catch (err) {
    throw new UsageError(
      `--scenarios: cannot read ${source === 'text' ? 'the JSON' : `"${text}"`}: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
  try {
    return parseScenarioMap(json);
  } catch (err) {
    throw new UsageError(`--scenarios: ${(err as Error).message}`, { cause: err });
  }
}
