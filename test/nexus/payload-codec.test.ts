/**
 * Nexus callers and the payload codec: the operation's input is written to the caller's history by
 * the caller's worker, and its result comes back as the handler's worker sealed it. So a caller
 * whose worker has the same ring keeps the prompt out of both namespaces' histories and reads the
 * result; a caller without the ring is refused (`UnsealedInput`) as any unsealed start is, in a
 * failure it can read, before any workflow or agent job.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { HandlerError } from 'nexus-rpc';
import { agentJobWorkflowId } from '../../src/client/index.js';
import { FailureType } from '../../src/contract.js';
import { payloadDataConverter } from '../../src/payload-codec/index.js';
import { FAST_POLL, startSimulatedWorld, uniqueId } from '../harness.js';
import { historyBytes } from '../history-bytes.js';
import { createdJobs } from '../simulator-stats.js';
import { startNexusPair, type NexusPair } from './nexus-pair.js';

const dir = mkdtempSync(join(tmpdir(), 'nexus-codec-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const ring = join(dir, 'payload-keys');
writeFileSync(ring, `nexus-1 ${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });

const world = await startSimulatedWorld('nexus-codec');
let sealed: NexusPair;
let plainCaller: NexusPair;

before(async () => {
  const handlerEnv = { TEMPORAL_PAYLOAD_KEYS_FILE: ring };
  // Two handler workers with the ring (one per pair), and callers with and without it.
  [sealed, plainCaller] = await Promise.all([
    startNexusPair(world, { handlerEnv, callerDataConverter: payloadDataConverter(ring) }),
    startNexusPair(world, { handlerEnv }),
  ]);
});

/** The agent-job workflow a keyed operation made, in the handler namespace. */
function jobWorkflow(projectId: string, key: string) {
  return world.env.client.workflow.getHandle(agentJobWorkflowId(projectId, key));
}

test('a caller with the same ring runs a job to its prLink, and the prompt is in neither namespace’s history', async () => {
  const marker = `secret-${randomUUID()}`;
  const projectId = world.project({ outcome: 'pr' }, 'nexus-codec');
  const key = uniqueId('release');
  const handle = await sealed.startCaller({
    job: { projectId, prompt: `Document the ${marker} flag`, key, poll: FAST_POLL },
  });
  const { first } = await handle.result();
  assert.equal(first.status, 'completed');
  assert.match(first.prLink ?? '', /\/pull\/\d+$/);
  assert.equal(createdJobs(world.sim, projectId), 1);

  const callerHistory = await historyBytes(sealed.caller.workflow.getHandle(handle.workflowId));
  const handlerHistory = await historyBytes(jobWorkflow(projectId, key));
  assert.ok(callerHistory.length > 500 && handlerHistory.length > 500, 'both histories were read');
  assert.equal(callerHistory.indexOf(marker), -1, 'the marker is in no event of the caller’s history');
  assert.equal(handlerHistory.indexOf(marker), -1, 'the marker is in no event of the job’s history');
  assert.ok(!sealed.handlerOutput().includes(marker), 'no handler worker output line holds it');
});

test('a caller without the ring is refused like any other unsealed start: UnsealedInput, readable, no agent job', async () => {
  const projectId = world.project({ outcome: 'pr' }, 'nexus-plain');
  const key = uniqueId('release');
  const handle = await plainCaller.startCaller({
    job: { projectId, prompt: 'Document the retry flag', key, poll: FAST_POLL },
  });
  // The caller's workflow fails with the refusal, which it can read without the ring.
  const err = await handle.result().then(
    () => assert.fail('the caller completed'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof WorkflowFailedError, String(err));
  const chain: unknown[] = [];
  for (let e: unknown = err; e instanceof Error; e = e.cause) chain.push(e);
  const failure = chain.find((e) => e instanceof ApplicationFailure && e.type === FailureType.UnsealedInput);
  assert.ok(failure instanceof ApplicationFailure, `no UnsealedInput in ${chain.map(String).join(' <- ')}`);
  assert.match(failure.message, /arrived in plain text/);
  assert.ok(
    chain.some((e) => e instanceof HandlerError && e.type === 'BAD_REQUEST'),
    'a BAD_REQUEST',
  );
  assert.equal(createdJobs(world.sim, projectId), 0, 'no agent job');
  await assert.rejects(jobWorkflow(projectId, key).describe(), WorkflowNotFoundError, 'no job workflow');
});
