/**
 * Keeps the history of a run under test/histories for the replay test, when CAPTURE_HISTORIES is
 * set, in the JSON form `temporal workflow show --output json` gives operators (the SDK's
 * `historyToJSON`), so a history an operator exported replays the same way.
 */
import { writeFileSync } from 'node:fs';
import type { WorkflowHandle } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import type { TemporalTestEnv } from './harness.js';

/** Whether this run refreshes the saved histories. */
export const capturing = Boolean(process.env.CAPTURE_HISTORIES);

/** Saves the history of `handle` (after it closes, unless it is long-lived) as `histories/<name>.json`. */
export async function captureHistory(
  env: TemporalTestEnv,
  handle: WorkflowHandle,
  name: string,
  options: { waitForClose?: boolean; runId?: string } = {},
): Promise<void> {
  if (!capturing) return;
  if (options.waitForClose !== false) await handle.result().catch(() => undefined);
  const run = options.runId ? env.client.workflow.getHandle(handle.workflowId, options.runId) : handle;
  writeFileSync(new URL(`histories/${name}.json`, import.meta.url), historyToJSON(await run.fetchHistory()));
}
