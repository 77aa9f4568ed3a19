/**
 * A start the worker cannot open is named at once (issue 55 item 4), over the real server: a worker
 * process with one ring, starters whose ring has a different key under the worker's key ID, or a
 * key ID the worker lacks. The starter's `--wait` reports it within seconds (exit 9), the worker's
 * log line names the workflow, the key ID and why, its metric counts the workflow, and the workflow
 * stays open with nothing created (its task is retried until the ring is fixed) until an operator
 * terminates it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import proto from '@temporalio/proto';
import { PayloadUnopenedError } from '../../src/client/index.js';
import { ExitCode } from '../../src/starter/exit-codes.js';
import { spawnTs, starterProcessEnv, startSimulatedWorld, startWorkerProcess, waitFor } from '../harness.js';
import { SecretVolume } from '../secret-volume.js';
import { createdJobs } from '../simulator-stats.js';

const root = mkdtempSync(join(tmpdir(), 'unopened-payload-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));
const ring = (line: string) => new SecretVolume(mkdtempSync(join(root, 'ring-')), `${line}\n`);
const workerRing = ring(`e2e-1 ${randomBytes(32).toString('base64')}`);

const world = await startSimulatedWorld('unopened', { durationMs: 200 });
const workerEnv = await world.workerEnv({ TEMPORAL_PAYLOAD_KEYS_FILE: workerRing.path });
const worker = await startWorkerProcess(workerEnv);
after(async () => {
  worker.child.kill('SIGTERM');
  await worker.exited;
});
const starterEnv = starterProcessEnv(world.env, workerEnv.taskQueue);

/** How long a starter may take to report: a few workflow task attempts and one look at the history. */
const REPORT_WITHIN_MS = 60_000;

async function startWith(ringLine: string, projectId: string) {
  const keys = ring(ringLine);
  const vars = { ...starterEnv, TEMPORAL_PAYLOAD_KEYS_FILE: keys.path };
  const startedAt = Date.now();
  const run = spawnTs(
    'src/starter.ts',
    ['--project', projectId, '--prompt', 'Document it', '--wait', '--json'],
    vars,
  );
  await waitFor(() => run.child.exitCode !== null, {
    what: 'the starter to report the workflow the worker cannot open',
    timeoutMs: REPORT_WITHIN_MS,
  }).catch((err: Error) => {
    run.child.kill('SIGTERM');
    throw new Error(`${err.message}; starter stdout: ${run.stdout()}; stderr: ${run.stderr()}`);
  });
  const out = JSON.parse(run.stdout()) as { workflowId: string; error: { type: string; message: string } };
  return { code: await run.exited, out, stderr: run.stderr(), seconds: (Date.now() - startedAt) / 1000 };
}

/** A workflow status's name, as describe() gives it. */
const statusName = (status: number | null | undefined) =>
  proto.temporal.api.enums.v1.WorkflowExecutionStatus[status ?? 0]?.replace('WORKFLOW_EXECUTION_STATUS_', '');

async function unopenedMetric(): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${workerEnv.metricsPort}/metrics`)).text();
  const lines = text.split('\n').filter((l) => l.startsWith('agent_job_payload_unopened_workflows_total'));
  return lines.reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
}

for (const [name, keyId, reason] of [
  ["another key under the worker's key ID", 'e2e-1', 'authentication-failed'],
  ['a key ID the worker lacks', 'e2e-9', 'unknown-key'],
] as const) {
  test(`a start sealed with ${name}: starter exits 9 at once, worker names it, workflow left open`, async () => {
    const projectId = world.project({ outcome: 'pr' });
    const before = await unopenedMetric();
    const run = await startWith(`${keyId} ${randomBytes(32).toString('base64')}`, projectId);
    console.log(`reported after ${run.seconds.toFixed(1)} s`);
    assert.equal(run.code, ExitCode.PayloadUnopened, run.stderr);
    assert.equal(run.out.error.type, new PayloadUnopenedError('', '', null).name);
    assert.ok(run.out.error.message.includes(keyId), run.out.error.message);
    assert.match(run.out.error.message, /operator-actions/);

    const { workflowId } = run.out;
    await waitFor(
      () =>
        worker
          .stdout()
          .split('\n')
          .some((l) => l.includes('"payload does not open"') && l.includes(workflowId)),
      { what: 'the worker to log the payload it cannot open' },
    );
    const line = JSON.parse(
      worker
        .stdout()
        .split('\n')
        .find((l) => l.includes('"payload does not open"') && l.includes(workflowId))!,
    ) as Record<string, unknown>;
    assert.equal(line.keyId, keyId);
    assert.equal(line.reason, reason);
    assert.equal(line.workflowId, workflowId);
    await waitFor(async () => (await unopenedMetric()) === before + 1, { what: 'the metric to count it' });

    // Read raw: the test's client holds no ring, and the workflow's memo is sealed.
    const status = async () =>
      (
        await world.env.client.workflowService.describeWorkflowExecution({
          namespace: world.env.client.options.namespace,
          execution: { workflowId },
        })
      ).workflowExecutionInfo?.status;
    const handle = world.env.client.workflow.getHandle(workflowId);
    assert.equal(statusName(await status()), 'RUNNING', 'left for the ring to be fixed');
    assert.equal(createdJobs(world.sim, projectId), 0, 'no agent job');
    // What docs/operator-actions.md says to do with one that can never be opened.
    await handle.terminate('sealed with a key no worker holds');
    assert.equal(statusName(await status()), 'TERMINATED');
  });
}
