/**
 * The Temporal UI in a real browser (Debian's Chromium, headless) with the codec server: a job whose
 * prompt holds a marker runs sealed (a worker process with the ring); the UI server as the demo
 * runs it (2.54.1, built from the module proxy), given the codec server as its codec endpoint,
 * shows the workflow's input decoded, marker and all; the same UI server without a codec endpoint
 * shows the input sealed: the ciphertext, not the marker.
 */
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Client } from '@temporalio/client';
import { freePort, startTemporalUi } from '../../dev/dev-server.js';
import { WORKFLOW_TYPE } from '../../src/contract.js';
import { payloadDataConverter } from '../../src/payload-codec/index.js';
import { startHeadlessChromium } from '../headless-chromium.js';
import { onCleanup, spawnTs, startSimulatedWorld, startWorkerProcess, uniqueId } from '../harness.js';

const root = mkdtempSync(join(tmpdir(), 'ui-codec-e2e-'));
after(() => rmSync(root, { recursive: true, force: true }));
const ring = join(root, 'payload-keys');
writeFileSync(ring, `ui-1 ${randomBytes(32).toString('base64')}\n`);

test('the UI shows the workflow input decoded through the codec server, and sealed without it', async () => {
  const world = await startSimulatedWorld('ui-codec', { durationMs: 200 });
  const workerEnv = await world.workerEnv({ TEMPORAL_PAYLOAD_KEYS_FILE: ring });
  await startWorkerProcess(workerEnv);
  const marker = `ui-marker-${randomUUID()}`;
  const client = new Client({
    connection: world.env.client.connection,
    namespace: world.env.namespace,
    dataConverter: payloadDataConverter(ring),
  });
  const workflowId = uniqueId('ui-codec');
  const handle = await client.workflow.start(WORKFLOW_TYPE, {
    taskQueue: workerEnv.taskQueue,
    workflowId,
    args: [{ projectId: world.project({ outcome: 'pr' }), prompt: `Document ${marker}` }],
  });
  await handle.result();
  // The input as the server stores it: what a UI without the codec can only show.
  const [started] = (await world.env.client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const sealed = started?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]?.data;
  assert.ok(sealed, 'the input has a payload');
  const ciphertext = Buffer.from(sealed).toString('base64');
  assert.ok(!Buffer.from(sealed).toString('utf8').includes(marker), 'the stored input is sealed');

  // The endpoint is the UI's setting, and the UI's origin the codec server's: the port comes first.
  const codecPort = await freePort();
  const localToken = 'ui-codec-e2e-local-token';
  const endpoint = `http://127.0.0.1:${codecPort}/${localToken}`;
  const withCodec = await startTemporalUi(world.env.address, endpoint);
  onCleanup(() => withCodec.stop());
  const withoutCodec = await startTemporalUi(world.env.address, null);
  onCleanup(() => withoutCodec.stop());
  const codecServer = spawnTs('src/codec-server.ts', [], {
    ...process.env,
    TEMPORAL_PAYLOAD_KEYS_FILE: ring,
    CODEC_SERVER_ADDRESS: `127.0.0.1:${codecPort}`,
    CODEC_SERVER_LOCAL_TOKEN: localToken,
    CODEC_SERVER_ALLOWED_ORIGINS: withCodec.url,
  });
  await codecServer.waitForOutput(/codec server running/, 'the codec server to listen');

  const browser = await startHeadlessChromium();
  const path = `/namespaces/${world.env.namespace}/workflows/${encodeURIComponent(workflowId)}`;

  const decoded = await browser.open(`${withCodec.url}${path}`);
  const shown = await decoded.waitForText(
    (text) => text.includes(marker),
    'the UI to show the input decoded',
  );
  assert.match(shown, new RegExp(`"prompt"\\s*:\\s*"Document ${marker}"`));
  assert.match(
    codecServer.stdout(),
    /"msg":"codec request".*"path":"\/decode"/,
    'the browser called /decode',
  );

  const sealedPage = await browser.open(`${withoutCodec.url}${path}`);
  const shownSealed = await sealedPage.waitForText(
    (text) => text.includes(ciphertext.slice(0, 40)),
    'the UI without a codec endpoint to show the input as stored',
  );
  assert.ok(!shownSealed.includes(marker), 'without the codec server the marker is not shown');

  await browser.stop();
  codecServer.child.kill('SIGTERM');
  assert.equal(await codecServer.exited, 0);
  assert.ok(!codecServer.stdout().includes(marker), 'the codec server logs no payload');
});
