// Runs before `npm test` and `npm run demo` (as their pre-scripts), so that the README's two
// commands work on a fresh clone without a separate setup step:
// - installs the locked npm dependencies with `npm ci` when node_modules is missing or stale;
// - with --for-tests, makes sure Debian's docker-compose (1.29) is there, which the deploy tests
//   use to validate docker-compose.yml without a Docker engine. It installs it with apt-get only
//   when running as root on a Debian-like machine; elsewhere it says what to install.
// Plain JavaScript on purpose: it must run before the TypeScript tooling is installed.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';

function run(command, args, env = process.env) {
  return spawnSync(command, args, { stdio: 'inherit', env }).status === 0;
}

function onPath(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

const installed = 'node_modules/.package-lock.json';
const fresh = existsSync(installed) && statSync(installed).mtimeMs >= statSync('package-lock.json').mtimeMs;
if (!fresh) {
  process.stderr.write('[setup] installing dependencies with npm ci (first run only)\n');
  if (!run('npm', ['ci', '--no-audit', '--no-fund'])) {
    process.stderr.write('[setup] npm ci failed; see the output above\n');
    process.exit(1);
  }
}

if (process.argv.includes('--for-tests') && !onPath('docker-compose')) {
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  if (root && onPath('apt-get')) {
    process.stderr.write(
      "[setup] installing Debian's docker-compose to validate docker-compose.yml (first run only)\n",
    );
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    if (
      !run('apt-get', ['update', '-qq'], env) ||
      !run('apt-get', ['install', '-y', '-qq', 'docker-compose'], env)
    ) {
      process.stderr.write('[setup] apt-get install docker-compose failed; the deploy tests will say so\n');
    }
  } else {
    process.stderr.write(
      '[setup] docker-compose is not installed; the deploy tests need it (Debian: apt-get install docker-compose, or pip install docker-compose)\n',
    );
  }
}
