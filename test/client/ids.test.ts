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
    assert.equal(
      agentJobWorkflowId('docs-site', 'release-42'),
      agentJobWorkflowId('docs-site', 'release-42'),
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

  test('long keys that share a 200-character prefix get distinct IDs of bounded length', () => {
    const prefix = 'k'.repeat(250);
    const a = agentJobWorkflowId('docs', `${prefix}-one`);
    const b = agentJobWorkflowId('docs', `${prefix}-two`);
    assert.notEqual(a, b);
    assert.ok(a.length < 300, `${a.length} characters`);
    assert.ok(a.startsWith(`agent-job/docs/${'k'.repeat(200)}~`));
  });

  test('a cut part never equals an uncut one, even one spelled like it', () => {
    const long = 'x'.repeat(300);
    const cut = encodeIdPart(long);
    // The same text as a key of its own is longer than 200 characters, so it is cut and hashed too.
    assert.notEqual(encodeIdPart(cut), cut);
    assert.notEqual(encodeIdPart(cut.slice(0, 200)), cut);
  });
});
