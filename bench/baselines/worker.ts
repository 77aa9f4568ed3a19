/**
 * The worker of the benchmark's own workflows (baselines (b) and (c)), as a process of its own
 * like the worker under test: the same configuration loader and settings (task queue,
 * concurrency, cache), their prebuilt bundle (path in BENCH_WORKFLOW_BUNDLE), and the same
 * start-up line, so the benchmark drives and measures all of them the same way.
 */
import { performance } from 'node:perf_hooks';
import { NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { AgentApiClient, closeDispatcher } from '../../src/agent-api/index.js';
import { loadWorkerConfig } from '../../src/config/worker.js';
import { createJsonLogger } from '../../src/observability/logger.js';
import { createBaselineActivities } from './activities.js';

async function main(): Promise<void> {
  const config = loadWorkerConfig();
  const codePath = process.env.BENCH_WORKFLOW_BUNDLE;
  if (!codePath) throw new Error('BENCH_WORKFLOW_BUNDLE must name the baseline workflow bundle');
  const logger = createJsonLogger(config.LOG_LEVEL);
  Runtime.install({ logger, shutdownSignals: ['SIGINT', 'SIGTERM'] });
  const connection = await NativeConnection.connect(config.temporal.connect.connectionOptions);
  try {
    const api = new AgentApiClient({
      baseUrl: config.agentApi.AGENT_API_BASE_URL,
      apiKey: config.agentApi.AGENT_API_KEY,
    });
    const worker = await Worker.create({
      connection,
      ...config.workerOptions,
      workflowBundle: { codePath },
      activities: createBaselineActivities(api),
    });
    logger.info('worker running', {
      taskQueue: config.temporal.taskQueue,
      workflowCode: 'prebuilt-bundle',
      startupMs: Math.round(performance.now()),
    });
    await worker.run();
  } finally {
    await connection.close();
    await closeDispatcher();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`baseline worker failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
