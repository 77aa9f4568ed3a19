/**
 * Replays the histories captured from real runs. test/histories holds this version's shapes
 * (refreshed with `CAPTURE_HISTORIES=1 npx tsx test/run.ts workflows/
 * client/follow-up-continue-as-new`) and replays them through today's workflow code: a change
 * that would break running workflows fails here; the last test shows that it can. The previous
 * release keeps its own in a subfolder (test/histories/1.2/), which replay on this build too:
 * without versioning a rolling update hands its open runs to this code (decision 0022).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { temporalEnv } from '../harness.js';
import { releaseSource, RELEASES } from '../release-source.js';

const dir = new URL('../histories/', import.meta.url);

/** The JSON files of a folder of test/histories, sorted. */
function filesIn(folder: string): string[] {
  return readdirSync(new URL(folder, dir), { encoding: 'utf8' })
    .filter((name) => name.endsWith('.json'))
    .sort();
}

const files = filesIn('./');

function histories(folder = './', names = files) {
  return names.map((name) => ({
    workflowId: name,
    history: historyFromJSON(JSON.parse(readFileSync(new URL(folder + name, dir), 'utf8'))),
  }));
}

test('every saved history replays through the current workflow code', async () => {
  assert.ok(files.length >= 6, `saved histories: ${files.join(', ')}`);
  for (const name of [
    'poll-now.json',
    'poll-now-repeated.json',
    'poll-by-retry.json',
    'follow-up-at-start.json',
    'quota-one-way.json',
    'timed-out-during-message.json',
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

test("the previous release's histories replay on its own build and on this one, where an unversioned upgrade takes its open runs", async () => {
  const folder = './1.2/';
  const names = filesIn(folder);
  assert.ok(names.length >= 20, `1.2 histories: ${names.join(', ')}`);
  const build = await bundleWorkflowCode({
    workflowsPath: join(releaseSource('1.2'), 'src/workflows/index.ts'),
    logger: new DefaultLogger('ERROR'),
  });
  const { workflowBundle } = await temporalEnv();
  for (const [what, bundle] of [
    [`its own build (${RELEASES['1.2']})`, build],
    ['this build', workflowBundle],
  ] as const) {
    const replayed: string[] = [];
    for await (const result of Worker.runReplayHistories(
      { workflowBundle: bundle },
      histories(folder, names),
    )) {
      assert.equal(result.error, undefined, `${result.workflowId} on ${what}: ${String(result.error)}`);
      replayed.push(result.workflowId);
    }
    assert.deepEqual(replayed, names, what);
  }
});
