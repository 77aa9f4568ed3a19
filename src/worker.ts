/**
 * The worker process (`npm run worker`, `node lib/worker.js` in the image): runs until SIGTERM or
 * SIGINT, then drains and exits 0. Its pieces are in src/worker/.
 */
import { Runtime, Worker } from '@temporalio/worker';
import { createActivities } from './activities/index.js';
import { AgentApiClient, closeDispatcher, FileApiKey } from './agent-api/index.js';
import { applyWorkflowHeap } from './config/memory.js';
import { workerDeploymentOptions } from './config/version.js';
import { loadWorkerConfig, type WorkerConfig } from './config/worker.js';
import { agentJobsServiceHandler } from './nexus/handler.js';
import { FileNotifyTargets, fixedNotifyTargets } from './notify/targets.js';
import { startHealthServer } from './observability/health.js';
import { logKeyFileEvents } from './observability/logger.js';
import { createActivityMetrics } from './observability/metrics.js';
import { ProjectMetrics } from './observability/project-metrics.js';
import { installTracing } from './observability/tracing.js';
import { payloadDataConverter } from './payload-codec/index.js';
import { formatQuotaLimit } from './quota/settings.js';
import { workflowCode } from './worker/bundle-options.js';
import { runProcess } from './worker/process-entry.js';
import { connectTemporal, installRuntime, reportUnopenedPayloads } from './worker/runtime.js';
import { requireUpgrade } from './worker/upgrade-check.js';

/**
 * The API key and notification targets as configured; a file of either is re-read when it changes
 * (a rotated Secret needs no restart), with one log line per change of state.
 */
function fileSources({ agentApi, notify }: WorkerConfig, logger: ReturnType<typeof installRuntime>) {
  const apiKey =
    agentApi.AGENT_API_KEY_FILE === undefined
      ? agentApi.AGENT_API_KEY
      : new FileApiKey(agentApi.AGENT_API_KEY_FILE.path, {
          onEvent: logKeyFileEvents(logger, 'AGENT_API_KEY_FILE', 'agent API key'),
        });
  if (notify === null) return { apiKey, notify: undefined };
  const targets =
    notify.file === null
      ? fixedNotifyTargets(notify.targets)
      : new FileNotifyTargets(notify.file, {
          onEvent: logKeyFileEvents(logger, 'AGENT_NOTIFY_TARGETS_FILE', 'notification targets'),
        });
  return { apiKey, notify: { targets, retryForMs: notify.retryForMs } };
}

/**
 * Wires the worker from `config` and runs it until a shutdown signal has drained it. With
 * `--check-upgrade` it runs the upgrade check only: beside a running worker (kubectl exec in its
 * pod), so it binds no port and builds nothing the check does not read.
 */
