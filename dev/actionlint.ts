/**
 * actionlint, the linter for GitHub Actions workflow files, built once per machine from the Go
 * module proxy (as the Temporal releases are: dev/go-install.ts) and cached beside them. The test
 * of the workflow files (test/ci/workflow-files.test.ts) runs it.
 *
 * Run directly to build it (if needed) and print its path: `npx tsx dev/actionlint.ts`.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cacheDir, goInstall, isExecutable, type Log } from './go-install.js';

/** The actionlint release: the newest on the module proxy when it was chosen. */
export const ACTIONLINT_VERSION = '1.7.12';

/** The cached actionlint binary, built first when it is missing (a minute or two, once). */
export async function resolveActionlint(
  env: NodeJS.ProcessEnv = process.env,
  log: Log = () => {},
): Promise<string> {
  const target = cacheDir(`actionlint-${ACTIONLINT_VERSION}`, env);
  const binary = join(target, 'actionlint');
  if (isExecutable(binary)) return binary;
  await goInstall(
    {
      what: `actionlint v${ACTIONLINT_VERSION}`,
      target,
      packages: [`github.com/rhysd/actionlint/cmd/actionlint@v${ACTIONLINT_VERSION}`],
      binaries: { actionlint: 'actionlint' },
    },
    env,
    log,
  );
  return binary;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.stdout.write(
    `${await resolveActionlint(process.env, (line) => process.stderr.write(`${line}\n`))}\n`,
  );
}
