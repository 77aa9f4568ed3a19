/**
 * Nexus callers and the payload codec: the operation's input is written to the caller's history by
 * the caller's worker, and its result comes back as the handler's worker sealed it. So a caller
 * whose worker has the same ring keeps the prompt out of both namespaces' histories and reads the
 * result; a caller without the ring cannot read the result at all (its workflow task fails on the
 * sealed payload, and is retried until the caller gets the ring).
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { agentJobWorkflowId } from '../../src/client/index.js';
import { payloadDataConverter } from '../../src/payload-codec/index.js';
import { FAST_POLL, startSimulatedWorld, uniqueId, waitFor } from '../harness.js';
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

test('a caller without the ring cannot read the sealed result: its workflow task fails until it has the ring', async () => {
  const projectId = world.project({ outcome: 'pr' }, 'nexus-plain');
  const key = uniqueId('release');
  const handle = await plainCaller.startCaller({
    job: { projectId, prompt: 'Document the retry flag', key, poll: FAST_POLL },
  });
  // The job itself runs: the handler opens what arrived unsealed and seals what it starts.
  await waitFor(async () => (await jobWorkflow(projectId, key).describe()).status.name === 'COMPLETED', {
    what: 'the job workflow to complete',
  });
  const failure = await waitFor(
    async () => {
      const events = (await handle.fetchHistory()).events ?? [];
      return events.find((e) => e.workflowTaskFailedEventAttributes)?.workflowTaskFailedEventAttributes;
    },
    { what: 'the caller’s workflow task to fail on the sealed result', timeoutMs: 60_000 },
  );
  assert.match(failure.failure?.message ?? '', /binary\/encrypted/);
  const events = (await handle.fetchHistory()).events ?? [];
  const result = events.find((e) => e.nexusOperationCompletedEventAttributes)
    ?.nexusOperationCompletedEventAttributes?.result;
  assert.equal(Buffer.from(result?.metadata?.encoding ?? new Uint8Array()).toString(), 'binary/encrypted');
  assert.equal((await handle.describe()).status.name, 'RUNNING', 'the caller waits for the ring');
  await handle.terminate('test over: the caller has no ring');
});
