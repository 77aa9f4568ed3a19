/**
 * What the payload codec costs per job and per poll: the same jobs on two workers of this project
 * that differ only in `TEMPORAL_PAYLOAD_KEYS_FILE` (off, and a ring of one key), each side started
 * by a client with the same setting, in a project of its own; the codec's own CPU timed apart, in
 * this process, on the payloads of a real job, where the machine's load moves it little. The method:
 * docs/PERFORMANCE.md, "The payload codec".
 */
import type { WorkflowHandle } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import proto from '@temporalio/proto';
import { startAgentJob } from '../../src/client/index.js';
import { AesGcmPayloadCodec, FileKeyRing } from '../../src/payload-codec/index.js';
import type { BenchEnvironment } from '../environment.js';
import type { SideParams } from '../catalogue.js';
import { firstRunId, payloadsOf, type History } from '../history.js';
import { sampleProcess } from '../resources.js';
import { spread, sum } from '../stats.js';
import { waitForCost } from './cost.js';

/** Each job: active for JOB_MS, polled every POLL_MS (a fixed cadence, so every job polls alike). */
const JOB_MS = 10_000;
const POLL = { initialInterval: 200, maxInterval: 200, backoffCoefficient: 1 } as const;
/** Seal-and-open rounds over one job's payloads: enough for a median of a few milliseconds each. */
const ROUNDS = 200;

/** What the payload codec costs: both sides, and the codec's own CPU on one job's payloads. */
export type CodecCost = Awaited<ReturnType<typeof runCodecCost>>;

/**
 * Runs the side without the codec, then the side with it, then times the codec on the payloads of
 * one job of the first side (what the second side sealed).
 */
export async function runCodecCost(env: BenchEnvironment, params: SideParams) {
  const off = await runSide(env, false, params);
  const on = await runSide(env, true, params);
  const payloads = payloadsOf(off.firstHistory);
  const codec = new AesGcmPayloadCodec(new FileKeyRing(env.payloadKeysFile));
  const pollInput = pollInputOf(off.firstHistory);
  return {
    sides: [off.side, on.side],
    sealOpen: {
      /** Payloads in one job's history (codec off), and their serialized bytes. */
      payloads: payloads.length,
      bytes: sum(payloads.map((p) => PayloadMessage.encode(p).finish().length)),
      /** CPU microseconds to seal all of them once and open them once, over the rounds. */
      cpuUsPerJob: await sealAndOpenCpu(codec, payloads),
      /** The poll activity's input (what each poll attempt opens), its bytes and the same CPU. */
      pollInputBytes: sum(pollInput.map((p) => PayloadMessage.encode(p).finish().length)),
      cpuUsPerPollInput: await sealAndOpenCpu(codec, pollInput),
    },
  };
}

const { Payload: PayloadMessage } = proto.temporal.api.common.v1;

/**
 * Runs the jobs of one side at once, on a worker of its own and a client with the same ring; with
 * the first job's first run as stored.
 */
async function runSide(env: BenchEnvironment, sealed: boolean, params: SideParams) {
  const codec = sealed ? 'on' : 'off';
  const projectId = env.newProject(`codec-cost-${codec}`, JOB_MS);
  const worker = await env.startWorker('worker', projectId, { sealed });
  const client = env.clientOf(sealed);
  const cpuBefore = sampleProcess(worker.pid).cpuSeconds;
  const handles: WorkflowHandle[] = await Promise.all(
    Array.from({ length: params.jobs }, (_, i) =>
      startAgentJob(
        client,
        { projectId, prompt: `Benchmark: payload codec ${codec}, job ${i}`, poll: POLL },
        { taskQueue: projectId, key: `job-${i}` },
      ),
    ),
  );
  const deadline = Date.now() + JOB_MS + params.jobs * 5_000 + 60_000;
  const started = await Promise.all(
    handles.map(async (h) => ({ id: h.workflowId, run: await firstRunId(h) })),
  );
  const costs = await Promise.all(started.map((s) => waitForCost(client, s.id, s.run, deadline)));
  const workerCpuSeconds = sampleProcess(worker.pid).cpuSeconds - cpuBefore;
  const polls = costs.map((c) => c.attemptsByActivity.pollAgentJob ?? 0);
  const [first] = started;
  if (!first) throw new Error('the codec side ran no job');
  params.log(`  payload codec ${codec}: ${params.jobs} jobs done`);
  return {
    side: {
      codec,
      jobs: costs.length,
      /** Polls per job (the poll activity's attempts). */
      polls: spread(polls),
      events: spread(costs.map((c) => c.events)),
      /** Bytes of every run's history of a job, serialized as the server stores it. */
      historyBytes: spread(costs.map((c) => c.bytes)),
      payloads: spread(costs.map((c) => c.payloads)),
      /** The worker process's CPU over the side's jobs, per poll (ms): for scale, load-sensitive. */
      workerCpuMsPerPoll: (workerCpuSeconds * 1000) / Math.max(1, sum(polls)),
    },
    firstHistory: await client.workflow.getHandle(first.id, first.run).fetchHistory(),
  };
}

/** The poll activity's input: what the worker opens for each poll attempt. */
function pollInputOf(history: History): Payload[] {
  const scheduled = (history.events ?? [])
    .map((e) => e.activityTaskScheduledEventAttributes)
    .find((a) => a?.activityType?.name === 'pollAgentJob');
  const payloads = scheduled?.input?.payloads ?? [];
  if (payloads.length === 0) throw new Error('the codec job scheduled no poll with an input');
  return payloads;
}

/** CPU microseconds to seal every payload once and open every sealed one once, per round. */
async function sealAndOpenCpu(codec: AesGcmPayloadCodec, payloads: Payload[]) {
  const rounds: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const before = process.cpuUsage();
    await codec.decode(await codec.encode(payloads));
    const { user, system } = process.cpuUsage(before);
    rounds.push(user + system);
  }
  return spread(rounds);
}
