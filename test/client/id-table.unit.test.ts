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
import { boundedWorkflowId, encodeUriPart } from '../../src/ids.js';
import { projectQuotaWorkflowId } from '../../src/workflows/legacy-quota/messages.js';

type Row = [string, ...string[]];
const rows = JSON.parse(readFileSync(new URL('./ids-before.json', import.meta.url), 'utf8')) as Row[];

/** The quota workflow's ID through the one builder: what the earlier builds' quota ID (src/workflows/legacy-quota/messages.ts) is, byte for byte. */
const quotaIdByBuilder = (projectId: string) =>
  boundedWorkflowId([projectId], encodeUriPart, ([p]) => `agent-api-quota/${p}`);

const now: Record<string, Array<(...inputs: string[]) => string>> = {
  agentJobWorkflowId: [(p, k) => agentJobWorkflowId(p ?? '', k ?? '')],
  agentJobIdWorkflowId: [(p, j) => agentJobIdWorkflowId(p ?? '', j ?? '')],
  projectQuotaWorkflowId: [(p) => projectQuotaWorkflowId(p ?? ''), (p) => quotaIdByBuilder(p ?? '')],
  followUpUpdateId: [(k) => followUpUpdateId(k ?? '')],
};

describe('workflow and update IDs, before and after', () => {
  test('the table covers every builder, long, CJK, emoji and ill-formed inputs among them', () => {
    assert.equal(rows.length, 124);
    assert.deepEqual(new Set(rows.map(([name]) => name)), new Set(Object.keys(now)));
    assert.ok(
      rows.some((row) => row.at(-1)?.includes('%~')),
      'cut IDs among them',
    );
    assert.ok(
      rows.some((row) => /\p{Cs}/u.test(row[1] ?? '')),
      'a lone surrogate among them',
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
