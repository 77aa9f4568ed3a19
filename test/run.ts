/**
 * The suite's runner. First the unit layer (`*.unit.test.ts`: pure modules, no server, seconds);
 * it fails fast. Then it starts one real Temporal server (dev/dev-server.ts), bundles
 * the workflow code once, runs every other test file under node:test against them, and stops the server.
 * Test files read the server's address from TEMPORAL_ADDRESS and the bundle from
 * AGENT_TEST_WORKFLOW_BUNDLE; run alone, a file starts what it needs itself (see harness.ts).
 */
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { sdkVersion, startDevServer } from '../dev/dev-server.js';
import { resolveTemporalCli } from '../dev/temporal-cli.js';
import { bundleWorkflows, runNodeTest } from './harness.js';

/** Longest any one test (or suite) may take; the slowest suite takes about 2 minutes. */
const TEST_TIMEOUT_MS = 10 * 60_000;

function testFiles(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return testFiles(path);
      return name.endsWith('.test.ts') ? [path] : [];
    })
    .sort();
}

const isUnit = (file: string) => file.endsWith('.unit.test.ts');

function log(line: string): void {
  process.stderr.write(`[test] ${line}\n`);
}

/** Runs test files under node:test, two at a time; resolves with the exit code. */
function nodeTest(files: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  // A hung test fails with its name instead of holding the whole run until CI's limit.
  return runNodeTest(files, { env, concurrency: 2, timeoutMs: TEST_TIMEOUT_MS });
}

async function main(): Promise<number> {
  const root = new URL('..', import.meta.url).pathname;
  // `--unit`: the unit layer only; `--no-unit`: skip it (npm test runs it before typecheck and lint).
  const args = process.argv.slice(2);
  const layers = { unit: !args.includes('--no-unit'), server: !args.includes('--unit') };
  const filter = args.filter((arg) => !arg.startsWith('--'));
  // Filters match the path under test/, not the absolute one: a clone in /work/simulator/ must not
  // match every file for `simulator`.
  const testDir = join(root, 'test');
  const all = testFiles(testDir).filter(
    (file) => filter.length === 0 || filter.some((f) => relative(testDir, file).includes(f)),
  );
  const units = layers.unit ? all.filter(isUnit) : [];
  if (units.length > 0) {
    const started = Date.now();
    process.stderr.write(`[test] unit layer: ${units.length} files, no server\n`);
    const code = await nodeTest(units);
    process.stderr.write(`[test] unit layer done in ${Date.now() - started}ms\n`);
    if (code !== 0) return code;
  }
  const files = layers.server ? all.filter((file) => !isUnit(file)) : [];
  if (files.length === 0) return 0;
  // The CLI is a client of a few tests (the commands the docs give, the compose init script); on a
  // fresh machine it builds side by side with the server.
  const [serverStart, cliBuild] = await Promise.allSettled([
    startDevServer(),
    resolveTemporalCli(process.env, log),
  ]);
  if (serverStart.status === 'rejected') throw serverStart.reason;
  const server = serverStart.value;
  if (cliBuild.status === 'rejected') {
    await server.stop();
    throw cliBuild.reason;
  }
  process.stderr.write(
    `[test] Temporal Server ${server.version}, TypeScript SDK ${sdkVersion()}, Node ${process.version}\n`,
  );
  const scratch = mkdtempSync(join(tmpdir(), 'agent-job-test-'));
  try {
    const started = Date.now();
    const bundlePath = join(scratch, 'workflow-bundle.js');
    writeFileSync(bundlePath, (await bundleWorkflows()).code);
    process.stderr.write(`[test] bundled workflow code once in ${Date.now() - started}ms\n`);
    process.stderr.write(
      `[test] running ${files.length} files: ${files.map((f) => relative(root, f)).join(', ')}\n`,
    );
    return await nodeTest(files, {
      ...process.env,
      TEMPORAL_ADDRESS: server.address,
      TEMPORAL_NAMESPACE: server.namespace,
      AGENT_TEST_WORKFLOW_BUNDLE: bundlePath,
    });
  } finally {
    await server.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`[test] ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
