/**
 * Replays the histories captured from real runs through today's workflow code. A change that
 * would break running workflows fails here; the second test shows that it can.
 *
 * test/histories holds today's shapes (refreshed with `CAPTURE_HISTORIES=1 npx tsx test/run.ts
 * workflows`); each subfolder keeps the histories of an earlier version, captured before a
 * patched change, so the unpatched path keeps replaying until no such run can remain. A change
 * made without a patch because it issues the same commands keeps its earlier histories too
 * (before-lean-poll-wait/), so that claim stays checked from both sides.
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
 * Whether the history `name` has the shape ONE_TIMER_PER_POLL_WAIT_PATCH is for: a workflow task
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
  assert.ok(
    files.some((name) => name.startsWith('before-local-activity-polls/')) &&
      files.some((name) => name.startsWith('before-bounded-api-calls/')) &&
      files.some((name) => name.startsWith('before-one-timer-per-poll-wait/')) &&
      files.some((name) => name.startsWith('before-lean-poll-wait/')) &&
      files.some((name) => !name.includes('/')),
    'histories from before each patch and from today',
  );
  assert.ok(
    files.includes('before-lean-poll-wait/poll-now.json') && files.includes('poll-now-repeated.json'),
    'histories of pollNow before the shared wait scope, and of waits after a cancelled one',
  );
  assert.ok(
    files.includes('before-follow-up-at-start/attach-with-prompt.json') &&
      files.includes('follow-up-at-start.json'),
    'histories of { jobId, prompt } from before (prompt ignored) and after the follow-up patch',
  );
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
