/**
 * How workflow code is bundled, in one place for every bundle made from it: the prebuilt one
 * (`npm run build`), the worker's own when it starts from the sources, the tests' and the
 * benchmark's (the baselines' too, so that they are measured on the same terms).
 */
import { fileURLToPath } from 'node:url';
import type { BundleOptions } from '@temporalio/worker';

/** The repository root (the parent of `src/`, or of `lib/` once compiled). */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The workflow interceptors that carry a caller's trace to the activities, in every bundle
 * whether tracing is on or not: the bundle, and so the build ID, must not depend on a process's
 * settings. Without a trace they do nothing.
 */
const TRACE_CONTEXT_MODULE = fileURLToPath(
  new URL(`../workflows/trace-context.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

/**
 * The payload converter of every bundle (src/workflows/unsealed-input.ts): the default one, which
 * also marks an input that arrived unsealed on a worker with a payload key ring. In every bundle,
 * ring or not, for the same reason as the interceptors.
 */
const PAYLOAD_CONVERTER_MODULE = fileURLToPath(
  new URL(`../workflows/unsealed-input.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

/**
 * The failure converter of every bundle (src/workflows/sealed-failures.ts): the default one, which
 * keeps sealed a failure that arrived sealed, and one built around it.
 */
const FAILURE_CONVERTER_MODULE = fileURLToPath(
  new URL(`../workflows/sealed-failures.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

/**
 * Bundle options for the workflows at `workflowsPath` (their index module).
 *
 * Every module is preloaded (the interceptors too): evaluated once per worker thread and shared, deep-frozen, by all its
 * workflows instead of once per workflow (`npm run bench:heap` measures the heap it saves). Safe
 * because these modules keep no state at module scope; a write to one would throw.
 *
 * Webpack names modules relative to its context, which is the working directory unless set: the
 * root here, so the same sources make the same bundle (and build ID, src/config/version.ts) from
 * any directory the build or the worker is started in.
 */
export function workflowBundleOptions(
  workflowsPath: string,
): Pick<
  BundleOptions,
  | 'workflowsPath'
  | 'workflowInterceptorModules'
  | 'preloadModules'
  | 'webpackConfigHook'
  | 'payloadConverterPath'
  | 'failureConverterPath'
> {
  return {
    workflowsPath,
    payloadConverterPath: PAYLOAD_CONVERTER_MODULE,
    failureConverterPath: FAILURE_CONVERTER_MODULE,
    workflowInterceptorModules: [TRACE_CONTEXT_MODULE],
    preloadModules: [workflowsPath, TRACE_CONTEXT_MODULE, PAYLOAD_CONVERTER_MODULE, FAILURE_CONVERTER_MODULE],
    webpackConfigHook: (config) => ({ ...config, context: ROOT }),
  };
}
