/**
 * How workflow code is bundled, in one place for every bundle made from it: the prebuilt one
 * (`npm run build`), the worker's own when it starts from the sources, the tests' and the
 * benchmark's (the baselines' too, so that they are measured on the same terms).
 */
import { fileURLToPath } from 'node:url';
import type { BundleOptions } from '@temporalio/worker';

/** The repository root (the parent of `src/`, or of `lib/` once compiled). */
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * Bundle options for the workflows at `workflowsPath` (their index module).
 *
 * Every module is preloaded: evaluated once per worker thread and shared, deep-frozen, by all its
 * workflows instead of once per workflow (`npm run bench:heap` measures the heap it saves). Safe
 * because these modules keep no state at module scope; a write to one would throw.
 *
 * Webpack names modules relative to its context, which is the working directory unless set: the
 * root here, so the same sources make the same bundle (and build ID, src/worker-version.ts) from
 * any directory the build or the worker is started in.
 */
export function workflowBundleOptions(
  workflowsPath: string,
): Pick<BundleOptions, 'workflowsPath' | 'preloadModules' | 'webpackConfigHook'> {
  return {
    workflowsPath,
    preloadModules: [workflowsPath],
    webpackConfigHook: (config) => ({ ...config, context: ROOT }),
  };
}
