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
import type { Client } from '@temporalio/client';
import { agentJobStartOptions, sendFollowUp, startAgentJob } from '../src/client/index.js';
import { checkPrompt, resolveInput } from '../src/input.js';
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

  test('"." and "..", padded or not, are refused as project and job IDs: a URL path reads them as another path', () => {
    for (const id of ['.', '..', ' .. ', '.\n']) {
      refused({ projectId: id }, 'projectId', /is not a usable ID: a URL path reads "\." and "\.\."/);
      refused({ projectId: 'docs', jobId: id }, 'jobId', /is not a usable ID/);
    }
    refused({ projectId: '..' }, 'projectId', /^projectId: "\.\." is not a usable ID/);
  });

  test('white space around an ID is refused, not trimmed, and the message says what to send', () => {
    refused(
      { projectId: ' docs ' },
      'projectId',
      /^projectId: " docs " has leading or trailing white space; send "docs"$/,
    );
    refused({ projectId: '\tdocs' }, 'projectId', /^projectId: "\\tdocs" has leading .*; send "docs"$/);
    refused({ projectId: 'docs\u00a0' }, 'projectId', /send "docs"$/);
    refused({ projectId: '\ufeffdocs' }, 'projectId', /send "docs"$/);
    refused(
      { projectId: 'docs', jobId: 'job-1 ' },
      'jobId',
      /^jobId: "job-1 " has leading .*; send "job-1"$/,
    );
  });

  test('a control character inside an ID is refused, naming it', () => {
    refused(
      { projectId: 'docs\u0000site' },
      'projectId',
      /holds the control character U\+0000; an ID is printable text/,
    );
    refused({ projectId: 'docs\nsite' }, 'projectId', /U\+000A/);
    refused({ projectId: 'docs\u007fsite' }, 'projectId', /U\+007F/);
    refused({ projectId: 'docs\u0085site' }, 'projectId', /U\+0085/);
    refused({ projectId: 'docs', jobId: 'job\u001b[0m' }, 'jobId', /U\+001B/);
  });

  test('dots, spaces and symbols inside an ID are kept as they are', () => {
    for (const id of ['...', 'docs.site', 'a..b', '.docs', 'docs site', 'a/b', '\u6587\u6863', 'x\u200dy']) {
      assert.equal(resolveInput({ projectId: id, prompt: 'p' }).projectId, id);
      assert.equal(resolveInput({ projectId: 'docs', jobId: id }).jobId, id);
    }
  });
});

describe('the client library refuses an unusable ID before it reads or starts anything', () => {
  /** A client that fails the test on any use: the library must refuse before it touches one. */
  const untouchable = new Proxy(
    {},
    {
      get: (_target, property) => assert.fail(`the client was used (${String(property)})`),
    },
  ) as Client;
  const projectIdRefused = (err: unknown) =>
    err instanceof InvalidInputError && err.field === 'projectId' && /"\.\."/.test(err.message);

  test('startAgentJob and agentJobStartOptions (which the Nexus operation starts with)', async () => {
    await assert.rejects(startAgentJob(untouchable, { projectId: '..', prompt: 'p' }), projectIdRefused);
    await assert.rejects(
      agentJobStartOptions(untouchable, { projectId: '..', prompt: 'p' }, { key: 'k' }),
      projectIdRefused,
    );
    await assert.rejects(
      startAgentJob(untouchable, { projectId: ' docs ', prompt: 'p' }),
      (err: unknown) => err instanceof InvalidInputError && /send "docs"/.test(err.message),
    );
  });

  test('sendFollowUp', async () => {
    await assert.rejects(
      sendFollowUp(untouchable, { projectId: '..', jobId: 'j', prompt: 'p' }),
      projectIdRefused,
    );
    await assert.rejects(
      sendFollowUp(untouchable, { projectId: 'docs', jobId: '.', prompt: 'p' }),
      (err: unknown) => err instanceof InvalidInputError && err.field === 'jobId',
    );
  });
});

describe('the quota workflow ID', () => {
  test('reads as it did for an ordinary project', () => {
    assert.equal(projectQuotaWorkflowId('docs-site'), 'agent-quota/docs-site');
    assert.equal(projectQuotaWorkflowId('a b/c'), 'agent-quota/a%20b%2Fc');
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
      assert.ok(id.startsWith('agent-quota/'));
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
