/**
 * Workflow IDs from the client library: stable, readable for ordinary parts, and never shared by
 * two distinct (project, key) or (project, agent job) pairs. No server needed.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { agentJobIdWorkflowId, agentJobWorkflowId, encodeIdPart } from '../../src/client/index.js';

describe('workflow IDs', () => {
  test('an ordinary project and key read as they are, and the same inputs give the same ID', () => {
    assert.equal(agentJobWorkflowId('docs-site', 'release-42'), 'agent-job/docs-site/release-42');
    // The same in every process, a cut one included: its hash is 64-bit FNV-1a over the key's
    // UTF-16LE bytes, computed outside this code. 122 bytes a part, 104 of them the key's start.
    assert.equal(
      agentJobWorkflowId('docs-site', 'x'.repeat(300)),
      `agent-job/docs-site/${'x'.repeat(104)}%~b1b01e266e667125`,
    );
    assert.equal(agentJobIdWorkflowId('docs-site', 'job_1'), 'agent-job/docs-site/job/job_1');
  });

  test('a / in the project or the key never makes two pairs share an ID', () => {
    const pairs: Array<[string, string]> = [
      ['a/b', 'c'],
      ['a', 'b/c'],
      ['a%2Fb', 'c'],
      ['a', 'b%2Fc'],
      ['a%252Fb', 'c'],
      ['a', 'job/c'],
    ];
    const ids = pairs.map(([project, key]) => agentJobWorkflowId(project, key));
    assert.equal(new Set(ids).size, pairs.length, ids.join('\n'));
    // Nor does a key-based ID ever equal a job-based one.
    assert.ok(!ids.includes(agentJobIdWorkflowId('a', 'c')));
    assert.notEqual(agentJobIdWorkflowId('a/job', 'c'), agentJobIdWorkflowId('a', 'job/c'));
  });

  test('long keys that share a long prefix get distinct IDs of at most 255 bytes', () => {
    const prefix = 'k'.repeat(250);
    const a = agentJobWorkflowId('docs', `${prefix}-one`);
    const b = agentJobWorkflowId('docs', `${prefix}-two`);
    assert.notEqual(a, b);
    for (const id of [a, b]) assert.ok(Buffer.byteLength(id) <= 255, `${Buffer.byteLength(id)} bytes`);
    assert.equal(a, `agent-job/docs/${'k'.repeat(104)}%~2a99d25914af9ea4`);
    assert.equal(b, `agent-job/docs/${'k'.repeat(104)}%~0ab2fd3b4360b664`);
  });

  test('every ID fits 255 bytes: a 200-byte project, CJK keys and job IDs, a 1,000-byte job ID', () => {
    const ids = [
      agentJobWorkflowId('p'.repeat(200), 'release-42'),
      agentJobWorkflowId('\u6587'.repeat(66), '\u6587'.repeat(100)),
      agentJobIdWorkflowId('docs', 'j'.repeat(1_000)),
      agentJobIdWorkflowId('%/'.repeat(100), '/'.repeat(300)),
    ];
    for (const id of ids) assert.ok(Buffer.byteLength(id) <= 255, `${Buffer.byteLength(id)} bytes: ${id}`);
  });

  test('a cut ID never equals a readable one, even one spelled like it', () => {
    const long = 'x'.repeat(300);
    const cut = agentJobWorkflowId('docs', long);
    const cutKey = cut.slice('agent-job/docs/'.length);
    // The same text as a key of its own is encoded (`%` becomes `%25`), so it reads differently.
    assert.notEqual(agentJobWorkflowId('docs', cutKey), cut);
    assert.equal(encodeIdPart(cutKey).includes('%~'), false);
  });
});
