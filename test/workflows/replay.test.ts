/**
 * Replays the histories captured from real runs of 1.0 through today's workflow code. A change
 * that would break running workflows fails here; the second test shows that it can.
 *
 * test/histories holds 1.0's shapes (refreshed with `CAPTURE_HISTORIES=1 npx tsx test/run.ts
 * workflows`). From 1.0 on a change to workflow code ships as a new worker deployment version
 * (docs/decisions/0001): these histories must keep replaying, and a `patched()` change adds the
 * histories captured before it in a subfolder.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { temporalEnv } from '../harness.js';

const dir = new URL('../histories/', import.meta.url);
const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
  .filter((name) => name.endsWith('.json'))
  .sort();

function histories() {
  return files.map((name) => ({
    workflowId: name,
    history: historyFromJSON(JSON.parse(readFileSync(new URL(name, dir), 'utf8'))),
  }));
}

test('every saved history replays through the current workflow code', async () => {
  assert.ok(files.length >= 6, `saved histories: ${files.join(', ')}`);
  for (const name of [
    'poll-now.json',
    'poll-now-repeated.json',
    'follow-up-at-start.json',
    'quota-workflow.json',
  ]) {
    assert.ok(files.includes(name), `${name} is among the saved histories`);
  }
  const { workflowBundle } = await temporalEnv();
  const replayed: string[] = [];
  for await (const result of Worker.runReplayHistories({ workflowBundle }, histories())) {
    assert.equal(result.error, undefined, `${result.workflowId}: ${String(result.error)}`);
    replayed.push(result.workflowId);
  }
  assert.deepEqual(replayed, files);
});

test('a change that breaks running workflows fails the replay', async () => {
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./fixtures/changed-workflow.ts', import.meta.url)),
    logger: new DefaultLogger('ERROR'),
  });
  const failures: string[] = [];
  for await (const result of Worker.runReplayHistories({ workflowBundle }, histories())) {
    if (result.error) failures.push(`${result.workflowId}: ${result.error.name}`);
  }
  assert.equal(failures.length, files.length, failures.join('\n'));
  assert.match(failures[0] ?? '', /DeterminismViolationError/);
});
