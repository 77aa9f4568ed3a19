import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_WORKFLOW_ID_BYTES } from '../../src/ids.js';
import {
  MAX_LEASES,
  MAX_QUEUE,
  ProjectBudget,
  QUOTA_IDLE_MS,
  REMEMBER_MS,
  REMEMBERED,
  timerToStart,
} from '../../src/workflows/project-quota/budget.js';
import {
  MAX_REQUEST_ID_BYTES,
  MAX_USES,
  readRelease,
  readTake,
  type QuotaTake,
  type QuotaTakeAnswer,
  type QuotaUseKind,
} from '../../src/quota/messages.js';
import {
  edgeMarginMs,
  effectiveUses,
  initialState,
  snapshotOf,
  takeMarginMs,
  usageOf,
  type BudgetState,
} from '../../src/workflows/project-quota/state.js';
import {
  CREATE_BACKOFF,
  MAX_RETRY_AFTER_MS,
  MESSAGE_BACKOFF,
  RETRY_JITTER,
} from '../../src/failure-policy/backoff.js';

const T0 = Date.parse('2026-11-24T00:00:00Z');
const W = 60_000;
const LEASE = 10_000;
const M = takeMarginMs({ uses: 1, windowMs: W });
const SPAN = W + edgeMarginMs({ uses: 1, windowMs: W });
const noJitter = () => 0;

function budgetOf(uses: number, options: { maxQueue?: number } = {}) {
  return new ProjectBudget(initialState('docs', { uses, windowMs: W }, T0), options);
}

/** A take of `wf-<id>/<kind><suffix>` as the activity sends it, from run `run-1` of that workflow. */
function takeOf(
  budget: ProjectBudget,
  id: string,
  kind: QuotaUseKind = 'create',
  extra: Partial<QuotaTake> & { suffix?: string } = {},
): QuotaTake {
  const { suffix = '', ...rest } = extra;
  return {
    requestId: `wf-${id}/${kind}${suffix}`,
    workflowId: `wf-${id}`,
    runId: 'run-1',
    kind,
    limit: budget.state.limit,
    leaseMs: LEASE,
    ...rest,
  };
}

/** Takes `wf-<id>/<kind>` at `now`. */
function take(
  budget: ProjectBudget,
  id: string,
  kind: QuotaUseKind = 'create',
  now = T0,
  extra: Partial<QuotaTake> & { suffix?: string } = {},
): QuotaTakeAnswer {
  return budget.take(takeOf(budget, id, kind, extra), now, noJitter);
}

/** A 429 for the use of `wf-<id>/<kind><from>`: the job takes again as `<to>` carrying it. */
function refusedTake(
  budget: ProjectBudget,
  id: string,
  now: number,
  options: {
    kind?: QuotaUseKind;
    from?: string;
    to?: string;
    retryAfterMs?: number | null;
    random?: () => number;
  } = {},
): QuotaTakeAnswer {
  const { kind = 'create', from = '', to = '.2', retryAfterMs = null, random = noJitter } = options;
  const refused = { requestId: `wf-${id}/${kind}${from}`, retryAfterMs };
  return budget.take(takeOf(budget, id, kind, { suffix: to, refused }), now, random);
}

function granted(budget: ProjectBudget, now: number): string[] {
  return budget.grant(now).grants.map((g) => g.requestId);
}

function queueIds(budget: ProjectBudget): string[] {
  return budget.state.queue.map((e) => e.requestId);
}

