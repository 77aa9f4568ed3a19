/**
 * The worker's Worker Deployment Version (docs/versioning.md): a deployment name from the
 * configuration and a build ID derived from the workflow bundle itself. The build ID changes
 * exactly when the code that replays histories changes, so it is never set by hand: two builds of
 * the same workflow code get the same ID, and any change to it (a line in a workflow, the SDK's
 * workflow runtime, `src/contract.ts`) gets a new one.
 */
import { createHash } from 'node:crypto';
import type { WorkerDeploymentOptions } from '@temporalio/worker';
import * as z from 'zod/mini';
import { onOff, readSettings, type Env } from './settings.js';

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

/**
 * Longest deployment name or build ID: the server builds an internal workflow ID from both, and
 * with `limit.maxIDLength: 255` (deploy/compose/dynamicconfig.yaml) it takes (255 - 39) / 2 each.
 */
const MAX_VERSION_FIELD_LENGTH = 108;

/** A build ID or deployment name, by the server's rules. */
const VERSION_FIELD = `must be at most ${MAX_VERSION_FIELD_LENGTH} characters without white space, not starting with "__"`;
const versionField = z
  .string()
  .check(z.maxLength(MAX_VERSION_FIELD_LENGTH, VERSION_FIELD), z.regex(/^(?!__)\S+$/, VERSION_FIELD));

/** The settings that decide how the worker versions itself (docs/versioning.md). */
export const VersioningEnv = z.object({
  // Off unless asked for: a versioned worker gets no workflow until an operator makes its version
  // current (docs/versioning.md), so `npm run worker`, the demo, the tests and the unversioned
  // compose stack and k8s base would sit idle against a fresh server. The versioned layouts
  // (deploy/k8s-versioned, deploy/compose/versioned.yaml) turn it on.
  TEMPORAL_WORKER_VERSIONING: z._default(onOff, false),
  TEMPORAL_DEPLOYMENT_NAME: z._default(
    versionField.check(
      z.regex(
        /^[^.:]*$/,
        `${VERSION_FIELD}, without "." or ":" (the server joins name and build ID with them)`,
      ),
    ),
    DEFAULT_DEPLOYMENT_NAME,
  ),
  TEMPORAL_WORKER_BUILD_ID: z.optional(versionField),
  // On unless a person decides otherwise: the override is for a run they know can never be
  // replayed and mean to end by hand (docs/versioning.md, "Upgrades").
  WORKER_UPGRADE_CHECK: z._default(onOff, true),
});

/**
 * TEMPORAL_WORKER_VERSIONING, TEMPORAL_DEPLOYMENT_NAME, TEMPORAL_WORKER_BUILD_ID and
 * WORKER_UPGRADE_CHECK, with the server's own rules for the names (a deployment name without `.`
 * or `:`, neither starting `__`).
 */
export function loadVersioningSettings(env: Env = process.env) {
  const settings = readSettings(VersioningEnv, env);
  return {
    /** Poll as a Worker Deployment Version, workflows PINNED. */
    enabled: settings.TEMPORAL_WORKER_VERSIONING,
    deploymentName: settings.TEMPORAL_DEPLOYMENT_NAME,
    /** Replaces the bundle's own build ID; null when not set. */
    buildIdOverride: settings.TEMPORAL_WORKER_BUILD_ID ?? null,
    /** An unversioned worker replays the open workflows before it polls (src/worker/upgrade-check.ts). */
    upgradeCheck: settings.WORKER_UPGRADE_CHECK,
  };
}

/** How the worker versions itself. */
export type VersioningSettings = ReturnType<typeof loadVersioningSettings>;

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
