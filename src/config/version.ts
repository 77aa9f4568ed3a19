/**
 * The worker's Worker Deployment Version (docs/versioning.md): a deployment name from the
 * configuration and a build ID derived from the workflow bundle itself. The build ID changes
 * exactly when the code that replays histories changes, so it is never set by hand: two builds of
 * the same workflow code get the same ID, and any change to it (a line in a workflow, the SDK's
 * workflow runtime, `src/contract.ts`) gets a new one.
 */
import { createHash } from 'node:crypto';
import type { WorkerDeploymentOptions } from '@temporalio/worker';

/** The deployment name when TEMPORAL_DEPLOYMENT_NAME is not set. */
export const DEFAULT_DEPLOYMENT_NAME = 'agent-job-orchestrator';

/**
 * The file `npm run build` writes beside the prebuilt bundle (`lib/build-id`), for CI to name the
 * image and the Kubernetes objects of a version. The worker does not read it: it hashes the bundle
 * it loads, so the ID it declares is always the one of the code it runs.
 */
export const BUILD_ID_FILE = 'build-id';

/** Hex digits of the SHA-256 kept: 48 bits, short enough for image tags and Kubernetes names. */
const BUILD_ID_HEX_DIGITS = 12;

/**
 * The bundler appends the source map inline, and it names every source by its absolute path
 * (`devtoolModuleFilenameTemplate: '[absolute-resource-path]'` in the SDK's bundler), so the same
 * code built in `/app` and in a clone elsewhere differs there. It is left out of the hash; the code
 * that runs is not.
 */
const INLINE_SOURCE_MAP = /\n\/\/# sourceMappingURL=data:[^\n]*\s*$/;

/** The build ID of a workflow bundle: the start of the SHA-256 of its code, source map left out. */
export function buildIdOf(bundleCode: string): string {
  const code = bundleCode.replace(INLINE_SOURCE_MAP, '');
  return createHash('sha256').update(code).digest('hex').slice(0, BUILD_ID_HEX_DIGITS);
}

/** How the worker versions itself: the settings of ./worker.ts that decide it. */
export interface VersioningSettings {
  /** TEMPORAL_WORKER_VERSIONING=on: poll as a Worker Deployment Version, workflows PINNED. */
  enabled: boolean;
  /** TEMPORAL_DEPLOYMENT_NAME. */
  deploymentName: string;
  /** TEMPORAL_WORKER_BUILD_ID, which replaces the bundle's own build ID; null when not set. */
  buildIdOverride: string | null;
  /** WORKER_UPGRADE_CHECK=on: an unversioned worker replays the open workflows before it polls (src/worker/upgrade-check.ts). */
  upgradeCheck: boolean;
}

/**
 * The SDK's `workerDeploymentOptions` for a worker running the bundle with build ID `bundleBuildId`.
 *
 * The version is declared even with versioning off: the server then records which build completed
 * each workflow task, without routing by it. With versioning on, every workflow type is PINNED: a
 * run finishes on the build that started it, so a change to workflow code needs no `patched()`
 * (docs/decisions/0001-versions-from-1.0.md).
 */
export function workerDeploymentOptions(
  settings: VersioningSettings,
  bundleBuildId: string,
): WorkerDeploymentOptions {
  const version = {
    deploymentName: settings.deploymentName,
    buildId: settings.buildIdOverride ?? bundleBuildId,
  };
  if (!settings.enabled) return { version, useWorkerVersioning: false };
  return { version, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' };
}