describe('a take, the one way in', () => {
  test('with room it is granted at once, its use counted from its margin: not a millisecond less, not more', () => {
    const budget = budgetOf(1);
    assert.deepEqual(take(budget, 'a'), { outcome: 'granted', sendWithinMs: M, fromQueue: false });
    assert.deepEqual(budget.state.window, [T0 + M]);
    assert.equal(take(budget, 'b', 'create', T0 + M + SPAN - 1).outcome, 'queued', 'still in the window');
    const other = budgetOf(1);
    take(other, 'a');
    assert.equal(take(other, 'b', 'create', T0 + M + SPAN).outcome, 'granted', 'out of the window');
    assert.equal(other.state.totals.taken, 2);
  });

  test('no room: the take queues and hears its place; a repeat hears it again; nothing is counted twice', () => {
    const budget = budgetOf(1);
    take(budget, 'a');
    const answer = take(budget, 'b', 'create', T0 + 1);
    assert.equal(answer.outcome, 'queued');
    assert.equal(answer.outcome === 'queued' && answer.place.position, 1);
    assert.equal(answer.outcome === 'queued' && Date.parse(answer.place.earliestStartAt), T0 + M + SPAN);
    const again = take(budget, 'b', 'create', T0 + 2);
    assert.equal(again.outcome === 'queued' && again.place.asOf, new Date(T0 + 2).toISOString());
    assert.deepEqual(queueIds(budget), ['wf-b/create']);
    assert.deepEqual(budget.state.totals, {
      taken: 1,
      queued: 1,
      granted: 0,
      refused: 0,
      released: 0,
      expired: 0,
      declined: 0,
    });
  });

  test('never ahead of a queued take, even with room', () => {
    const budget = budgetOf(2);
    take(budget, 'a');
    budget.state.learntUses = 1;
    take(budget, 'b', 'create', T0 + 1);
    budget.state.learntUses = null;
    assert.equal(take(budget, 'c', 'create', T0 + 2).outcome, 'queued', 'b waits, so c queues behind it');
    assert.deepEqual(queueIds(budget), ['wf-b/create', 'wf-c/create']);
    assert.deepEqual(granted(budget, T0 + 3), ['wf-b/create'], 'the room goes to the head');
  });

  test('follow-up messages go ahead of queued creates, each first come first served; a take after a 429 takes the head', () => {
    const budget = budgetOf(1);
    take(budget, 'x');
    for (const [id, kind] of [
      ['a', 'create'],
      ['b', 'create'],
      ['c', 'message'],
      ['d', 'create'],
      ['e', 'message'],
    ] as const) {
      take(budget, id, kind, T0 + 1);
    }
    assert.deepEqual(queueIds(budget), [
      'wf-c/message',
      'wf-e/message',
      'wf-a/create',
      'wf-b/create',
      'wf-d/create',
    ]);
    refusedTake(budget, 'x', T0 + 2);
    take(budget, 'f', 'message', T0 + 3);
    assert.deepEqual(queueIds(budget), [
      'wf-x/create.2',
      'wf-c/message',
      'wf-e/message',
      'wf-f/message',
      'wf-a/create',
      'wf-b/create',
      'wf-d/create',
    ]);
  });

  test('the learnt budget bounds takes; the newest limit wins', () => {
    const budget = budgetOf(3);
    budget.state.learntUses = 1;
    take(budget, 'a');
    assert.equal(take(budget, 'b', 'create', T0 + 1).outcome, 'queued');
    const wider = budgetOf(1);
    take(wider, 'a');
    const answer = wider.take(
      takeOf(wider, 'b', 'create', { limit: { uses: 2, windowMs: W } }),
      T0 + 1,
      noJitter,
    );
    assert.equal(answer.outcome, 'granted');
    assert.equal(wider.state.limit.uses, 2);
  });
});

describe('grants of queued takes', () => {
  test('a grant holds a use until its take comes back for it, which is then granted from the queue', () => {
    const budget = budgetOf(1);
    take(budget, 'a');
    take(budget, 'b', 'create', T0 + 1);
    const edge = T0 + M + SPAN;
    assert.deepEqual(budget.grant(edge), {
      grants: [{ workflowId: 'wf-b', requestId: 'wf-b/create' }],
      expired: [],
    });
    assert.equal(usageOf(budget.state, edge).usesInWindow, 1, 'the held grant counts');
    assert.equal(take(budget, 'c', 'create', edge + 1).outcome, 'queued', 'no room while it is held');
    assert.deepEqual(take(budget, 'b', 'create', edge + 2), {
      outcome: 'granted',
      sendWithinMs: M,
      fromQueue: true,
    });
    assert.deepEqual(budget.state.leases, []);
    assert.deepEqual(budget.state.window, [edge + 2 + M]);
    assert.equal(budget.state.totals.granted, 1);
    assert.equal(budget.state.totals.taken, 2);
  });

  test('a grant not taken within its lease returns to the budget; a late take of it is a new take, at the end of the queue', () => {
    const budget = budgetOf(1);
    take(budget, 'a');
    take(budget, 'b', 'create', T0 + 1);
    const edge = T0 + M + SPAN;
    budget.grant(edge);
    take(budget, 'c', 'create', edge + 1);
    assert.deepEqual(budget.grant(edge + LEASE), {
      grants: [{ workflowId: 'wf-c', requestId: 'wf-c/create' }],
      expired: ['wf-b/create'],
    });
    assert.equal(budget.state.totals.expired, 1);
    const late = take(budget, 'b', 'create', edge + LEASE + 1);
    assert.equal(late.outcome, 'queued');
    assert.equal(late.outcome === 'queued' && late.place.position, 1);
  });

  test('at most MAX_LEASES grants are held at once', () => {
    const budget = budgetOf(1_000);
    budget.state.learntUses = 1;
    take(budget, 'first');
    for (let i = 0; i < MAX_LEASES + 5; i++) take(budget, `q${i}`, 'create', T0 + 1);
    budget.state.learntUses = null;
    budget.state.window = [];
    assert.equal(budget.grant(T0 + 2).grants.length, MAX_LEASES);
  });

  test('a queued or granted take can be released; its ID is then used before', () => {
    const budget = budgetOf(1);
    take(budget, 'a');
    take(budget, 'b', 'create', T0 + 1);
    take(budget, 'c', 'create', T0 + 1);
    budget.grant(T0 + M + SPAN);
    assert.equal(budget.release('wf-b/create', T0 + M + SPAN + 1), true, 'the held grant');
    assert.equal(budget.release('wf-c/create', T0 + M + SPAN + 1), true, 'the queued take');
    assert.equal(budget.release('wf-c/create', T0 + M + SPAN + 2), false, 'once');
    assert.equal(budget.state.totals.released, 2);
    assert.deepEqual(take(budget, 'c', 'create', T0 + M + SPAN + 3), { outcome: 'used-before' });
    assert.deepEqual([budget.state.queue.length, budget.state.leases.length], [0, 0]);
  });
});

