/**
 * The worker process's Temporal runtime (JSON logs, Prometheus metrics, the shutdown signals),
 * installed once before the first connection; its connection to Temporal, kept on the current
 * key of TEMPORAL_API_KEY_FILE; and its report of a payload that does not open.
 */
import type { Logger, LogLevel, MetricMeter } from '@temporalio/common';
import { NativeConnection, Runtime, type DefaultLogger } from '@temporalio/worker';
import type { TemporalSettings } from '../config/temporal.js';
import { createJsonLogger, logKeyFileEvents, type LogTextOptions } from '../observability/logger.js';
import { HISTOGRAM_BUCKETS } from '../observability/metrics.js';
import type { OnUnopened } from '../payload-codec/index.js';
import { followApiKey, temporalApiKeySource, type ApiKeyFollower } from '../temporal-api-key.js';

/** Installs the runtime (`metricsBindAddress` null: no metrics) and returns its logger. */
export function installRuntime(
  logLevel: LogLevel,
  metricsBindAddress: string | null,
  text?: LogTextOptions,
): DefaultLogger {
  const logger = createJsonLogger(logLevel, process.stdout, text);
  Runtime.install({
    logger,
    telemetryOptions: {
      // The SDK core's own lines get the JSON logger's fields and masking too, at a price per poll
      // (docs/PERFORMANCE.md, "Against (b), on Server 1.32.2").
      logging: { forward: {} },
      metrics: metricsBindAddress
        ? {
            prometheus: {
              bindAddress: metricsBindAddress,
              countersTotalSuffix: true,
              histogramBucketOverrides: HISTOGRAM_BUCKETS,
            },
          }
        : undefined,
    },
    // The SDK turns these signals into worker.shutdown(): stop polling, drain, then resolve run().
    shutdownSignals: ['SIGINT', 'SIGTERM'],
  });
  return logger;
}

/**
 * Connects to Temporal. With TEMPORAL_API_KEY_FILE the connection follows the file:
 * `NativeConnection` takes a new key only through `setApiKey`, which the follower calls; stop it
 * before the connection closes.
 */
export async function connectTemporal(
  temporal: Pick<TemporalSettings, 'connect' | 'apiKeyFile'>,
  logger: Pick<Logger, 'info' | 'warn'>,
): Promise<{ connection: NativeConnection; follower: ApiKeyFollower | null }> {
  const options = temporal.connect.connectionOptions;
  const onEvent = logKeyFileEvents(logger, 'TEMPORAL_API_KEY_FILE', 'Temporal API key');
  const source = temporalApiKeySource(temporal.apiKeyFile, onEvent);
  if (source === null) return { connection: await NativeConnection.connect(options), follower: null };
  const key = source.current();
  const connection = await NativeConnection.connect({ ...options, apiKey: key });
  const follower = followApiKey(source, connection, key, {
    onError: (err) => {
      logger.warn('could not give the Temporal connection the new key; trying again at the next check', {
        error: err instanceof Error ? err.message : String(err),
      });
    },
  });
  return { connection, follower };
}

/** Workflows remembered as counted; past it the set starts again (a stuck one may be counted twice). */
const MAX_REMEMBERED = 10_000;

/**
 * The codec's `onUnopened` (docs/decisions/0023-sealed-payloads-bound-and-named.md): an ERROR line per
 * payload adding the workflow, key ID and reason the SDK's line lacks (docs/operator-actions.md says
 * what to do), and each workflow counted once per process by reason.
 */
export function reportUnopenedPayloads(logger: Logger, meter: MetricMeter): OnUnopened {
  const counter = meter.createCounter(
    'agent_job_payload_unopened_workflows',
    'workflows',
    'Workflows with a payload this worker cannot open, by reason; each retries its task until the ring is fixed',
  );
  const counted = new Set<string>();
  return (err, context) => {
    logger.error('payload does not open', {
      reason: err.reason,
      keyId: err.keyId,
      owner: context?.type ?? 'unknown',
      namespace: context?.namespace,
      workflowId: context?.workflowId,
      activityId: context?.type === 'activity' ? context.activityId : undefined,
    });
    if (context?.type !== 'workflow') return;
    const workflow = `${context.namespace}/${context.workflowId}`;
    if (counted.has(workflow)) return;
    if (counted.size >= MAX_REMEMBERED) counted.clear();
    counted.add(workflow);
    counter.add(1, { reason: err.reason });
  };
}
