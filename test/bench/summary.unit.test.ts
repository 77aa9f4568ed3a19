/**
 * The benchmark's judgement of issue 29's aims (bench/summary.ts) on made-up figures: the
 * thresholds are the issue's, and a figure just past one is MISSED.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Implementation } from '../../bench/catalogue.js';
import type { BenchResult } from '../../bench/result.js';
import type { QuotaCostSide } from '../../bench/scenarios/quota.js';
import type { WakeRun } from '../../bench/scenarios/wake.js';
import { evaluateAims, judgeRatio, ratioSpread, type LoadSummary } from '../../bench/summary.js';

const one = (median: number) => ({ median, min: median, max: median, n: 1 });

function load(impl: Implementation, jobs: number, figures: { cpu: number; p99Ms: number; rate: number }) {
  return {
    impl,
    variant: '',
    jobs,
    cadenceMs: 10_000,
    repeats: 1,
    p99: one(figures.p99Ms),
    steadyPollsPerSecond: one(figures.rate),
    targetPollsPerSecond: jobs / 10,
    cpuMeasured: one(figures.cpu),
    cpuServer: one(5),
    cpuBench: one(0.2),
    broke: [],
  } as unknown as LoadSummary;
}

function wake(p99Ms: number): WakeRun {
  const delays = { sent: 100, missing: 0, p50: 50, p99: p99Ms, max: p99Ms };
  return {
    impl: 'worker',
    jobs: 1_000,
    cadenceMs: 10_000,
    rampSeconds: 60,
    pollNow: delays,
    followUp: { ...delays, p99: 100 },
    restart: null,
    pollCounts: null,
    broke: null,
  };
}

function result(wakeRuns: WakeRun[] = []): BenchResult {
  return { machine: { cpuCount: 2 }, cost: [], startup: [], wake: wakeRuns } as unknown as BenchResult;
}

function status(aims: ReturnType<typeof evaluateAims>, starts: string): string | undefined {
  return aims.find((a) => a.aim.startsWith(starts))?.status;
}

test('CPU per 1,000 polls: met at 1.15× (b) and missed just past it, at each N', () => {
  const loads = [
    load('worker', 1_000, { cpu: 2.3, p99Ms: 10_000, rate: 100 }),
    load('poll-by-retry', 1_000, { cpu: 2, p99Ms: 10_000, rate: 100 }),
    load('worker', 2_000, { cpu: 2.31, p99Ms: 10_000, rate: 200 }),
    load('poll-by-retry', 2_000, { cpu: 2, p99Ms: 10_000, rate: 200 }),
  ];
  const aims = evaluateAims(result(), loads);
  const cpu = aims.filter((a) => a.aim.startsWith('worker CPU per 1,000 polls'));
  assert.deepEqual(
    cpu.map((a) => a.status),
    ['met', 'MISSED'],
  );
});

test('ratio aims over repeats: met when every pairing meets, MISSED when none does, a tie otherwise', () => {
  const of = (median: number, min: number, max: number) => ({ median, min, max, n: 3 });
  const cpuAt1000 = (worker: ReturnType<typeof of>, retry: ReturnType<typeof of>) => {
    const loads = [
      { ...load('worker', 1_000, { cpu: 0, p99Ms: 10_000, rate: 100 }), cpuMeasured: worker },
      { ...load('poll-by-retry', 1_000, { cpu: 0, p99Ms: 10_000, rate: 100 }), cpuMeasured: retry },
    ];
    return evaluateAims(result(), loads).find((a) => a.aim.endsWith('N = 1,000, 10 s cadence (issue 29)'));
  };
  // The full run of 2026-11-27, rounded: its medians read 1.29×, but its repeats span 1.04× to 1.63×.
  const tie = cpuAt1000(of(2.29, 1.99, 2.37), of(1.77, 1.45, 1.91));
  assert.equal(tie?.status, 'within spread');
  assert.match(tie?.landed ?? '', /1\.29× \(1\.04–1\.63× between the repeats' extremes\)/);
  assert.match(tie?.landed ?? '', /this worker 2\.29 \(1\.99–2\.37\) s/);
  assert.equal(cpuAt1000(of(2.1, 2.0, 2.2), of(2.0, 1.95, 2.05))?.status, 'met', 'at most 1.13× at worst');
  assert.equal(cpuAt1000(of(2.6, 2.5, 2.7), of(2.0, 1.9, 2.1))?.status, 'MISSED', '1.19× at best');

  assert.deepEqual(ratioSpread(of(2, 1, 3), of(1, 0.5, 2)), { median: 2, low: 0.5, high: 6, repeated: true });
  assert.equal(judgeRatio(ratioSpread(one(1.15), one(1)), 1.15), 'met', 'one run a side: the median decides');
  assert.equal(judgeRatio(ratioSpread(one(1.16), one(1)), 1.15), 'MISSED');

  // The p99 of the in-flight aim is judged the same way, once the poll rate is held.
  const retry = {
    ...load('poll-by-retry', 2_000, { cpu: 2, p99Ms: 0, rate: 200 }),
    p99: of(24_170, 23_100, 25_190),
  };
  const worker = {
    ...load('worker', 2_000, { cpu: 2, p99Ms: 0, rate: 199 }),
    p99: of(28_590, 23_870, 29_760),
  };
  const inFlight = evaluateAims(result(), [worker, retry]).find((a) =>
    a.aim.startsWith('2,000 jobs in flight'),
  );
  assert.equal(inFlight?.status, 'within spread');
  assert.match(inFlight?.limits ?? '', /falls on either side of the aim from one repeat to another/);
  const slow = { ...worker, steadyPollsPerSecond: of(150, 140, 160) };
  assert.equal(
    evaluateAims(result(), [slow, retry]).find((a) => a.aim.startsWith('2,000 jobs in flight'))?.status,
    'MISSED',
    'a poll rate short of 95% misses whatever the p99',
  );
});

test('N = 2,000: the poll rate must reach 95% of asked and p99 at most 1.1× (b)', () => {
  const aim = '2,000 jobs in flight';
  const retry = load('poll-by-retry', 2_000, { cpu: 2, p99Ms: 15_000, rate: 200 });
  const judge = (rate: number, p99Ms: number) =>
    status(evaluateAims(result(), [load('worker', 2_000, { cpu: 2, p99Ms, rate }), retry]), aim);
  assert.equal(judge(190, 16_500), 'met');
  assert.equal(judge(189, 16_500), 'MISSED', 'below 95% of the 200 polls/s asked');
  assert.equal(judge(200, 16_600), 'MISSED', 'past 1.1× (b)');
  assert.equal(
    status(evaluateAims(result(), [load('worker', 2_000, { cpu: 2, p99Ms: 10_000, rate: 200 })]), aim),
    'not measured',
    'without (b) at the same point there is nothing to compare with',
  );
});

test('N = 2,000: a p99 missed with the rate held is explained by the split of detection latency, not by CPU', () => {
  const aim = '2,000 jobs in flight';
  const split = (waitMs: number) => ({
    p50: { wait: one(5_000), attempt: one(100), toTask: one(500), toClose: one(100) },
    p99: { wait: one(waitMs), attempt: one(300), toTask: one(4_700), toClose: one(400) },
  });
  const worker = { ...load('worker', 2_000, { cpu: 2, p99Ms: 36_800, rate: 198 }), detection: split(32_700) };
  const retry = {
    ...load('poll-by-retry', 2_000, { cpu: 2, p99Ms: 23_900, rate: 198 }),
    detection: split(21_600),
  };
  const missed = evaluateAims(result(), [worker, retry]).find((a) => a.aim.startsWith(aim));
  assert.equal(missed?.status, 'MISSED');
  assert.match(
    missed?.limits ?? '',
    /^The poll rate was held, so the CPU estimate that follows is not what misses/,
  );
  assert.match(missed?.limits ?? '', /start of the attempt that saw it 32\.7 s against 21\.6 s/);
  // The rate missed: CPU leads the explanation, as before.
  const slow = evaluateAims(result(), [{ ...worker, steadyPollsPerSecond: one(150) }, retry]).find((a) =>
    a.aim.startsWith(aim),
  );
  assert.match(slow?.limits ?? '', /^CPU\./);
});

test('wake-ups: p99 at most 1 s at N = 1,000', () => {
  const aim = 'pollNow to its GET';
  assert.equal(status(evaluateAims(result([wake(1_000)]), []), aim), 'met');
  assert.equal(status(evaluateAims(result([wake(1_001)]), []), aim), 'MISSED');
  assert.equal(status(evaluateAims(result([{ ...wake(500), jobs: 100 }]), []), aim), 'not measured');
});

test("the quota's own cost: read per further job once the chain runs, all told when that was not measured", () => {
  const aim = "the quota's own cost per job";
  const side = (quota: string, chain: QuotaCostSide['quotaWorkflow']): QuotaCostSide => ({
    quota,
    jobs: 10,
    jobEvents: one(24),
    jobActions: one(8),
    quotaWorkflow: chain,
    eventsPerJob: null,
    actionsPerJob: null,
    startLatencyMs: null,
  });
  const judge = (margin?: { jobs: number; actions: number; updates: number; timers: number }) => {
    const chain = { runs: 1, events: 60, actions: 15, updates: 10, timers: 2, ...(margin && { margin }) };
    const quota = [side('10000/10s', chain), side('off', null)];
    return status(evaluateAims({ ...result(), quota }, []), aim);
  };
  assert.equal(judge(), 'MISSED', "1.5 per job with the chain's start and timers shared over 10");
  assert.equal(judge({ jobs: 5, actions: 5, updates: 5, timers: 0 }), 'met', 'one take per further job');
  assert.equal(judge({ jobs: 5, actions: 6, updates: 5, timers: 1 }), 'MISSED', 'a timer among them');
});