describe('repeats', () => {
  test("a repeat of this run's granted take (a retried attempt, an answer too late) is granted again without a second use, its use moved", () => {
    const budget = budgetOf(1);
    take(budget, 'a');
    assert.deepEqual(take(budget, 'a', 'create', T0 + 5_000), {
      outcome: 'granted',
      sendWithinMs: M,
      fromQueue: false,
    });
    assert.deepEqual(budget.state.window, [T0 + 5_000 + M]);
    assert.equal(budget.state.totals.taken, 1);
    // Its use left the window meanwhile: a take anew, on a new take's terms.
    const later = T0 + 5_000 + M + SPAN;
    take(budget, 'b', 'create', later);
    assert.equal(take(budget, 'a', 'create', later + 1).outcome, 'queued');
  });

  test("another run's used ID (a reset workflow, whose past may have sent the call) is used before; so are released and refused IDs", () => {
    const budget = budgetOf(5);
    take(budget, 'a');
    assert.deepEqual(take(budget, 'a', 'create', T0 + 1, { runId: 'run-2' }), { outcome: 'used-before' });
    assert.deepEqual(take(budget, 'a', 'create', T0 + 1, { runId: undefined }), { outcome: 'used-before' });
    budget.release('wf-r/create', T0 + 2);
    assert.deepEqual(take(budget, 'r', 'create', T0 + 3), { outcome: 'used-before' });
    refusedTake(budget, 'a', T0 + 4);
    assert.deepEqual(take(budget, 'a', 'create', T0 + 5), { outcome: 'used-before' });
    assert.equal(budget.state.totals.taken, 0, 'the refused use is out of the count');
  });

  test('remembered IDs are bounded in number and in time', () => {
    const budget = budgetOf(1);
    for (let i = 0; i < REMEMBERED + 10; i++) budget.release(`wf-${i}/create`, T0);
    take(budget, 'x', 'create', T0);
    assert.ok(budget.state.remembered.length <= REMEMBERED + 1);
    take(budget, 'y', 'create', T0 + REMEMBER_MS + M + 1);
    assert.equal(budget.state.remembered.length, 1, 'only the newest take is within the hour');
  });
});

