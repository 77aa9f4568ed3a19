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

/**
 * Whether the history `name` has the shape of docs/decisions/0002: a workflow task
 * that ends with a local activity's marker and nothing after it, while the run goes on (the
 * result reached the workflow with the next task's events). Captured from a real run under load
 * (`starter message --wait` queries while it polls); it cannot be produced on demand.
 */
function lateLocalActivityResult(name: string): boolean {
  const events = (JSON.parse(readFileSync(new URL(name, dir), 'utf8')) as { events: HistoryEvent[] }).events;
  const isCommand = (event: HistoryEvent | undefined) =>
    event !== undefined && COMMAND_EVENTS.some((type) => event.eventType === `EVENT_TYPE_${type}`);
  return events.some(
    (event, i) =>
      event.eventType === 'EVENT_TYPE_WORKFLOW_TASK_COMPLETED' &&
      events[i + 1]?.markerRecordedEventAttributes?.markerName === 'core_local_activity' &&
      events[i + 2] !== undefined &&
      !isCommand(events[i + 2]),
  );
}

/** The events a workflow task's commands record (those this workflow issues). */
const COMMAND_EVENTS = [
  'MARKER_RECORDED',
  'TIMER_STARTED',
  'TIMER_CANCELED',
  'ACTIVITY_TASK_SCHEDULED',
  'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES',
  'WORKFLOW_EXECUTION_UPDATE_ACCEPTED',
  'WORKFLOW_EXECUTION_UPDATE_COMPLETED',
  'WORKFLOW_EXECUTION_COMPLETED',
  'WORKFLOW_EXECUTION_FAILED',
  'WORKFLOW_EXECUTION_CONTINUED_AS_NEW',
  'SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED',
];

interface HistoryEvent {
  eventType: string;
  markerRecordedEventAttributes?: { markerName: string };
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
  assert.ok(
    files.includes('late-local-activity-result.json') &&
      lateLocalActivityResult('late-local-activity-result.json'),
    'a history where the SDK handed a poll result over one workflow task late',
  );
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
