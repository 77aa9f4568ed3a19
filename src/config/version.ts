/**
 * The worker's Worker Deployment Version (docs/versioning.md): a deployment name from the
 * configuration and a build ID derived from the workflow bundle, so that it changes exactly when
 * the code that replays histories does.
 */
import { createHash } from 'node:crypto';
import type { WorkerDeploymentOptions } from '@temporalio/worker';
import * as z from 'zod/mini';
import { onOff } from './settings.js';

/** The deployment name when TEMPORAL_DEPLOYMENT_NAME is not set. */
export const DEFAULT_DEPLOYMENT_NAME = 'agent-job-orchestrator';

/**
 * The file `npm run build` writes beside the prebuilt bundle (`lib/build-id`), for CI to name a
 * version's image and objects. The worker hashes the bundle it loads instead, so as to declare the
 * ID of the code it runs.
 */
export const BUILD_ID_FILE = 'build-id';

/** Hex digits of the SHA-256 kept: 48 bits, short enough for image tags and Kubernetes names. */
const BUILD_ID_HEX_DIGITS = 12;

/**
 * The inline source map, left out of the hash: the SDK's bundler names every source there by its
 * absolute path, so the same code built in `/app` and in a clone elsewhere differs in it.
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

const VERSION_FIELD = `must be at most ${MAX_VERSION_FIELD_LENGTH} characters without white space, not starting with "__"`;
const versionField = z
  .string()
  .check(z.maxLength(MAX_VERSION_FIELD_LENGTH, VERSION_FIELD), z.regex(/^(?!__)\S+$/, VERSION_FIELD));

/** The settings that decide how the worker versions itself (docs/versioning.md). */
export const VersioningEnv = z.object({
  // Off unless asked for: a versioned worker gets no workflow until an operator makes its version
  // current, so every unversioned layout would sit idle against a fresh server.
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
  // Off only for a run a person knows can never replay and means to end by hand.
  WORKER_UPGRADE_CHECK: z._default(onOff, true),
});

/** How the worker versions itself: TEMPORAL_WORKER_VERSIONING on polls as a Worker Deployment Version. */
export type VersioningSettings = z.output<typeof VersioningEnv>;

/**
 * The SDK's `workerDeploymentOptions` for the bundle with build ID `bundleBuildId`. Declared even
 * with versioning off, so the server records which build completed each workflow task; on, every
 * workflow type is PINNED (docs/decisions/0001-versions-from-1.0.md).
 */
export function workerDeploymentOptions(
  settings: VersioningSettings,
  bundleBuildId: string,
): WorkerDeploymentOptions {
  const version = {
    deploymentName: settings.TEMPORAL_DEPLOYMENT_NAME,
    buildId: settings.TEMPORAL_WORKER_BUILD_ID ?? bundleBuildId,
  };
  if (!settings.TEMPORAL_WORKER_VERSIONING) return { version, useWorkerVersioning: false };
  return { version, useWorkerVersioning: true, defaultVersioningBehavior: 'PINNED' };
}