describe('429s', () => {
  const pauseOf = (budget: ProjectBudget, now: number) => (budget.state.pausedUntil ?? 0) - now;

  test('the refused use leaves the window, the take that carries it queues at the head, the project pauses: counted once', () => {
    const budget = budgetOf(3);
    take(budget, 'a');
    take(budget, 'b');
    const answer = refusedTake(budget, 'a', T0 + 1_000);
    assert.equal(answer.outcome === 'queued' && answer.place.position, 1);
    assert.deepEqual(budget.state.window, [T0 + M]);
    assert.equal(pauseOf(budget, T0 + 1_000), CREATE_BACKOFF.initialIntervalMs);
    assert.equal(take(budget, 'c', 'create', T0 + 1_001).outcome, 'queued', 'no take during the pause');
    refusedTake(budget, 'a', T0 + 1_002);
    assert.deepEqual(budget.state.totals.refused, 1, 'a repeat of the take is no second 429');
    assert.deepEqual(queueIds(budget), ['wf-a/create.2', 'wf-c/create']);
  });

  test('Retry-After raises the pause, never lowers it, and is capped: 0, a day', () => {
    for (const [retryAfterMs, expected] of [
      [0, CREATE_BACKOFF.initialIntervalMs],
      [null, CREATE_BACKOFF.initialIntervalMs],
      [30_000, 30_000],
      [86_400_000, MAX_RETRY_AFTER_MS],
    ] as const) {
      const budget = budgetOf(1);
      take(budget, 'a');
      refusedTake(budget, 'a', T0 + 1, { retryAfterMs });
      assert.equal(
        pauseOf(budget, T0 + 1),
        Math.max(CREATE_BACKOFF.initialIntervalMs, expected),
        String(retryAfterMs),
      );
    }
    const jittered = budgetOf(1);
    take(jittered, 'a');
    refusedTake(jittered, 'a', T0 + 1, { random: () => 1 });
    assert.equal(
      pauseOf(jittered, T0 + 1),
      Math.round(CREATE_BACKOFF.initialIntervalMs * (1 + RETRY_JITTER)),
    );
    const message = budgetOf(1);
    take(message, 'a', 'message');
    refusedTake(message, 'a', T0 + 1, { kind: 'message' });
    assert.equal(pauseOf(message, T0 + 1), MESSAGE_BACKOFF.initialIntervalMs);
  });

  test('after a 429 the queue probes one use at a time: the next grant waits until the probe was taken and no 429 came for it', () => {
    const budget = budgetOf(5);
    take(budget, 'a');
    refusedTake(budget, 'a', T0 + 1);
    for (const id of ['b', 'c', 'd']) take(budget, id, 'create', T0 + 2);
    const resume = budget.state.pausedUntil as number;
    assert.deepEqual(granted(budget, resume), ['wf-a/create.2'], 'one probe');
    assert.deepEqual(granted(budget, resume + 1), [], 'none while it is held');
    take(budget, 'a', 'create', resume + 2, { suffix: '.2' });
    assert.deepEqual(granted(budget, resume + 3), [], 'none until it settles');
    const { at } = budget.wake(resume + 3, false);
    assert.equal(at, resume + 2 + 2 * takeMarginMs(budget.state.limit), 'the loop wakes when it settles');
    assert.deepEqual(
      granted(budget, at),
      ['wf-b/create', 'wf-c/create', 'wf-d/create'],
      'then the queue flows',
    );
    assert.equal(budget.state.refusalsInARow, 0);
  });

  test('the pause grows with refusals in a row; the learnt budget falls to what the API took, and grows back 1, 2, 4 per quiet window', () => {
    const budget = budgetOf(10);
    for (let i = 0; i < 6; i++) take(budget, `u${i}`);
    refusedTake(budget, 'u5', T0 + 100);
    assert.equal(effectiveUses(budget.state), 5, 'five of ours were in the window');
    const first = (budget.state.pausedUntil as number) - (T0 + 100);
    granted(budget, budget.state.pausedUntil as number);
    const now = (budget.state.pausedUntil as number) + 1;
    take(budget, 'u5', 'create', now, { suffix: '.2' });
    refusedTake(budget, 'u5', now + 1, { from: '.2', to: '.3' });
    assert.ok((budget.state.pausedUntil as number) - (now + 1) > first, 'a longer pause');
    assert.equal(budget.state.refusalsInARow, 2);
    const learntAt = budget.state.learntAt;
    budget.grant(learntAt + W);
    assert.equal(effectiveUses(budget.state), 6);
    budget.grant(learntAt + 2 * W);
    assert.equal(effectiveUses(budget.state), 8);
    budget.grant(learntAt + 3 * W);
    assert.equal(effectiveUses(budget.state), 10, 'back at the configured budget');
    assert.equal(budget.state.learntUses, null);
  });

  test('a 429 whose use had left the window, or is unknown, queues the take but teaches nothing', () => {
    const budget = budgetOf(3);
    refusedTake(budget, 'ghost', T0);
    assert.equal(budget.state.learntUses, null);
    assert.equal(budget.state.totals.refused, 1);
    assert.deepEqual(queueIds(budget), ['wf-ghost/create.2']);
  });
});

