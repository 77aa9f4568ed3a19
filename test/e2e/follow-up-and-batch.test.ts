/**
 * The starter's message, status and batch commands as real processes against a real Temporal
 * server, a worker and the simulator: what a user sees on stdout and stderr, and the exit code.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { agentJobIdWorkflowId, agentJobWorkflowId } from '../../src/client/index.js';
import { START_PRIORITIES } from '../../src/contract.js';
import { onCleanup, runStarter, starterProcessEnv, startSimulatedSuite, uniqueId } from '../harness.js';
import { createdJobs, requestsTo } from '../simulator-stats.js';

const { env, sim, worker, project, completedJob } = await startSimulatedSuite('docs');
const scratch = mkdtempSync(join(tmpdir(), 'agent-job-batch-'));
onCleanup(() => rmSync(scratch, { recursive: true, force: true }));

function starter(args: string[]) {
  return runStarter(args, starterProcessEnv(env, worker.taskQueue));
}

function batchFile(lines: unknown[]): string {
  const path = join(scratch, `${uniqueId('batch')}.jsonl`);
  writeFileSync(
    path,
    lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n'),
  );
  return path;
}

describe('starter message and status', { concurrency: 3 }, () => {
  test('message on a completed job runs one new turn, at the --priority asked; status then shows it', async () => {
    const projectId = project();
    const turnOne = await completedJob(projectId);
    const run = await starter([
      'message',
      turnOne.id,
      '--project',
      projectId,
      '--prompt',
      'Now add examples',
      '--wait',
      '--json',
      '--poll-interval',
      '50ms',
      '--priority',
      'batch',
    ]);
    assert.equal(run.code, 0, run.stderr);
    const out = JSON.parse(run.stdout) as {
      workflowId: string;
      prLink: string;
      turns: number;
      created: boolean;
    };
    assert.equal(out.workflowId, agentJobIdWorkflowId(projectId, turnOne.id));
    const described = await env.client.workflow.getHandle(out.workflowId).describe();
    assert.equal(
      described.priority?.priorityKey,
      START_PRIORITIES.batch,
      'the workflow it started is a batch one',
    );
    assert.match(out.prLink, /^https:\/\/github\.com\//);
    assert.notEqual(out.prLink, turnOne.prLink);
    assert.equal(out.created, false);
    assert.equal(requestsTo(sim, projectId, 'message'), 1);
    assert.equal(createdJobs(sim, projectId), 1);

    const status = await starter(['status', out.workflowId]);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /phase: +completed/);
    assert.match(status.stdout, /job status: completed/);
    assert.match(status.stdout, /polls: +[1-9]\d* \(turns 2\)/);
    assert.ok(status.stdout.includes(`prLink:     ${out.prLink}`), status.stdout);
  });

  test('message without a prompt, and status of an unknown workflow, exit 2', async () => {
    const noPrompt = await starter(['message', 'job_x', '--project', 'docs']);
    assert.equal(noPrompt.code, 2);
    assert.match(noPrompt.stderr, /--prompt or --prompt-file is required/);
    assert.match(noPrompt.stderr, /usage: npm run starter -- message/);
    const unknown = await starter(['status', uniqueId('no-such-workflow')]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no workflow/);
  });

  test('each subcommand has its own --help', async () => {
    for (const command of ['start', 'message', 'status', 'batch']) {
      const run = await starter([command, '--help']);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, new RegExp(`usage: npm run starter -- ${command} `));
    }
  });
});

describe('starter batch', { concurrency: 3 }, () => {
  test('a batch of 5 runs to 5 prLinks and exits 0; a second run creates nothing new', async () => {
    const projectId = project({ outcome: 'pr' });
    const poll = { initialInterval: '50ms' };
    const file = batchFile([
      { projectId, prompt: 'Rewrite the quickstart', key: 'quickstart', poll },
      { projectId, prompt: 'Rewrite the install page', key: 'install', poll },
      { projectId, prompt: 'Document GET /users', key: 'get-users', poll },
      '',
      { projectId, prompt: 'Document POST /users', poll },
      { projectId, prompt: 'Document DELETE /users', poll },
    ]);
    const first = await starter(['batch', file, '--wait']);
    assert.equal(first.code, 0, first.stderr);
    // Not a terminal: plain progress lines on stderr, the summary table on stdout.
    assert.match(first.stderr, /^\[batch\] queued \d+, active \d+, completed 5, failed 0$/m);
    const rows = first.stdout.split('\n').filter((line) => /^\S+ +completed +/.test(line));
    assert.equal(rows.length, 5, first.stdout);
    for (const row of rows) assert.match(row, /https:\/\/github\.com\/\S+\/pull\/\d+$/);
    assert.match(first.stdout, /^quickstart +completed +https:\/\//m);
    assert.match(first.stdout, /^KEY +STATUS +PRLINK OR FAILURE$/m);
    assert.equal(createdJobs(sim, projectId), 5);

    const second = await starter(['batch', file, '--wait', '--json']);
    assert.equal(second.code, 0, second.stderr);
    const objects = second.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { line: number; key: string; workflowId: string; prLink: string });
    assert.deepEqual(
      objects.map((o) => o.line),
      [1, 2, 3, 5, 6],
    );
    assert.equal(objects[0]?.workflowId, agentJobWorkflowId(projectId, 'quickstart'));
    const prLinks = rows.map((row) => row.split(/\s+/).at(-1));
    assert.deepEqual(
      objects.map((o) => o.prLink),
      prLinks,
      'the same jobs, attached',
    );
    assert.equal(createdJobs(sim, projectId), 5, 'the second run created nothing new');
  });

  test('a file with bad lines starts nothing and names each bad line', async () => {
    const projectId = project();
    const file = batchFile([
      { projectId, prompt: 'Fine', key: 'a' },
      { projectId, prompt: 'Fine too', key: 'b' },
      '{"projectId": "oops"',
      { projectId, key: 'c' },
      { projectId, prompt: 'Dup', key: 'a' },
    ]);
    const run = await starter(['batch', file, '--wait']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /3 bad lines in the batch file; nothing was started/);
    assert.match(run.stderr, /line 3: not JSON/);
    assert.match(run.stderr, /line 4: prompt: is required/);
    assert.match(run.stderr, /line 5: key "a" is already used on line 1/);
    assert.doesNotMatch(run.stderr, /line [12]:/);
    assert.equal(requestsTo(sim, projectId, 'create'), 0);
    const started = [];
    for await (const execution of env.client.workflow.list({ query: `AgentProjectId = '${projectId}'` })) {
      started.push(execution);
    }
    assert.equal(started.length, 0, 'no workflow started');
  });

  test('a batch where one job fails exits 8 and names the failure in the summary', async () => {
    const good = project({ outcome: 'pr' });
    const bad = project({ outcome: 'failed' });
    const poll = { initialInterval: '50ms' };
    const file = batchFile([
      { projectId: good, prompt: 'Works', key: 'good', poll },
      { projectId: bad, prompt: 'Breaks', key: 'bad', poll },
    ]);
    const run = await starter(['batch', file, '--wait']);
    assert.equal(run.code, 8, run.stderr);
    assert.match(run.stdout, /^good +completed +https:\/\//m);
    assert.match(run.stdout, /^bad +failed +AgentJobFailed$/m);
  });
});
