/**
 * How a process of this project starts and ends (the worker, the codec server): read the
 * configuration, run, exit 0; a bad setting is one JSON log line on stderr and exit 2, a crash one
 * line and exit 1. One place, so that both processes fail the same way.
 */
import { ConfigError } from '../config/settings.js';
import { UpgradeRefusedError } from '../errors.js';
import { formatLogLine } from '../observability/logger.js';

/** Exit code for a missing or invalid setting, distinct from a crash (1). */
export const EXIT_CONFIG = 2;

/** Exit code of a worker whose upgrade check found open workflows it cannot take over (decision 0022). */
export const EXIT_UPGRADE_REFUSED = 3;

function fail(message: string, code: number): never {
  process.stderr.write(`${formatLogLine({ level: 'ERROR', message, meta: {} }, new Date())}\n`);
  process.exit(code);
}

/** Loads the configuration with `load` and runs `run` on it; `what` names the process in a crash line. */
export function runProcess<C>(what: string, load: () => C, run: (config: C) => Promise<void>): void {
  let config: C;
  try {
    config = load();
  } catch (err) {
    if (err instanceof ConfigError) fail(`invalid configuration: ${err.message}`, EXIT_CONFIG);
    throw err;
  }
  run(config).then(
    () => process.exit(0),
    (err: unknown) => {
      if (err instanceof UpgradeRefusedError) fail(err.message, EXIT_UPGRADE_REFUSED);
      fail(`${what} failed: ${err instanceof Error ? err.message : String(err)}`, 1);
    },
  );
}
