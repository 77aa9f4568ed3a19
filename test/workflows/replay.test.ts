/**
 * Replays the histories captured from real runs. test/histories holds this version's shapes
 * (refreshed with `CAPTURE_HISTORIES=1 npx tsx test/run.ts workflows/
 * client/follow-up-continue-as-new`) and replays them through today's workflow code: a change
 * that would break running workflows fails here; the last test shows that it can. Each earlier
 * release keeps its own in a subfolder (test/histories/1.0/, 1.1/), which replay on that release's
 * own build, extracted from git: its runs are PINNED, so they finish on the workers of that build
 * (docs/decisions/0001), never on this code.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import {
  QUOTA_ONE_TIMER_PATCH,
  QUOTA_WAITING_ANSWER_PATCH,
} from '../../src/workflows/legacy-quota/workflow.js';
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
    'quota-workflow.json',
    'quota-workflow-one-timer.json',
    'quota-one-way.json',
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

/** The IDs of the patches a saved history's markers record (the SDK core's `core_patch` markers). */
function patchesOf(folder: string, name: string): string[] {
  return eventsOf(folder, name).flatMap(({ markerRecordedEventAttributes: marker }) => {
    const data =
      marker?.markerName === 'core_patch' ? marker.details?.['patch-data']?.payloads?.[0]?.data : undefined;
    return data === undefined
      ? []
      : [(JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as { id: string }).id];
  });
}

/** The events of a saved history, as JSON: only the attributes these tests read. */
function eventsOf(folder: string, name: string) {
  return (
    JSON.parse(readFileSync(new URL(folder + name, dir), 'utf8')) as {
      events: Array<{
        markerRecordedEventAttributes?: PatchMarker;
        workflowExecutionSignaledEventAttributes?: { signalName?: string };
      }>;
    }
  ).events;
}

interface PatchMarker {
  markerName?: string;
  details?: Record<string, { payloads?: Array<{ data?: string }> }>;
}

test("quota workflow histories of earlier builds replay on this build's frozen copy of their code, 1.0's too", async () => {
  // The quota workflow is not pinned: a rollout moves the earlier builds' quota runs (type
  // projectQuotaWorkflow, src/workflows/legacy-quota/) onto this build mid-run, where they replay
  // the code that made them; runs from before the one-timer loop go on with the loop that made
  // them (the patch is absent) until they continue as new. This build's own quota workflow is
  // another type (projectQuota, quota-one-way.json), which no earlier run ever meets.
  const patchIn = (folder: string, name: string) => patchesOf(folder, name).includes(QUOTA_ONE_TIMER_PATCH);
  const before: Array<[string, string]> = [
    ['./', 'quota-workflow.json'],
    ['./1.0/', 'quota-workflow.json'],
  ];
  for (const [folder, name] of before) assert.equal(patchIn(folder, name), false, `${folder}${name}`);
  assert.equal(patchIn('./', 'quota-workflow-one-timer.json'), true, 'the new loop records its patch');
  const { workflowBundle } = await temporalEnv();
  const replayed: string[] = [];
  const all: Array<[string, string]> = [...before, ['./', 'quota-workflow-one-timer.json']];
  for (const [folder, name] of all) {
    for await (const result of Worker.runReplayHistories({ workflowBundle }, histories(folder, [name]))) {
      assert.equal(result.error, undefined, `${folder}${name}: ${String(result.error)}`);
      replayed.push(`${folder}${result.workflowId}`);
    }
  }
  assert.equal(replayed.length, 3, replayed.join(', '));
});

test('a quota run that took waiting signals on the build before their answer replays on this one without answering; an answer records its patch', async () => {
  // The quota workflow follows rollouts: a run that heard a new requester's `quotaWaiting` (with
  // its workflow ID) on 1.x's older build, which never answers, moves onto this build and replays
  // that signal. The capture (from 1.x's build b0e9d4c) holds one for a request the run does not
  // hold and one for a request it does.
  const before = 'quota-waiting-before-answer.json';
  const answered = 'quota-waiting-answered.json';
  const waitingSignals = (name: string) =>
    eventsOf('./', name).filter(
      (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'quotaWaiting',
    ).length;
  assert.equal(waitingSignals(before), 2, before);
  assert.ok(waitingSignals(answered) >= 1, answered);
  assert.equal(
    patchesOf('./', before).includes(QUOTA_WAITING_ANSWER_PATCH),
    false,
    'the older build recorded no patch',
  );
  assert.equal(
    patchesOf('./', answered).includes(QUOTA_WAITING_ANSWER_PATCH),
    true,
    'the answer records its patch',
  );
  const { workflowBundle } = await temporalEnv();
  for await (const result of Worker.runReplayHistories(
    { workflowBundle },
    histories('./', [before, answered]),
  )) {
    assert.equal(result.error, undefined, `${result.workflowId}: ${String(result.error)}`);
  }
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

test("a bundle without the earlier builds' quota workflow type cannot run their quota runs: it stays exported", async () => {
  // What a worker of this build would do with an earlier build's quota run that follows rollouts,
  // had it dropped the type (src/workflows/legacy-quota/): fail every workflow task of the run,
  // which the server retries on the current version for as long as the run is open.
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./fixtures/changed-workflow.ts', import.meta.url)),
    logger: new DefaultLogger('ERROR'),
  });
  let replayed = 0;
  for await (const result of Worker.runReplayHistories(
    { workflowBundle },
    histories('./', ['quota-workflow.json']),
  )) {
    assert.match(
      String(result.error),
      /Failed to initialize workflow of type 'projectQuotaWorkflow': no such function/,
    );
    replayed++;
  }
  assert.equal(replayed, 1);
});

for (const release of ['1.0', '1.1'] as const) {
  test(`${release} histories replay on the ${release} build, where their PINNED runs finish; its quota workflow's on this one`, async () => {
    const folder = `./${release}/`;
    const names = filesIn(folder);
    assert.ok(names.length >= 17, `${release} histories: ${names.join(', ')}`);
    const source = releaseSource(release);
    const build = await bundleWorkflowCode({
      workflowsPath: join(source, 'src/workflows/index.ts'),
      logger: new DefaultLogger('ERROR'),
    });
    const replayed: string[] = [];
    for await (const result of Worker.runReplayHistories(
      { workflowBundle: build },
      histories(folder, names),
    )) {
      assert.equal(
        result.error,
        undefined,
        `${result.workflowId} on ${RELEASES[release]}: ${String(result.error)}`,
      );
      replayed.push(result.workflowId);
    }
    assert.deepEqual(replayed, names);
    const { workflowBundle } = await temporalEnv();
    const failed: string[] = [];
    for await (const result of Worker.runReplayHistories({ workflowBundle }, histories(folder, names))) {
      if (result.error) failed.push(result.workflowId);
    }
    // Their jobs' code changed since (1.0 ran a timer and a local activity per poll; 1.1 queued for
    // the quota through an enqueue activity): such a run that reached this build would fail its
    // next workflow task, which is why these runs stay pinned.
    const changed = release === '1.0' ? 'completed-with-pr.json' : 'quota-queued-create.json';
    assert.ok(failed.includes(changed), `failed on this build: ${failed.join(', ')}`);
    // The quota workflow is the exception: it follows rollouts (docs/versioning.md), so this build
    // replays it, on the frozen earlier protocol (src/workflows/legacy-quota/).
    assert.ok(
      !failed.includes('quota-workflow.json'),
      `${release}'s quota workflow history replays on this build`,
    );
  });
}