describe('another client spends the window', () => {
  /**
   * Replays, on a fake clock, the budget against an API that allows `real` uses per rolling window
   * and answers 429 past that: `requests` jobs take at 0; a granted call reaches the API 100 ms
   * later and is answered 100 ms after that; a queued job takes again when granted. `spentBefore`
   * are uses another client made. Returns when each call was accepted, and the 429s.
   */
  function replay(
    config: { uses: number; windowMs: number },
    real: number,
    spentBefore: number[],
    requests: number,
  ) {
    const budget = new ProjectBudget(initialState('docs', config, 0));
    const apiUses = [...spentBefore];
    const accepted: number[] = [];
    const calls: Array<{ at: number; job: number; name: string }> = [];
    const names = new Map<number, string>();
    const takeAs = (job: number, name: string, now: number, refused?: QuotaTake['refused']) => {
      names.set(job, name);
      const answer = budget.take(
        {
          requestId: `wf-${job}/${name}`,
          workflowId: `wf-${job}`,
          runId: 'r',
          kind: 'create',
          limit: config,
          leaseMs: 120_000,
          ...(refused && { refused }),
        },
        now,
        noJitter,
      );
      if (answer.outcome === 'granted') calls.push({ at: now + 100, job, name });
    };
    for (let i = 0; i < requests; i++) takeAs(i, 'create', 0);
    let now = 0;
    while (accepted.length < requests) {
      assert.ok(now < 3_600_000, `still ${requests - accepted.length} to create after an hour`);
      for (const { workflowId } of budget.grant(now).grants) {
        const job = Number(workflowId.slice(3));
        takeAs(job, names.get(job) as string, now);
      }
      calls.sort((a, b) => a.at - b.at);
      const next = Math.min(calls[0]?.at ?? Infinity, budget.wake(now, false).at ?? Infinity);
      assert.ok(Number.isFinite(next), 'nothing left to wake the budget');
      now = next;
      while (calls.length > 0 && (calls[0] as { at: number }).at <= now) {
        const { at, job, name } = calls.shift() as { at: number; job: number; name: string };
        if (apiUses.filter((t) => t > at - config.windowMs).length < real) {
          apiUses.push(at);
          accepted.push(at);
          continue;
        }
        const n = Number(name.split('.')[1] ?? 1) + 1;
        takeAs(job, `create.${n}`, at + 100, { requestId: `wf-${job}/${name}`, retryAfterMs: null });
      }
    }
    return { accepted, refused: budget.state.totals.refused };
  }

  test('a window another client spent just before 40 jobs: the last create by 100 s', () => {
    // 10 per 20 s, all ten spent by another client in the second before the 40 jobs arrive.
    const spentBefore = Array.from({ length: 10 }, (_, i) => -1_000 + i * 50);
    const { accepted, refused } = replay({ uses: 10, windowMs: 20_000 }, 10, spentBefore, 40);
    const lastS = Math.max(...accepted) / 1000;
    process.stdout.write(
      `# quota after another client's window: last create at ${lastS.toFixed(1)} s, ${refused} 429s\n`,
    );
    // The ideal: 10 creates at each of 20, 40, 60 and 80 s (the other client's uses leave at 19 s).
    assert.ok(lastS <= 100, `the last create at ${lastS} s`);
  });

  test('a real budget lower than the configured one all along: about one 429 per window, not a burst each window', () => {
    const w = 20_000;
    const { accepted, refused } = replay({ uses: 10, windowMs: w }, 4, [], 40);
    const windows = Math.ceil(Math.max(...accepted) / w);
    process.stdout.write(`# quota with a real budget of 4 of 10: ${refused} 429s over ${windows} windows\n`);
    assert.ok(refused <= 10 - 4 + windows, `${refused} 429s over ${windows} windows`);
    assert.ok(Math.max(...accepted) <= 11 * w, `the last create at ${Math.max(...accepted) / 1000} s`);
  });
});

