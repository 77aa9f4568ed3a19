/**
 * The workflow code the worker runs and the build ID derived from it: the bundle prebuilt by
 * `npm run build`, else one bundled from the sources at start.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Logger } from '@temporalio/common';
import { bundleWorkflowCode, type WorkflowBundleOption } from '@temporalio/worker';
import { workflowBundleOptions } from './bundle-options.js';
import { buildIdOf } from '../config/version.js';

/** The workflow code the worker runs, and the build ID derived from it (./version.ts). */
export interface WorkflowCode {
  workflowBundle: WorkflowBundleOption;
  buildId: string;
  /** Where it came from, for the start log line (and bench/scenarios/startup.ts). */
  mode: 'prebuilt-bundle' | 'workflowsPath';
}

/**
 * The bundle prebuilt by `npm run build` (lib/workflow-bundle.js), else one bundled from the sources now,
 * with the options and so the build ID `npm run build` gives the same sources. The worker bundles
 * them itself rather than through `workflowsPath`, so that it can hash what it runs.
 */
export async function workflowCode(logger: Logger): Promise<WorkflowCode> {
  const prebuilt = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));
  if (existsSync(prebuilt)) {
    return {
      workflowBundle: { codePath: prebuilt },
      buildId: buildIdOf(readFileSync(prebuilt, 'utf8')),
      mode: 'prebuilt-bundle',
    };
  }
  const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
  const { code } = await bundleWorkflowCode({
    ...workflowBundleOptions(fileURLToPath(new URL(`../workflows/index.${ext}`, import.meta.url))),
    logger,
  });
  return { workflowBundle: { code }, buildId: buildIdOf(code), mode: 'workflowsPath' };
}
