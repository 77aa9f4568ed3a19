/**
 * Job-end notifications from the processes a team runs: a worker process whose targets come from
 * AGENT_NOTIFY_TARGETS_FILE (a Kubernetes-style Secret volume), and the starter's `--notify`. The
 * notice reaches a real HTTP receiver and verifies; an unknown name exits 2 with nothing created;
 * a target added to the Secret works without a restart; a receiver that is down is retried and
 * given up at the bound. No line the worker or the starter printed holds a target's URL (a marker
 * in its path, its host and port) or its secret, although undici's own errors name them.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { request } from 'undici';
import { freePorts } from '../../dev/dev-server.js';
import { FailureType } from '../../src/contract.js';
import { jobEndNotificationId } from '../../src/workflows/job-end-notification/workflow.js';
import {
  runStarter,
  starterProcessEnv,
  startSimulatedWorld,
  startWorkerProcess,
  waitFor,
  workflowFailure,
} from '../harness.js';
import { startNotifyReceiver, verifiedNotice } from '../notify-receiver.js';
import { SecretVolume } from '../secret-volume.js';
import { createdJobs } from '../simulator-stats.js';

const root = mkdtempSync(join(tmpdir(), 'notify-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));

const receiver = await startNotifyReceiver();
const [closedPort] = (await freePorts(1)) as [number];
const MARKER = `url-marker-${randomUUID()}`;
const SECRET = `secret-marker-${randomUUID()}`;
const path = (name: string) => `/${MARKER}/${name}`;
const target = (name: string, base = receiver.url) => ({
  type: 'webhook',
  url: `${base}${path(name)}`,
  secret: SECRET,
});
const targets = { hook: target('hook'), down: target('down', `http://127.0.0.1:${closedPort}`) };
const secret = new SecretVolume(root, JSON.stringify(targets));

const world = await startSimulatedWorld('notify-e2e', { durationMs: 200 });
const workerEnv = await world.workerEnv({
  AGENT_NOTIFY_TARGETS_FILE: secret.path,
  AGENT_NOTIFY_RETRY_FOR: '3s',
});
const starterEnv = starterProcessEnv(world.env, workerEnv.taskQueue);
const worker = await startWorkerProcess(workerEnv);

/** Runs `start --wait --json` with `--notify name`. */
async function startWithNotify(name: string) {
  const projectId = world.project({ outcome: 'pr' });
  const args = ['--project', projectId, '--prompt', 'Add a page', '--notify', name];
  const run = await runStarter([...args, '--wait', '--json', '--poll-interval', '50ms'], starterEnv);
  return { projectId, run };
}

/** Whatever a process printed holds none of the target's URL parts or its secret. */
function assertNoTargetSecrets(output: string, who: string): void {
  for (const secretPart of [MARKER, SECRET, receiver.url.replace('http://', ''), `127.0.0.1:${closedPort}`]) {
    assert.ok(!output.includes(secretPart), `${who} printed ${secretPart}`);
  }
}

test('the worker names its targets, never their URLs, and a job started with --notify reaches the receiver, signed', async () => {
  assert.match(worker.stdout(), /"notifyTargets":\["hook","down"\]/);
  const { run } = await startWithNotify('hook');
  assert.equal(run.code, 0, run.stderr);
  const { workflowId, prLink } = JSON.parse(run.stdout) as { workflowId: string; prLink: string };
  const request = await waitFor(
    () => receiver.to(path('hook')).find((r) => r.body.includes(JSON.stringify(workflowId))),
    { what: 'the notice at the receiver' },
  );
  const notice = verifiedNotice(request, SECRET);
  assert.equal(notice.outcome, 'completed');
  assert.equal(notice.prLink, prLink);
  assertNoTargetSecrets(run.stdout + run.stderr, 'the starter');
  // The delivery is counted by target name, and the metrics name no URL.
  const metrics = await waitFor(
    async () => {
      const text = await (await fetch(`http://127.0.0.1:${workerEnv.metricsPort}/metrics`)).text();
      const counted = /agent_job_notifications_total\{[^}]*outcome="delivered"[^}]*target="hook"[^}]*\} 1/;
      return counted.test(text) ? text : null;
    },
    { what: 'the delivery in the metrics', timeoutMs: 15_000, intervalMs: 500 },
  );
  assertNoTargetSecrets(metrics, 'the metrics');
});

