/**
 * How workflow code is bundled, in one place for every bundle made from it: the prebuilt one
 * (`npm run build`), the worker's own when it starts from the sources, the tests' and the
 * benchmark's (the baselines' too, so that they are measured on the same terms).
 */
import type { BundleOptions } from '@temporalio/worker';

/**
 * Bundle options for the workflows at `workflowsPath` (their index module).
 *
 * Every module is preloaded: evaluated once per worker thread and shared, deep-frozen, by all its
 * workflows instead of once per workflow (`npm run bench:heap` measures the heap it saves). Safe
 * because these modules keep no state at module scope; a write to one would throw.
 */
export function workflowBundleOptions(
  workflowsPath: string,
): Pick<BundleOptions, 'workflowsPath' | 'preloadModules'> {
  return { workflowsPath, preloadModules: [workflowsPath] };
}