describe('the queue', () => {
  test(`holds at most ${MAX_QUEUE}: the next take is declined with a time to take again; a take after a 429 still queues`, () => {
    const budget = budgetOf(1);
    take(budget, 'holder');
    for (let i = 0; i < MAX_QUEUE; i++)
      assert.equal(take(budget, `q${i}`, 'create', T0 + 1).outcome, 'queued');
    const declined = take(budget, 'late', 'create', T0 + 1);
    assert.equal(take(budget, 'late', 'message', T0 + 1).outcome, 'declined', 'messages too');
    assert.ok(declined.outcome === 'declined');
    assert.equal(declined.queueLength, MAX_QUEUE);
    // About when half the queue has been granted: one use a window, 500 windows.
    const retryAt = Date.parse(declined.retryAt);
    assert.ok(retryAt > T0 + 499 * W && retryAt <= T0 + 501 * W, declined.retryAt);
    refusedTake(budget, 'holder', T0 + 2);
    assert.equal(budget.state.queue.length, MAX_QUEUE + 1);
    assert.equal(budget.state.totals.declined, 2);
  });

  test('a take the full queue declined gets the room that frees before a newer one: no starvation; a held room lapses', () => {
    const budget = budgetOf(1, { maxQueue: 2 });
    take(budget, 'a');
    take(budget, 'b', 'create', T0 + 1);
    take(budget, 'c', 'create', T0 + 1);
    const declined = take(budget, 'x', 'create', T0 + 2);
    assert.ok(declined.outcome === 'declined');
    const edge = T0 + M + SPAN;
    assert.deepEqual(granted(budget, edge), ['wf-b/create']);
    assert.equal(
      take(budget, 'newer', 'create', edge + 1).outcome,
      'declined',
      'the freed place is held for x',
    );
    assert.equal(take(budget, 'x', 'create', Date.parse(declined.retryAt)).outcome, 'queued');
    assert.deepEqual(queueIds(budget), ['wf-c/create', 'wf-x/create']);
    const lapsed = budgetOf(1, { maxQueue: 1 });
    take(lapsed, 'a');
    take(lapsed, 'b', 'create', T0 + 1);
    assert.equal(take(lapsed, 'gone', 'create', T0 + 1).outcome, 'declined');
    lapsed.release('wf-b/create', T0 + 2);
    assert.equal(take(lapsed, 'newer', 'create', T0 + 3).outcome, 'declined', 'held for `gone`');
    assert.equal(lapsed.release('wf-gone/create', T0 + 4), false, 'a release gives the place up');
    assert.equal(take(lapsed, 'newer', 'create', T0 + 5).outcome, 'queued');
  });

  test('a lower cap from the input applies; it never raises the budget own', () => {
    const budget = budgetOf(1, { maxQueue: 2 });
    for (const id of ['a', 'b', 'c', 'd']) take(budget, id);
    assert.equal(budget.state.queue.length, 2);
    const big = budgetOf(1, { maxQueue: 10 * MAX_QUEUE });
    for (let i = 0; i <= MAX_QUEUE + 2; i++) take(big, `q${i}`);
    assert.equal(big.state.queue.length, MAX_QUEUE);
  });

  test('a full state, with IDs of the longest accepted length and JSON form, stays well under the 2 MB of a continue-as-new input', () => {
    const uses = MAX_USES;
    const budget = budgetOf(uses);
    // Every `"` is one byte of the ID and two in the JSON: the longest carried form accepted.
    const workflowId = (i: number) => `${i}-`.padEnd(MAX_WORKFLOW_ID_BYTES, '"');
    const longest = (i: number): QuotaTake => ({
      requestId: `${workflowId(i)}/`.padEnd(MAX_REQUEST_ID_BYTES, '"'),
      workflowId: workflowId(i),
      runId: 'r'.repeat(MAX_WORKFLOW_ID_BYTES),
      kind: 'message',
      limit: { uses, windowMs: W },
      leaseMs: LEASE,
    });
    // A full window, MAX_LEASES takes queued, then room for them: grants held for each.
    for (let i = 0; i < uses; i++) budget.state.window.push(T0 + i);
    let n = 0;
    for (; n < MAX_LEASES; n++) budget.take(longest(n), T0, noJitter);
    budget.state.window.splice(0, MAX_LEASES);
    budget.grant(T0);
    for (let i = 0; i < REMEMBERED; i++) budget.release(`released-${i}`, T0);
    // IDs whose JSON form is twice their bytes fill the queue's bytes before its count.
    while (budget.take(longest(n++), T0, noJitter).outcome === 'queued');
    assert.ok(budget.state.queue.length > MAX_QUEUE / 2, `${budget.state.queue.length} queued`);
    for (let i = 0; i < 200; i++) budget.take(longest(n++), T0, noJitter);
    const bytes = Buffer.byteLength(
      JSON.stringify({ projectId: 'docs', limit: budget.state.limit, state: budget.state }),
    );
    process.stdout.write(`# a full quota state: ${(bytes / 1e6).toFixed(2)} MB\n`);
    assert.equal(budget.state.leases.length, MAX_LEASES);
    assert.ok(budget.state.heldRooms.length > 0);
    assert.ok(bytes < 1.5e6, `${bytes} bytes`);
  });

  test('the earliest start of each place slides with the window, one grant at a time, after any pause', () => {
    const budget = budgetOf(2);
    take(budget, 'a');
    take(budget, 'b', 'create', T0 + 1_000);
    for (const id of ['c', 'd', 'e']) take(budget, id, 'create', T0 + 2_000);
    // A repeat of a queued take hears its place again.
    const placeOf = (id: string) => {
      const answer = take(budget, id, 'create', T0 + 2_000);
      assert.equal(answer.outcome, 'queued');
      return answer.place;
    };
    const start = (id: string) => Date.parse(placeOf(id).earliestStartAt);
    assert.equal(start('c'), T0 + M + SPAN);
    assert.equal(start('d'), T0 + 1_000 + M + SPAN);
    assert.equal(start('e'), T0 + M + 2 * SPAN);
    assert.deepEqual(
      { ...placeOf('e'), earliestStartAt: undefined },
      { position: 3, queueLength: 3, earliestStartAt: undefined, asOf: new Date(T0 + 2_000).toISOString() },
    );
  });
});

