/**
 * Workflow code: how every bundle of it is made (the build's, the worker's, the tests' and the
 * benchmark's, baselines too, so all are measured on the same terms), and what the worker runs.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Logger } from '@temporalio/common';
import { bundleWorkflowCode, type BundleOptions } from '@temporalio/worker';
import { buildIdOf } from '../config/version.js';

/** The repository root (the parent of `src/`, or of `lib/` once compiled). */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const workflowsModule = (name: string) =>
  fileURLToPath(
    new URL(`../workflows/${name}.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
  );

/**
 * In every bundle, whatever a process's settings, since the bundle and so the build ID must not
 * depend on them: the interceptors that carry a caller's trace to the activities (idle without a
 * trace); the default payload converter that also marks an input that arrived unsealed on a worker
 * with a key ring; the default failure converter that keeps sealed a failure that arrived sealed.
 */
const TRACE_CONTEXT_MODULE = workflowsModule('trace-context');
const PAYLOAD_CONVERTER_MODULE = workflowsModule('unsealed-input');
const FAILURE_CONVERTER_MODULE = workflowsModule('sealed-failures');

/**
 * Bundle options for the workflows at `workflowsPath` (their index module). Every module is
 * preloaded: evaluated once per worker thread and shared, deep-frozen, by all its workflows
 * (`npm run bench:heap` measures the heap it saves); safe as they keep no state at module scope.
 * Webpack's context is the root, so any working directory gives the same bundle and build ID.
 */
export function workflowBundleOptions(workflowsPath: string) {
  return {
    workflowsPath,
    payloadConverterPath: PAYLOAD_CONVERTER_MODULE,
    failureConverterPath: FAILURE_CONVERTER_MODULE,
    workflowInterceptorModules: [TRACE_CONTEXT_MODULE],
    preloadModules: [workflowsPath, TRACE_CONTEXT_MODULE, PAYLOAD_CONVERTER_MODULE, FAILURE_CONVERTER_MODULE],
    webpackConfigHook: (config) => ({ ...config, context: ROOT }),
  } satisfies Partial<BundleOptions>;
}

/**
 * The workflow code the worker runs and its build ID: the bundle prebuilt by `npm run build`
 * (lib/workflow-bundle.js), else one bundled from the sources now with the options above, so the
 * same build ID; bundled here rather than through `workflowsPath`, so that the worker can hash what
 * it runs. `mode` says which, for the start log line (and bench/scenarios/startup.ts).
 */
export async function workflowCode(logger: Logger) {
  const prebuilt = fileURLToPath(new URL('../workflow-bundle.js', import.meta.url));
  if (existsSync(prebuilt)) {
    const buildId = buildIdOf(readFileSync(prebuilt, 'utf8'));
    return { workflowBundle: { codePath: prebuilt }, buildId, mode: 'prebuilt-bundle' as const };
  }
  const { code } = await bundleWorkflowCode({ ...workflowBundleOptions(workflowsModule('index')), logger });
  return { workflowBundle: { code }, buildId: buildIdOf(code), mode: 'workflowsPath' as const };
}
