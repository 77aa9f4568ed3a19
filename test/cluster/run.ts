/**
 * `npm run test:cluster`: runs test/cluster/scale-out.ts (the scale-out proof, then the versioned
 * rollout) under node:test, then prints its summary (jobs, workers, kills, versions) and the wall
 * time as the last lines, and exits with the test's status.
 * The test file starts and stops the cluster itself, so a failure anywhere still stops it.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runNodeTest } from '../harness.js';

const started = Date.now();
const scratch = mkdtempSync(join(tmpdir(), 'agent-job-cluster-'));
const summaryFile = join(scratch, 'summary.txt');
const code = await runNodeTest([fileURLToPath(new URL('./scale-out.ts', import.meta.url))], {
  env: { ...process.env, CLUSTER_SUMMARY_FILE: summaryFile },
});
const lines = existsSync(summaryFile) ? readFileSync(summaryFile, 'utf8').trim().split('\n') : [];
rmSync(scratch, { recursive: true, force: true });
process.stdout.write('\n');
for (const line of lines) process.stdout.write(`[test:cluster] ${line}\n`);
process.stdout.write(
  `[test:cluster] ${code === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(0)}s\n`,
);
process.exit(code);
