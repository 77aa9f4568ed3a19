/**
 * The upgrade check (docs/decisions/0022-upgrades-with-jobs-in-flight.md): before a build takes over
 * open workflows, find the ones it could not run, by replaying them (not by comparing build IDs or
 * releases, so it holds for every later release). Unversioned, every open workflow of the task queue
 * replays; versioned, only the runs that follow rollouts, and the versions before the current one
 * must have drained.
 */
import { Client, type ConnectionLike } from '@temporalio/client';
import type { DataConverter, Logger, WorkerDeploymentVersion } from '@temporalio/common';
import { Worker, type WorkflowBundleOption } from '@temporalio/worker';
import { UpgradeRefusedError } from '../errors.js';

/** Where the check looks and what it replays with. */
export interface UpgradeCheckOptions {
  connection: ConnectionLike;
  namespace: string;
  taskQueue: string;
  workflowBundle: WorkflowBundleOption;
  /** The worker's own, so that sealed histories open as they will at the next task. */
  dataConverter?: DataConverter;
  /** The version this build declares, when versioned: only the runs that would move to it replay. */
  version: WorkerDeploymentVersion | null;
}

/** Blockers listed by name in the refusal; the rest are counted. */
const NAMED_BLOCKERS = 3;

/** The open workflows of the task queue that this build could not take over, and how many replayed. */
async function checkUpgrade(options: UpgradeCheckOptions) {
  const client = new Client({ connection: options.connection, namespace: options.namespace });
  const open = `ExecutionStatus = 'Running' AND TaskQueue = ${quote(options.taskQueue)}`;
  // `reason`: what this build would do with the workflow, in words a person can act on.
  const blockers: Array<{ workflowId: string; workflowType: string; reason: string }> = [];
  let moving = open;
  if (options.version !== null) {
    const keep = [versionString(options.version)];
    const current = await currentVersion(client, options.version.deploymentName);
    if (current !== null) keep.push(versionString(current));
    // Pinned runs of an older version run there until they end; another version made current
    // beside them would be a third code line serving the same projects (the 1.0 and 1.1 jobs
    // still speak the frozen quota's protocol, which later builds do not have).
    for await (const run of client.workflow.list({
      query: `${open} AND TemporalWorkflowVersioningBehavior = 'Pinned' AND TemporalWorkerDeploymentVersion NOT IN (${keep.map(quote).join(', ')})`,
    })) {
      blockers.push({
        workflowId: run.workflowId,
        workflowType: run.type,
        reason: `pinned to ${String(run.searchAttributes.TemporalWorkerDeploymentVersion?.[0] ?? 'an older version')}, which has not drained`,
      });
    }
    moving = `${open} AND (TemporalWorkflowVersioningBehavior IS NULL OR TemporalWorkflowVersioningBehavior != 'Pinned')`;
  }
  const runs: Array<{ workflowId: string; runId: string; type: string }> = [];
  for await (const run of client.workflow.list({ query: moving })) runs.push(run);
  // A fresh task queue, the usual start, pays no replay worker.
  if (runs.length === 0) return { replayed: 0, blockers };
  // One open run per workflow ID: the ID names it.
  const typeOf = new Map(runs.map((run) => [run.workflowId, run.type]));
  async function* histories() {
    for (const run of runs) {
      const history = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
      yield { workflowId: run.workflowId, history };
    }
  }
  let replayed = 0;
  const replays = Worker.runReplayHistories(
    { workflowBundle: options.workflowBundle, dataConverter: options.dataConverter },
    histories(),
  );
  for await (const result of replays) {
    replayed += 1;
    if (result.error === undefined) continue;
    blockers.push({
      workflowId: result.workflowId,
      workflowType: typeOf.get(result.workflowId) ?? 'unknown',
      reason: `does not replay on this build (${result.error.name})`,
    });
  }
  return { replayed, blockers };
}

/**
 * Runs the check and logs that it passed, with `buildId`.
 * @throws UpgradeRefusedError when there are blockers: how many, the first few by ID and type, and
 * the two ways on (let them end on the build that started them, or the override)
 */
export async function requireUpgrade(
  options: UpgradeCheckOptions,
  logger: Logger,
  buildId: string,
): Promise<void> {
  const { replayed, blockers } = await checkUpgrade(options);
  if (blockers.length === 0) {
    logger.info('upgrade check passed', { replayed, buildId });
    return;
  }
  const named = blockers
    .slice(0, NAMED_BLOCKERS)
    .map((b) => `${b.workflowId} (${b.workflowType}: ${b.reason})`)
    .join('; ');
  const more = blockers.length - NAMED_BLOCKERS;
  throw new UpgradeRefusedError(
    `upgrade refused: ${blockers.length} open workflow(s) this build cannot take over: ${named}` +
      `${more > 0 ? `; and ${more} more` : ''}. Let them end on the workers of the build that runs them ` +
      `(docs/versioning.md, "Upgrades without versioning"), or set WORKER_UPGRADE_CHECK=off to start anyway`,
  );
}

async function currentVersion(
  client: Client,
  deploymentName: string,
): Promise<WorkerDeploymentVersion | null> {
  try {
    const { workerDeploymentInfo } = await client.workflowService.describeWorkerDeployment({
      namespace: client.options.namespace,
      deploymentName,
    });
    const current = workerDeploymentInfo?.routingConfig?.currentDeploymentVersion;
    if (!current?.buildId || !current.deploymentName) return null;
    return { deploymentName: current.deploymentName, buildId: current.buildId };
  } catch (err) {
    // A deployment no worker has polled yet: no version is current, nothing is pinned to one.
    if ((err as { code?: number }).code === 5) return null;
    throw err;
  }
}

/** The form the `TemporalWorkerDeploymentVersion` search attribute holds. */
function versionString(version: WorkerDeploymentVersion): string {
  return `${version.deploymentName}:${version.buildId}`;
}

function quote(value: string): string {
  return `'${value.replace(/'/g, "\\'")}'`;
}
