/**
 * Keeps the history of a run under test/histories for the replay test, when CAPTURE_HISTORIES is
 * set. The Temporal CLI writes it, in the same JSON form as `temporal workflow show` gives operators.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import type { WorkflowHandle } from '@temporalio/client';
import { findTemporalCli } from '../dev/temporal-cli.js';
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
  const cli = findTemporalCli();
  assert.ok(cli, 'capturing histories needs the Temporal CLI');
  const args = ['workflow', 'show', '--address', env.address, '--namespace', env.namespace];
  args.push('--workflow-id', handle.workflowId, '--output', 'json');
  if (options.runId) args.push('--run-id', options.runId);
  const shown = spawnSync(cli.path, args, { encoding: 'utf8' });
  assert.equal(shown.status, 0, shown.stderr);
  writeFileSync(new URL(`histories/${name}.json`, import.meta.url), shown.stdout);
}