async function run(config: WorkerConfig): Promise<void> {
  const checkOnly = process.argv.includes('--check-upgrade');
  // With the payload codec on, error messages stay out of log lines and spans (decision 0021).
  const sealing = config.temporal.payloadKeysFile !== null;
  const metricsAt = checkOnly ? null : config.METRICS_ADDRESS;
  const logger = installRuntime(config.LOG_LEVEL, metricsAt, { errorText: !sealing });
  const { workflowBundle, buildId, mode } = await workflowCode(logger);
  const deployment = workerDeploymentOptions(config.versioning, buildId);
  const { memory } = config;
  const heapApplied = memory.workflowHeapMiB !== null && applyWorkflowHeap(memory.workflowHeapMiB);
  const { connection, follower } = await connectTemporal(config.temporal, logger);
  // The worker's own client (activities' and the Nexus handler's getClient()) takes it too, so
  // every payload this process writes is sealed alike.
  const dataConverter = payloadDataConverter(config.temporal.payloadKeysFile, {
    onEvent: logKeyFileEvents(logger, 'TEMPORAL_PAYLOAD_KEYS_FILE', 'payload key ring'),
    onUnopened: reportUnopenedPayloads(logger, Runtime.instance().metricMeter),
  });
  const upgradeCheck = {
    connection,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
    workflowBundle,
    dataConverter,
    version: deployment.useWorkerVersioning ? deployment.version : null,
  };
  try {
    if (checkOnly) return await requireUpgrade(upgradeCheck, logger, deployment.version.buildId);
    // Bound before the worker exists, so a port in use ends the start with its own error: once a
    // worker holds the connection, closing the connection throws, which would hide it.
    const started: { worker?: Worker } = {};
    const health = await startHealthServer(config.HEALTH_ADDRESS, () => {
      const state = started.worker?.getState() ?? 'STARTING';
      return { ready: state === 'RUNNING', state };
    });
    const tracing = installTracing({ ...config.tracing, withoutExceptionText: sealing }, 'agent-job-worker');
    try {
      // Unversioned, this build gets every open workflow at its next task, so it replays them
      // first (decision 0022); versioned, `--check-upgrade` is the operator's step instead.
      if (config.versioning.WORKER_UPGRADE_CHECK && !deployment.useWorkerVersioning)
        await requireUpgrade(upgradeCheck, logger, deployment.version.buildId);
      const projectMetrics = new ProjectMetrics(Runtime.instance().metricMeter, config.METRICS_MAX_PROJECTS);
      const sources = fileSources(config, logger);
      const worker = await Worker.create({
        connection,
        dataConverter,
        ...config.workerOptions,
        workflowBundle,
        workerDeploymentOptions: deployment,
        interceptors: tracing.worker.interceptors,
        sinks: projectMetrics.sinks(),
        activities: createActivities({
          api: new AgentApiClient({ baseUrl: config.agentApi.AGENT_API_BASE_URL, apiKey: sources.apiKey }),
          ambiguousCreatePolicy: config.agentApi.AGENT_API_AMBIGUOUS_CREATE,
          projectQuota: config.projectQuota,
          metrics: createActivityMetrics(),
          projectMetrics,
          notify: sources.notify,
        }),
        // Always on: without a Nexus endpoint targeting this task queue no Nexus task reaches it,
        // and its poller costs nothing beside the others.
        nexusServices: [agentJobsServiceHandler],
      });
      started.worker = worker;
      logger.info('worker running', {
        taskQueue: config.temporal.taskQueue,
        namespace: config.temporal.namespace,
        temporalAddress: config.temporal.address,
        agentApiBaseUrl: config.agentApi.AGENT_API_BASE_URL,
        workflowCode: mode,
        deploymentName: deployment.version.deploymentName,
        buildId: deployment.version.buildId,
        // The bundle's own ID, which differs from buildId only under TEMPORAL_WORKER_BUILD_ID.
        bundleBuildId: buildId,
        workerVersioning: deployment.useWorkerVersioning ? 'on' : 'off',
        payloadCodec: dataConverter === undefined ? 'off' : 'aes-256-gcm',
        startupMs: Math.round(process.uptime() * 1000),
        healthPort: health.port,
        metrics: config.METRICS_ADDRESS ?? 'off',
        tracing:
          config.tracing.exporter === null ? 'off' : (config.tracing.endpoint ?? config.tracing.exporter),
        memoryLimitMiB: memory.limit === null ? null : Math.round(memory.limit.bytes / 2 ** 20),
        memoryLimitFrom: memory.limit?.source ?? 'none',
        maxCachedWorkflows: memory.maxCachedWorkflows,
        workflowHeapMiB: heapApplied ? memory.workflowHeapMiB : 'node default',
        projectQuota: formatQuotaLimit(config.projectQuota.defaultLimit),
        projectQuotaOverrides: Object.keys(config.projectQuota.overrides).length,
        // Names only: a target's URL and secret are credentials.
        notifyTargets: config.notify === null ? [] : [...config.notify.targets.keys()],
      });
      if (deployment.useWorkerVersioning) {
        logger.info('versioned worker: new workflows reach it once its version is current or ramping', {
          command: `temporal worker deployment set-current-version --deployment-name ${deployment.version.deploymentName} --build-id ${deployment.version.buildId}`,
        });
      }
      await worker.run();
      logger.info('worker stopped', { state: worker.getState() });
    } finally {
      await health.close();
      await tracing.shutdown();
    }
  } finally {
    follower?.stop();
    await connection.close();
    await closeDispatcher();
  }
}

runProcess('worker', loadWorkerConfig, run);