describe('payloads, checked by their schemas', () => {
  const valid = takeOf(budgetOf(3), 'a');

  test('malformed takes and releases are named and refused; numbers out of range are clamped', () => {
    for (const raw of [
      null,
      'take',
      { ...valid, requestId: 42 },
      { ...valid, requestId: '' },
      { ...valid, requestId: 'x'.repeat(MAX_REQUEST_ID_BYTES + 1) },
      { ...valid, workflowId: 'w'.repeat(MAX_WORKFLOW_ID_BYTES + 1) },
      { ...valid, workflowId: 'wf-b' },
      { ...valid, kind: 'delete' },
      { ...valid, limit: undefined },
      { ...valid, limit: { uses: '3', windowMs: W } },
      { ...valid, leaseMs: Infinity },
      { ...valid, refused: { retryAfterMs: 5 } },
    ]) {
      const read = readTake(raw);
      assert.ok('problem' in read, JSON.stringify(raw)?.slice(0, 80));
      assert.ok(read.problem.length > 0);
    }
    const clamped = readTake({
      ...valid,
      limit: { uses: 1e300, windowMs: -1 },
      leaseMs: 1e300,
      extra: 'dropped',
    });
    assert.ok('value' in clamped);
    assert.deepEqual(clamped.value.limit, { uses: MAX_USES, windowMs: 1_000 });
    assert.equal(clamped.value.leaseMs, 24 * 60 * 60_000);
    assert.equal('extra' in clamped.value, false);
    const refused = readTake({ ...valid, refused: { requestId: 'wf-a/create', retryAfterMs: 1e12 } });
    assert.ok('value' in refused);
    assert.equal(refused.value.refused?.retryAfterMs, MAX_RETRY_AFTER_MS);
    assert.ok('problem' in readRelease({}));
    assert.deepEqual(readRelease({ requestId: 'wf-a/create' }), { value: { requestId: 'wf-a/create' } });
  });

  test('IDs are measured as Temporal measures them: `"` is one byte; a control character, six in JSON, is bounded apart', () => {
    const workflowId = 'w'.padEnd(MAX_WORKFLOW_ID_BYTES, '"');
    const requestId = `${workflowId}/`.padEnd(MAX_REQUEST_ID_BYTES, '\\');
    assert.ok('value' in readTake({ ...valid, workflowId, requestId }));
    const escaped = `wf-a/${'\u0001'.repeat(MAX_REQUEST_ID_BYTES / 2)}`;
    assert.ok('problem' in readTake({ ...valid, requestId: escaped }));
  });
});

describe('the life of a budget', () => {
  /** Nothing queued, granted or counted in the window, no room held: ending loses nothing. */
  const idle = ({ state: s }: ProjectBudget) =>
    s.queue.length + s.leases.length + s.window.length + s.heldRooms.length === 0;

  test('idle once nothing is queued, granted or in the window; the query changes nothing', () => {
    const budget = budgetOf(1);
    assert.equal(idle(budget), true);
    take(budget, 'a');
    take(budget, 'b', 'create', T0 + 1);
    const before = JSON.stringify(budget.state);
    const status = snapshotOf(budget.state, T0 + 2);
    assert.equal(JSON.stringify(budget.state), before);
    assert.equal(status.queueLength, 1);
    assert.equal(status.usesInWindow, 1);
    assert.deepEqual(
      status.queueHead.map((e) => e.requestId),
      ['wf-b/create'],
    );
    assert.equal(idle(budget), false);
    budget.release('wf-b/create', T0 + 3);
    budget.grant(T0 + M + SPAN);
    assert.equal(idle(budget), true);
  });

  test('the carried state is plain JSON: a budget rebuilt from it goes on where it stopped', () => {
    const budget = budgetOf(1);
    take(budget, 'a');
    take(budget, 'b', 'create', T0 + 1);
    const carried = new ProjectBudget(JSON.parse(JSON.stringify(budget.state)) as BudgetState);
    assert.deepEqual(granted(carried, T0 + M + SPAN), ['wf-b/create']);
    assert.equal(take(carried, 'b', 'create', T0 + M + SPAN + 1).outcome, 'granted');
    assert.deepEqual(take(carried, 'a', 'create', T0 + M + SPAN + 2, { runId: 'run-9' }), {
      outcome: 'used-before',
    });
  });
});

