/**
 * Baseline (a): what a user would write without Temporal. One Node process creates N agent jobs
 * and polls each on its own `setTimeout` on the workflow's own schedule (src/poll-schedule.ts, its
 * jitter included), with the project's API client against the same simulator. Nothing is durable:
 * a crash loses every job. It is the floor for CPU per poll and for detection latency.
 *
 * Protocol with the benchmark: prints `{"msg":"ready"}`, waits for a line `go` on stdin, runs,
 * prints one `{"msg":"result", ...}` line, and exits when stdin closes (so the benchmark can read
 * its CPU time from /proc before it goes).
 *
 *   node plain-loop.js '{"baseUrl":URL,"projectId":ID,"jobs":N,"schedule":{...}}'   (the key in AGENT_API_KEY)
 */
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { AgentApiClient, AgentApiError } from '../../src/agent-api/index.js';
import { mapLimit } from '../../src/client/map-limit.js';
import { isTerminalStatus } from '../../src/contract.js';
import { PollSchedule } from '../../src/poll-schedule.js';
import type { Schedule } from '../schedule.js';

/** Creates in flight at once, like the benchmark's workflow starts. */
const CREATE_CONCURRENCY = 64;

/** What the benchmark asks of the loop, as JSON in its one argument. */
export interface PlainLoopOptions {
  baseUrl: string;
  projectId: string;
  jobs: number;
  schedule: Schedule;
}

type Options = PlainLoopOptions & { api: AgentApiClient };

/** What one job ended with. */
interface Outcome {
  jobId: string;
  /** Epoch ms at which the loop saw the terminal status: its workflow's close, for the others. */
  closedAt: number;
}

function readOptions(): Options {
  const options = JSON.parse(process.argv[2] ?? 'null') as PlainLoopOptions | null;
  const apiKey = process.env.AGENT_API_KEY;
  if (!options || !apiKey) throw new Error('usage: plain-loop <options as JSON>, with AGENT_API_KEY set');
  return { ...options, api: new AgentApiClient({ baseUrl: options.baseUrl, apiKey }) };
}

/** Creates one agent job, retrying what the client calls retryable, like the create activity. */
async function create(options: Options, index: number): Promise<string> {
  const key = `plain-loop/${options.projectId}/${index}`;
  for (let attempt = 1; ; attempt++) {
    try {
      const record = await options.api.createJob(options.projectId, 'Benchmark agent job', {
        idempotencyKey: key,
      });
      return record.id;
    } catch (err) {
      if (!(err instanceof AgentApiError) || !err.retryable || attempt >= 5) throw err;
      await sleep(1_000);
    }
  }
}

/** Polls one agent job until it is terminal: the whole of what the workflow does, minus durability. */
async function follow(options: Options, jobId: string): Promise<Outcome> {
  const polling = new PollSchedule(options.schedule);
  for (;;) {
    // The workflow's wait and jitter, so both poll with the same spread; then the wait grows.
    await sleep(polling.waitMs(0, Infinity, Math.random));
    polling.grow();
    try {
      const record = await options.api.getJob(options.projectId, jobId);
      if (isTerminalStatus(record.status)) return { jobId, closedAt: Date.now() };
    } catch (err) {
      // A transient error waits one more interval, as the workflow's retry policy would.
      if (!(err instanceof AgentApiError) || !err.retryable) throw err;
    }
  }
}

async function run(options: Options): Promise<Outcome[]> {
  const outcomes: Promise<Outcome>[] = [];
  const indexes = Array.from({ length: options.jobs }, (_, i) => i);
  // Each job is followed from its create on, while the others are still being created.
  await mapLimit(indexes, CREATE_CONCURRENCY, async (index) => {
    outcomes.push(follow(options, await create(options, index)));
  });
  return Promise.all(outcomes);
}

async function main(): Promise<void> {
  const options = readOptions();
  const input = createInterface({ input: process.stdin });
  const lines = input[Symbol.asyncIterator]();
  process.stdout.write(`${JSON.stringify({ msg: 'ready' })}\n`);
  const go = await lines.next();
  if (go.done || go.value.trim() !== 'go') throw new Error('expected "go" on stdin');
  const startedAt = Date.now();
  const outcomes = await run(options);
  process.stdout.write(`${JSON.stringify({ msg: 'result', startedAt, outcomes })}\n`);
  // Stay until the benchmark has read /proc and closes stdin.
  while (!(await lines.next()).done);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`plain-loop failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
