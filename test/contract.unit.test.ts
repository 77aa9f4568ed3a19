/**
 * The contract's input rules for IDs and prompts, and the quota workflow's ID: what `resolveInput` refuses
 * before anything is created, and that a derived ID always fits the server's 255 bytes. No server.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  InvalidInputError,
  MAX_PROMPT_LENGTH,
  MAX_JOB_ID_BYTES,
  MAX_PROJECT_ID_BYTES,
} from '../src/contract.js';
import { checkPrompt, resolveInput } from '../src/workflows/agent-job/input.js';
import { projectQuotaWorkflowId } from '../src/quota/messages.js';

function refused(input: Record<string, unknown>, field: string, pattern: RegExp): void {
  assert.throws(
    () => resolveInput({ prompt: 'p', ...input }),
    (err: unknown) => {
      assert.ok(err instanceof InvalidInputError, String(err));
      assert.equal(err.field, field);
      assert.match(err.message, pattern);
      return true;
    },
  );
}

describe('IDs at input', () => {
  test('a project ID over 200 UTF-8 bytes is refused, naming the field and the limit', () => {
    assert.equal(MAX_PROJECT_ID_BYTES, 200);
    refused({ projectId: 'p'.repeat(201) }, 'projectId', /201 bytes.*200/);
    refused({ projectId: '\u4e00'.repeat(67) }, 'projectId', /201 bytes.*200/);
    assert.equal(resolveInput({ projectId: '\u4e00'.repeat(66), prompt: 'p' }).projectId.length, 66);
    assert.equal(resolveInput({ projectId: 'p'.repeat(200), prompt: 'p' }).projectId.length, 200);
  });

  test('a lone surrogate in a project or job ID is refused', () => {
    refused({ projectId: 'docs\ud800' }, 'projectId', /well-formed/);
    refused({ projectId: 'docs', jobId: '\udc00job' }, 'jobId', /well-formed/);
  });

  test('a job ID over the API client\u2019s bound is refused', () => {
    refused({ projectId: 'docs', jobId: 'j'.repeat(MAX_JOB_ID_BYTES + 1) }, 'jobId', /1000/);
    assert.ok(resolveInput({ projectId: 'docs', jobId: 'j'.repeat(MAX_JOB_ID_BYTES) }).jobId);
  });
});

describe('the quota workflow ID', () => {
  test('reads as it did for an ordinary project', () => {
    assert.equal(projectQuotaWorkflowId('docs-site'), 'agent-api-quota/docs-site');
    assert.equal(projectQuotaWorkflowId('a b/c'), 'agent-api-quota/a%20b%2Fc');
  });

  test('fits 255 bytes for 27 CJK characters, 200 ASCII ones, and never throws', () => {
    for (const projectId of [
      '\u4e00'.repeat(27),
      '\u4e00'.repeat(66),
      'p'.repeat(200),
      'x\ud800'.repeat(50),
    ]) {
      const id = projectQuotaWorkflowId(projectId);
      assert.ok(Buffer.byteLength(id) <= 255, `${Buffer.byteLength(id)} bytes`);
      assert.ok(id.startsWith('agent-api-quota/'));
    }
    assert.notEqual(projectQuotaWorkflowId('\u4e00'.repeat(27)), projectQuotaWorkflowId('\u4e00'.repeat(28)));
  });
});

describe('prompts', () => {
  test('one rule for a create and the follow-ups: non-blank, at most the limit, named by field', () => {
    assert.equal(checkPrompt('x'.repeat(MAX_PROMPT_LENGTH)).length, MAX_PROMPT_LENGTH);
    const refusedPrompt = (value: unknown, field: string, pattern: RegExp) =>
      assert.throws(
        () => checkPrompt(value, field),
        (err: unknown) =>
          err instanceof InvalidInputError && err.field === field && pattern.test(err.message),
      );
    refusedPrompt(' \n ', 'prompt', /non-blank/);
    refusedPrompt(42, 'followUp prompt', /non-blank/);
    refusedPrompt(
      'x'.repeat(MAX_PROMPT_LENGTH + 1),
      'sendMessage prompt',
      /32001 characters; the limit is 32000/,
    );
    refused({ projectId: 'docs', prompt: 'x'.repeat(MAX_PROMPT_LENGTH + 1) }, 'prompt', /the limit is 32000/);
    refused({ projectId: 'docs', jobId: 'j', prompt: '' }, 'prompt', /non-blank/);
    assert.equal(resolveInput({ projectId: 'docs', jobId: 'j' }).prompt, undefined);
  });
});
