// Runs before `npm test` and `npm run demo` (as their pre-scripts), so that the README's two
// commands work on a fresh clone without a separate setup step:
// - installs the locked npm dependencies with `npm ci` when node_modules is missing or stale,
//   among them the npm registry's `node` package (a devDependency): Node 24, the release the
//   Dockerfile runs, as node_modules/.bin/node, which npm puts first on PATH for every script, so
//   the tests and the demo run on it whatever Node runs npm;
// - with --for-tests, makes sure Debian's docker-compose (1.29) is there, which the deploy tests
//   use to validate docker-compose.yml without a Docker engine, and Debian's Prometheus, whose
//   promtool checks the compose stack's Prometheus files and whose server runs the dashboard's
//   queries in test/observability/project-metrics.test.ts;
// - with --for-tests, makes sure `python3 -m venv` works (Debian's python3-venv, which Debian's own
//   Python needs for it), with which dev/python-venv.ts makes the Python caller's venv for its tests;
// - with --for-cluster, makes sure the PostgreSQL server binaries and `nc` (which
//   deploy/compose/temporal-schema.sh waits with) are there, for `npm run test:cluster`.
// It installs Debian packages with apt-get only when running as root on a Debian-like machine;
// elsewhere it says what to install.
// Plain JavaScript on purpose: it must run before the TypeScript tooling is installed.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';

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

// The `node` package installs its binary from its preinstall script; where npm is set to skip
// install scripts, the scripts would run on the machine's Node instead, so say so.
const scriptNode = spawnSync('node_modules/.bin/node', ['--version'], { encoding: 'utf8' });
const wantedNode = JSON.parse(readFileSync('package.json', 'utf8')).devDependencies.node;
if (scriptNode.status !== 0 || scriptNode.stdout.trim() !== `v${wantedNode}`) {
  process.stderr.write(
    `[setup] node_modules/.bin/node is not Node ${wantedNode} (${scriptNode.stdout?.trim() || scriptNode.error?.message || 'it did not run'}): ` +
      `the npm scripts run on ${process.version} instead; npm must run install scripts for the node package (npm ci without --ignore-scripts)\n`,
  );
}

let aptUpdated = false;

/** Installs Debian `packages` when root with apt-get; otherwise says what to install. */
function ensurePackages(what, packages) {
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!root || !onPath('apt-get')) {
    process.stderr.write(
      `[setup] ${what} is not installed (Debian: apt-get install ${packages.join(' ')})\n`,
    );
    return false;
  }
  process.stderr.write(`[setup] installing ${what} with apt-get (first run only)\n`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!aptUpdated) aptUpdated = run('apt-get', ['update', '-qq'], env);
  if (!aptUpdated || !run('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...packages], env)) {
    process.stderr.write(`[setup] apt-get install ${packages.join(' ')} failed; see the output above\n`);
    return false;
  }
  return true;
}

/** Whether `python3 -m venv` can make a venv with pip: Debian's Python needs python3-venv for ensurepip. */
function pythonVenvWorks() {
  return spawnSync('python3', ['-c', 'import ensurepip, venv'], { stdio: 'ignore' }).status === 0;
}

function postgresInstalled() {
  if (process.env.PG_BIN_DIR) return true;
  return spawnSync('sh', ['-c', 'ls /usr/lib/postgresql/*/bin/initdb'], { stdio: 'ignore' }).status === 0;
}

if (process.argv.includes('--for-tests') && !onPath('docker-compose')) {
  // The deploy tests say so themselves when it is still missing.
  ensurePackages("Debian's docker-compose, which the deploy tests use to validate docker-compose.yml", [
    'docker-compose',
  ]);
}

if (process.argv.includes('--for-tests') && !(onPath('prometheus') && onPath('promtool'))) {
  // Debian's package installs both and starts no server here; the tests say so when it is missing.
  ensurePackages("Debian's Prometheus, which the metrics and deploy tests run", ['prometheus']);
}

if (process.argv.includes('--for-tests') && onPath('python3') && !pythonVenvWorks()) {
  // The Python caller's tests say so themselves when it is still missing.
  ensurePackages("Debian's python3-venv, with which the Python caller's tests make their venv", [
    'python3-venv',
  ]);
}

if (process.argv.includes('--for-tests') && !onPath('chromium')) {
  // Headless, for the test that opens the Temporal UI with and without the codec server.
  ensurePackages("Debian's Chromium, which the UI test drives headless", ['chromium']);
}

if (process.argv.includes('--for-cluster')) {
  let ok = true;
  if (!postgresInstalled()) ok = ensurePackages('the PostgreSQL server', ['postgresql']) && ok;
  if (!onPath('nc'))
    ok = ensurePackages('nc, which deploy/compose/temporal-schema.sh uses', ['netcat-openbsd']) && ok;
  if (!ok) process.exit(1);
}