describe("the quota loop's wake-ups (one timer armed)", () => {
  /**
   * Runs the loop of src/workflows/project-quota/workflow.ts on a fake clock: a pass after each of
   * `events` (at its time) and after each timer that rings, one timer armed at a time. Returns the
   * timers it started and when it ended.
   */
  function runLoop(budget: ProjectBudget, events: Array<{ at: number; apply: (now: number) => void }>) {
    let now = T0;
    let armedAt: number | null = null;
    const timers: number[] = [];
    const queue = [...events];
    for (let passes = 0; passes < 1_000; passes++) {
      budget.grant(now);
      const { at, end } = budget.wake(now, false);
      if (end) return { timers, endedAt: now };
      const next = timerToStart(armedAt, at);
      if (next !== null) {
        armedAt = next;
        timers.push(next);
      }
      const event = queue[0];
      if (event && (armedAt === null || event.at < armedAt)) {
        queue.shift();
        now = event.at;
        event.apply(now);
        continue;
      }
      assert.ok(armedAt !== null, `at ${now - T0} ms the loop waits with no timer and nothing to come`);
      now = armedAt;
      armedAt = null;
    }
    throw new Error('the loop never ended');
  }

  test('takes that never wait start no timer each: one for the idle end, one more when a take pushed it on', () => {
    const budget = budgetOf(100);
    const takes = Array.from({ length: 30 }, (_, i) => ({
      at: T0 + i * 2_000,
      apply: (now: number) => void take(budget, `${i}`, 'create', now),
    }));
    const { timers, endedAt } = runLoop(budget, takes);
    const lastUse = T0 + 29 * 2_000 + M;
    assert.equal(endedAt, lastUse + SPAN + QUOTA_IDLE_MS, 'ends an idle minute after the last use left');
    assert.deepEqual(timers, [T0 + QUOTA_IDLE_MS, lastUse + SPAN + QUOTA_IDLE_MS]);
  });

  test('uses leaving the window wake no one while nothing is queued; with a take queued, the edge does; a lease at its expiry, a pause at its end', () => {
    const budget = budgetOf(1);
    take(budget, 'a');
    budget.grant(T0);
    assert.deepEqual(budget.wake(T0, false), { at: T0 + M + SPAN + QUOTA_IDLE_MS, end: false });
    take(budget, 'b', 'create', T0 + 1);
    budget.grant(T0 + 1);
    assert.deepEqual(
      budget.wake(T0 + 1, false),
      { at: T0 + M + SPAN, end: false },
      'the edge frees room for b',
    );
    budget.grant(T0 + M + SPAN);
    assert.deepEqual(
      budget.wake(T0 + M + SPAN, false),
      { at: T0 + M + SPAN + LEASE, end: false },
      'the lease',
    );
    refusedTake(budget, 'a', T0 + M + SPAN + 1, { retryAfterMs: 5_000 });
    budget.grant(T0 + M + SPAN + 1);
    assert.equal(budget.wake(T0 + M + SPAN + 1, false).at, budget.state.pausedUntil, 'the pause ends first');
  });

  test('an idle budget ends an idle minute on, not before its unacknowledged signals are', () => {
    const budget = budgetOf(1);
    assert.deepEqual(budget.wake(T0, false), { at: T0 + QUOTA_IDLE_MS, end: false });
    assert.deepEqual(
      budget.wake(T0 + 10, false),
      { at: T0 + QUOTA_IDLE_MS, end: false },
      'a pass keeps the end',
    );
    assert.deepEqual(
      budget.wake(T0 + QUOTA_IDLE_MS, true),
      { at: null, end: false },
      'waits for the acknowledgement',
    );
    assert.deepEqual(budget.wake(T0 + QUOTA_IDLE_MS + 5, false), { at: null, end: true });
  });

  test('a timer is started only when the wake-up moves earlier than the armed one', () => {
    assert.equal(timerToStart(null, null), null);
    assert.equal(timerToStart(null, 10), 10);
    assert.equal(timerToStart(10, 20), null, 'the armed one rings first; the loop arms again then');
    assert.equal(timerToStart(10, 10), null);
    assert.equal(timerToStart(20, 10), 10);
    assert.equal(timerToStart(20, null), null, 'nothing due: the armed one may ring, harmlessly');
  });
});
