/**
 * Tracing as a user turns it on: the standard OTEL_* variables on the real worker and starter
 * processes, and an OTLP/HTTP receiver on a socket in place of a collector. The starter's and the
 * worker's spans arrive in one trace; switched off, with the receiver's endpoint still set (where
 * spans would go were the switch ignored), nothing is sent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WORKFLOW_TYPE } from '../../src/contract.js';
import { spawnTs, starterProcessEnv, startSimulatedWorld, uniqueId, waitFor } from '../harness.js';
import { startReceiver } from '../otlp-receiver.js';
import { requestsTo } from '../simulator-stats.js';

test('with OTEL_EXPORTER_OTLP_ENDPOINT set, the starter and the worker export one trace over OTLP; switched off with it still set, nothing', async () => {
  const { env, sim, apiKey, workerEnv } = await startSimulatedWorld('otlp', { durationMs: 200 });
  const receiver = await startReceiver();
  const otel = { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100' };
  const traced = await workerEnv(otel);
  const worker = spawnTs('src/worker.ts', [], traced.vars);
  await worker.waitForOutput(/worker running/, 'the traced worker to run');
  assert.match(worker.stdout() + worker.stderr(), new RegExp(`"tracing":"${receiver.url}"`));

  const starterVars = starterProcessEnv(env, traced.taskQueue);
  const projectId = uniqueId('otlp');
  const args = ['--project', projectId, '--prompt', 'Document it', '--wait', '--poll-interval', '50ms'];
  const starter = spawnTs('src/starter.ts', args, { ...starterVars, ...otel });
  assert.equal(await starter.exited, 0, starter.stderr());

  // The worker's create activity and its HTTP call sit under the starter's start span.
  const create = await waitFor(
    () =>
      receiver.spans.find(
        (span) => span.name === 'RunActivity:createAgentJob' && span.service === 'agent-job-worker',
      ),
    { what: 'the worker to export the create activity' },
  );
  const start = receiver.spans.find((span) => span.spanId === create.parentSpanId);
  assert.equal(start?.name, `StartWorkflow:${WORKFLOW_TYPE}`);
  assert.equal(start?.service, 'agent-job-starter', 'the start span came from the starter process');
  await waitFor(
    () =>
      receiver.spans.some(
        (span) => span.parentSpanId === create.spanId && span.name === 'POST /v2/agent/{projectId}/job',
      ),
    { what: 'the worker to export the create call under its activity' },
  );
  assert.ok(!receiver.bodies.some((body) => body.includes(apiKey)), 'the API key was exported');

  // The traced worker flushes what it holds as it stops; after that, a run with tracing switched
  // off sends nothing. Both processes are still told this receiver's endpoint (and the short batch
  // delay), so a switch they ignored would send their spans here: the worker is switched off with
  // OTEL_SDK_DISABLED, the starter with OTEL_TRACES_EXPORTER=none. Without any endpoint the check
  // could not fail: a worker tracing by mistake would send to the exporter's default
  // (localhost:4318), never to this receiver.
  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0, worker.stderr());
  const before = receiver.bodies.length;
  const untraced = await workerEnv({ ...otel, OTEL_SDK_DISABLED: 'true' });
  const quiet = spawnTs('src/worker.ts', [], untraced.vars);
  await quiet.waitForOutput(/worker running/, 'the untraced worker to run');
  assert.match(quiet.stdout() + quiet.stderr(), /"tracing":"off"/);
  const quietProject = uniqueId('otlp-off');
  const quietStart = spawnTs('src/starter.ts', ['--project', quietProject, ...args.slice(2)], {
    ...starterVars,
    ...otel,
    OTEL_TRACES_EXPORTER: 'none',
    TEMPORAL_TASK_QUEUE: untraced.taskQueue,
  });
  assert.equal(await quietStart.exited, 0, quietStart.stderr());
  // The untraced run did what the traced one exported spans for: a create and polls at the API.
  assert.ok(requestsTo(sim, quietProject, 'create') >= 1, 'the untraced worker created its agent job');
  // Stopping flushes any batch a tracing worker would hold.
  quiet.child.kill('SIGTERM');
  assert.equal(await quiet.exited, 0);
  assert.deepEqual(
    receiver.bodies.slice(before).map((body) => body.slice(0, 200)),
    [],
    'a switched-off worker or starter sent spans',
  );
});
