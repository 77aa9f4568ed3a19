/**
 * How workflow code is bundled, in one place for every bundle made from it: the prebuilt one
 * (`npm run build`), the worker's own when it starts from the sources, the tests' and the
 * benchmark's (the baselines' too, so that they are measured on the same terms).
 */
import type { BundleOptions } from '@temporalio/worker';

/**
 * Bundle options for the workflows at `workflowsPath` (their index module).
 *
 * Every module of the bundle is preloaded: evaluated once in the worker thread's reusable V8
 * context and shared, deep-frozen, by all the workflows it runs, instead of evaluated again for
 * each workflow (the SDK's default for modules outside its own). With it and the leaner wait
 * between polls, `npm run bench:heap` measured 77 KiB of JavaScript heap per open workflow of this
 * worker instead of 115 (docs/PERFORMANCE.md); this was about 30 KiB of it. Safe because these
 * modules keep no state at module scope (constants, functions, classes, and activity proxies that
 * read the running workflow at call time); a module that wrote to its own module-scope objects
 * would throw, since the shared copy is frozen.
 */
export function workflowBundleOptions(
  workflowsPath: string,
): Pick<BundleOptions, 'workflowsPath' | 'preloadModules'> {
  return { workflowsPath, preloadModules: [workflowsPath] };
}
