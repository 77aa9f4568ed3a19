/**
 * How workflow code is bundled, in one place for every bundle made from it: the prebuilt one
 * (`npm run build`), the worker's own when it starts from the sources, the tests' and the
 * benchmark's (the baselines' too, so that they are measured on the same terms).
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { BundleOptions } from '@temporalio/worker';

/** The repository root (the parent of `src/`, or of `lib/` once compiled). */
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * The SDK's OpenTelemetry workflow interceptors (src/observability/tracing.ts), in every bundle
 * whether tracing is on or not: the bundle, and so the build ID, must not depend on a process's
 * settings. With tracing off, their spans end in a no-op processor.
 */
export const WORKFLOW_TRACING_MODULE = createRequire(import.meta.url).resolve(
  '@temporalio/interceptors-opentelemetry-v2/lib/workflow-interceptors',
);

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
): Pick<BundleOptions, 'workflowsPath' | 'workflowInterceptorModules' | 'preloadModules' | 'webpackConfigHook'> {
  return {
    workflowsPath,
    workflowInterceptorModules: [WORKFLOW_TRACING_MODULE],
    preloadModules: [workflowsPath],
    webpackConfigHook: (config) => ({ ...config, context: ROOT }),
  };
}