test('an unknown --notify name exits 2 naming UnknownNotifyTarget, with no agent job created', async () => {
  const { projectId, run } = await startWithNotify('nope');
  assert.equal(run.code, 2, run.stderr);
  const { error } = JSON.parse(run.stdout) as { error: { type: string; message: string } };
  assert.equal(error.type, FailureType.UnknownNotifyTarget);
  assert.match(error.message, /Notification target "nope" is unknown/);
  assert.equal(createdJobs(world.sim, projectId), 0);
  const bad = await runStarter(['--project', projectId, '--prompt', 'x', '--notify', 'no/slash'], starterEnv);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /invalid input: notify: "no\/slash" is not a target name/);
});

test('batch --notify tells the target of every line without its own; a bad name starts nothing', async () => {
  const projectId = world.project({ outcome: 'pr' });
  const file = join(root, 'batch.jsonl');
  writeFileSync(
    file,
    ['First page', 'Second page'].map((prompt) => JSON.stringify({ projectId, prompt })).join('\n'),
  );
  const bad = await runStarter(['batch', file, '--notify', 'no/slash'], starterEnv);
  assert.equal(bad.code, 2, bad.stderr);
  assert.equal(createdJobs(world.sim, projectId), 0);
  const run = await runStarter(['batch', file, '--notify', 'hook', '--wait', '--json'], starterEnv);
  assert.equal(run.code, 0, run.stderr);
  const workflowIds = run.stdout
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as { workflowId?: string }).workflowId)
    .filter((id): id is string => id !== undefined);
  assert.equal(new Set(workflowIds).size, 2, run.stdout);
  for (const workflowId of workflowIds) {
    await waitFor(() => receiver.to(path('hook')).some((r) => r.body.includes(JSON.stringify(workflowId))), {
      what: `the notice of ${workflowId}`,
    });
  }
});

test('a target added to the Secret is used without a restart', async () => {
  secret.swap(JSON.stringify({ ...targets, later: target('later') }));
  await waitFor(
    async () => {
      const { run } = await startWithNotify('later');
      return run.code === 0;
    },
    { what: 'the worker to read the new target', timeoutMs: 30_000, intervalMs: 500 },
  );
  await waitFor(() => receiver.to(path('later')).length > 0, { what: 'a notice at the new target' });
  await worker.waitForOutput(
    /notification targets reloaded from AGENT_NOTIFY_TARGETS_FILE/,
    'the reload line',
  );
});

test('a receiver that is down: the job returns, the notification gives up at the bound, and no output names the URL', async () => {
  const { run } = await startWithNotify('down');
  assert.equal(run.code, 0, run.stderr);
  const { workflowId } = JSON.parse(run.stdout) as { workflowId: string };
  const { runId } = await world.env.client.workflow.getHandle(workflowId).describe();
  const failure = await workflowFailure(world.env.client.workflow.getHandle(jobEndNotificationId(runId)));
  assert.equal(failure.type, FailureType.NoticeUndelivered);
  await worker.waitForOutput(
    /job-end notice not delivered.*connection refused \(ECONNREFUSED\)/,
    'an attempt logged',
  );
  assertNoTargetSecrets(failure.message, 'the failure');
  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
  assertNoTargetSecrets(worker.stdout() + worker.stderr(), 'the worker');
  // What the check guards against: undici's own error for the same request names the address.
  const raw = (await request(targets.down.url, { method: 'POST' }).catch((e: unknown) => e)) as Error;
  assert.ok(
    `${raw.message} ${String((raw.cause as Error | undefined)?.message)}`.includes(`127.0.0.1:${closedPort}`),
  );
});
