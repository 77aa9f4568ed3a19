/**
 * The worker process's Temporal runtime: JSON logs, Prometheus metrics and the shutdown signals.
 * Installed once per process, before the first connection.
 */
import type { LogLevel } from '@temporalio/common';
import { Runtime, type DefaultLogger } from '@temporalio/worker';
import { createJsonLogger, type LogTextOptions } from '../observability/logger.js';
import { HISTOGRAM_BUCKETS } from '../observability/metrics.js';

/**
 * Installs the runtime with the JSON logger at `logLevel`, Prometheus metrics served at
 * `metricsBindAddress` (null: none), and SIGINT and SIGTERM as the worker's shutdown; errors without
 * their messages when `text` says so (the payload codec is on). Returns the logger.
 */
export function installRuntime(
  logLevel: LogLevel,
  metricsBindAddress: string | null,
  text?: LogTextOptions,
): DefaultLogger {
  const logger = createJsonLogger(logLevel, process.stdout, text);
  Runtime.install({
    logger,
    telemetryOptions: {
      // The SDK core's own log lines go through the JSON logger too, instead of to the console, with
      // the same fields and masking as every other line. The price, measured by bench:profile: the
      // SDK then logs at TRACE and drops below LOG_LEVEL only after buffering, about 0.2 ms of
      // worker CPU per poll (docs/PERFORMANCE.md, "Against (b), on Server 1.32.2").
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
