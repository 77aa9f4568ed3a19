/**
 * Every workflow ID the project builds stays byte for byte what it was: running workflows are
 * found by these IDs. ./ids-before.json holds sample inputs and the IDs the code gave at 11e1a68,
 * before the client was split and the quota could call the one builder in src/ids.ts; each is
 * computed again here, by the library and by that builder.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { agentJobIdWorkflowId, agentJobWorkflowId, followUpUpdateId } from '../../src/client/index.js';

type Row = [string, ...string[]];
const rows = JSON.parse(readFileSync(new URL('./ids-before.json', import.meta.url), 'utf8')) as Row[];

const now: Record<string, Array<(...inputs: string[]) => string>> = {
  agentJobWorkflowId: [(p, k) => agentJobWorkflowId(p ?? '', k ?? '')],
  agentJobIdWorkflowId: [(p, j) => agentJobIdWorkflowId(p ?? '', j ?? '')],
  followUpUpdateId: [(k) => followUpUpdateId(k ?? '')],
};

describe('workflow and update IDs, before and after', () => {
  test('the table covers every builder, long, CJK and emoji inputs among them (the lone surrogates were the quota ID of 1.0 and 1.1, gone after 1.2.0)', () => {
    assert.equal(rows.length, 109);
    assert.deepEqual(new Set(rows.map(([name]) => name)), new Set(Object.keys(now)));
    assert.ok(
      rows.some((row) => row.at(-1)?.includes('%~')),
      'cut IDs among them',
    );
  });

  for (const [name, ...rest] of rows) {
    const inputs = rest.slice(0, -1);
    const before = rest.at(-1) ?? '';
    test(`${name}(${inputs.map((i) => JSON.stringify(i.length > 24 ? `${i.slice(0, 12)}…(${i.length})` : i)).join(', ')})`, () => {
      for (const build of now[name] ?? []) assert.equal(build(...inputs), before);
    });
  }
});
