/**
 * Nothing private outside the payloads (issue 46 item 2, decision 0021), over the real server: a
 * worker process and starter processes with the payload key ring and tracing to an OTLP receiver
 * run jobs that end in several ways, each with a secret marker in its prompt and in what the API
 * answers (a record field, an error body). The marker is in no byte of their histories outside
 * sealed payloads, in no worker output line, no metric the worker exposes and no exported span;
 * the starter prints each failure's message opened, the API's text included.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import proto from '@temporalio/proto';
import { FailureType } from '../../src/contract.js';
import { ExitCode } from '../../src/starter/commands.js';
import {
  runStarter,
  starterProcessEnv,
  startSimulatedWorld,
  startWorkerProcess,
  waitFor,
} from '../harness.js';
import { startReceiver } from '../otlp-receiver.js';
import { SecretVolume } from '../secret-volume.js';

const root = mkdtempSync(join(tmpdir(), 'codec-leaks-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));
const secret = new SecretVolume(root, `e2e-1 ${randomBytes(32).toString('base64')}\n`);

const world = await startSimulatedWorld('leaks', { durationMs: 200 });
const receiver = await startReceiver();
const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' };
const workerEnv = await world.workerEnv({ ...otel, TEMPORAL_PAYLOAD_KEYS_FILE: secret.path });
const starterEnv = {
  ...starterProcessEnv(world.env, workerEnv.taskQueue),
  ...otel,
  TEMPORAL_PAYLOAD_KEYS_FILE: secret.path,
};

/** Every byte of a workflow's history as the server stores it (payload data raw, not base64). */
async function historyBytes(workflowId: string): Promise<Buffer> {
  const history = await world.env.client.workflow.getHandle(workflowId).fetchHistory();
  return Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
}

interface StarterJson {
  workflowId: string;
  prLink?: string;
  error?: { type: string; message: string };
}

/** Runs a job whose prompt holds `marker` with the starter process; its exit code and JSON output. */
async function runJob(marker: string, scenario: Parameters<typeof world.project>[0]) {
  const projectId = world.project(scenario);
  const prompt = `Document the ${marker} module`;
  const run = await runStarter(
    ['--project', projectId, '--prompt', prompt, '--wait', '--json', '--poll-interval', '50ms'],
    starterEnv,
  );
  assert.ok(!run.stderr.includes(marker), `no starter log line holds the marker: ${run.stderr}`);
  return { code: run.code, out: JSON.parse(run.stdout) as StarterJson };
}

test('jobs that succeed and fail in several ways leave their marker in no history field outside sealed payloads, no log line, no metric, no span', async () => {
  const marker = `secret-${randomUUID()}`;
  const worker = await startWorkerProcess(workerEnv);
  try {
    // The record the API answers echoes the marker (a repository name).
    const echoed = {
      kind: 'altered',
      endpoint: 'get',
      set: { source: { repository: `acme/${marker}` } },
    } as const;
    const completed = await runJob(marker, { outcome: 'pr', faults: { rules: [echoed] } });
    assert.equal(completed.code, ExitCode.Ok);
    assert.match(completed.out.prLink ?? '', /^https:\/\/github\.com\//);

    const failed = await runJob(marker, { outcome: 'failed', faults: { rules: [echoed] } });
    assert.equal(failed.code, ExitCode.AgentJobFailed);
    assert.equal(failed.out.error?.type, FailureType.AgentJobFailed);

    // The API refuses the create quoting the prompt: final, and its text is in the activity's
    // failure and the workflow's.
    const refusal = `the prompt "Document the ${marker} module" is not allowed`;
    const refused = await runJob(marker, {
      faults: { rules: [{ endpoint: 'create', kind: 'status', status: 422, message: refusal }] },
    });
    assert.equal(refused.code, ExitCode.WorkflowFailed);
    assert.equal(refused.out.error?.type, FailureType.InvalidRequest);
    assert.ok(
      refused.out.error?.message.includes(marker),
      `the starter prints the failure's message opened: ${refused.out.error?.message}`,
    );

    // Reads that fail twice with the marker in the error body, then the job completes: retried
    // activity attempts, each failure with the API's text.
    const blip = { endpoint: 'get', kind: 'status', status: 503, message: refusal, first: 2 } as const;
    const retried = await runJob(marker, { outcome: 'pr', faults: { rules: [blip] } });
    assert.equal(retried.code, ExitCode.Ok);

    for (const { out } of [completed, failed, refused, retried]) {
      const bytes = await historyBytes(out.workflowId);
      assert.ok(bytes.length > 1_000, 'a history was read');
      assert.equal(bytes.indexOf(marker), -1, `the marker is in no history field of ${out.workflowId}`);
    }

    const metrics = await (await fetch(`http://127.0.0.1:${workerEnv.metricsPort}/metrics`)).text();
    assert.match(metrics, /agent_/, 'the worker exposes its metrics');
    assert.ok(!metrics.includes(marker), 'no metric holds the marker');

    await waitFor(() => receiver.spans.some((span) => span.name === 'RunActivity:pollAgentJob'), {
      what: 'the worker to export its spans',
    });
    worker.child.kill('SIGTERM');
    assert.equal(await worker.exited, 0, worker.stderr());
    assert.ok(receiver.bodies.length > 0, 'spans were exported');
    const spanLeaks = receiver.bodies.flatMap((body) => {
      const at = body.indexOf(marker);
      return at === -1 ? [] : [body.slice(Math.max(0, at - 1500), at + 200)];
    });
    assert.deepEqual(spanLeaks, [], 'no span holds the marker');
    const output = worker.stdout() + worker.stderr();
    assert.ok(output.length > 0, 'the worker logged');
    const leaking = output.split('\n').filter((line) => line.includes(marker));
    assert.deepEqual(leaking, [], 'no worker log line holds the marker');
  } finally {
    worker.child.kill('SIGTERM');
    await worker.exited;
  }
});
