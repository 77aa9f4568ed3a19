/** The order in which the benchmark's load runs interleave the implementations (bench/catalogue.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IMPLEMENTATIONS, runOrder } from '../../bench/catalogue.js';

test('over one repeat per implementation, each runs right after each other one exactly once', () => {
  const orders = [1, 2, 3, 4].map((repeat) => runOrder(IMPLEMENTATIONS, repeat));
  assert.deepEqual(orders[0], ['worker', 'plain-loop', 'floor', 'poll-by-retry']);
  const neighbours = orders.flatMap((order) => order.slice(1).map((impl, i) => `${order[i]} > ${impl}`));
  assert.equal(new Set(neighbours).size, neighbours.length, `a pair repeats: ${neighbours.join(', ')}`);
  assert.equal(neighbours.length, IMPLEMENTATIONS.length * (IMPLEMENTATIONS.length - 1));
  for (const order of orders) assert.deepEqual([...order].sort(), [...IMPLEMENTATIONS].sort());
  assert.deepEqual(runOrder(IMPLEMENTATIONS, 5), orders[0], 'the fifth repeat starts the square again');
});

test('any number of implementations runs each of them once per repeat', () => {
  for (const n of [0, 1, 2, 3, 5]) {
    const impls = Array.from({ length: n }, (_, i) => `impl ${i}`);
    for (const repeat of [1, 2, 3, 7]) assert.deepEqual([...runOrder(impls, repeat)].sort(), impls);
  }
});
