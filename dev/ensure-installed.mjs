// Runs before `npm test` and `npm run demo` (as their pre-scripts): on a fresh clone, installs the
// locked dependencies with `npm ci`, so the README's two commands work without a separate step.
// Plain JavaScript on purpose: it must run before TypeScript tooling is installed.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

const installed = 'node_modules/.package-lock.json';
const fresh = existsSync(installed) && statSync(installed).mtimeMs >= statSync('package-lock.json').mtimeMs;
if (!fresh) {
  process.stderr.write('[setup] installing dependencies with npm ci (first run only)\n');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const result = spawnSync(npm, ['ci', '--no-audit', '--no-fund'], { stdio: 'inherit' });
  if (result.status !== 0) {
    process.stderr.write('[setup] npm ci failed; see the output above\n');
    process.exit(result.status ?? 1);
  }
}
