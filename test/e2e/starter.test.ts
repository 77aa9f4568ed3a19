/**
 * The starter CLI as a real process, the client library, and a workflow started with the Temporal
 * CLI alone: exit codes, usage, idempotent starts, and results with their prLink.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, describe, test } from 'node:test';
import { agentJobWorkflowId, startAgentJob } from '../../src/client/index.js';
import { InvalidInputError, MAX_PROMPT_LENGTH, WORKFLOW_TYPE } from '../../src/contract.js';
import { resolveTemporalCli } from '../../dev/temporal-cli.js';
import { runStarter, starterProcessEnv, startSimulatedSuite, uniqueId } from '../harness.js';
import { createdJobs } from '../simulator-stats.js';

const execFileAsync = promisify(execFile);
const { env, sim, worker, project } = await startSimulatedSuite('docs', { durationMs: 200 });
const files = mkdtempSync(join(tmpdir(), 'starter-e2e-'));
after(() => rmSync(files, { recursive: true, force: true }));

function starter(args: string[], vars: NodeJS.ProcessEnv = starterProcessEnv(env, worker.taskQueue)) {
  return runStarter(args, vars);
}

/** Arguments that start a job in `projectId` and wait for it, polling fast. */
function startAndWaitArgs(projectId: string, ...extra: string[]): string[] {
  return ['--project', projectId, '--prompt', 'Document it', '--wait', '--poll-interval', '50ms', ...extra];
}

describe('starter CLI', { concurrency: 4 }, () => {
  test('bad arguments print the usage, not a stack trace, and exit 2', async () => {
    for (const args of [
      [],
      ['--project', 'x'],
      ['--project', 'x', '--prompt', 'y', '--bogus'],
      ['--project', 'x', '--prompt', 'y', '--priority', 'urgent'],
    ]) {
      const run = await starter(args);
      assert.equal(run.code, 2, `args ${args.join(' ')}`);
      assert.match(run.stderr, /usage: npm run starter/);
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  test('invalid input exits 2 and starts nothing', async () => {
    const projectId = project();
    const run = await starter(['--project', projectId, '--prompt', '   ']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /invalid input: prompt/);
    assert.equal(createdJobs(sim, projectId), 0);
  });

  test('an unreachable Temporal server exits 5', async () => {
    const run = await starter(['--project', 'x', '--prompt', 'y'], {
      ...starterProcessEnv(env, worker.taskQueue),
      TEMPORAL_ADDRESS: '127.0.0.1:1',
    });
    assert.equal(run.code, 5);
    assert.match(run.stderr, /cannot reach the Temporal server at 127\.0\.0\.1:1/);
  });

  test('--wait --json ends with the final record and prLink, exit 0', async () => {
    const projectId = project({ outcome: 'pr' });
    const run = await starter(startAndWaitArgs(projectId, '--json'));
    assert.equal(run.code, 0, run.stderr);
    const out = JSON.parse(run.stdout) as { workflowId: string; prLink: string; job: { status: string } };
    assert.equal(out.job.status, 'completed');
    assert.match(out.prLink, /^https:\/\/github\.com\//);
    assert.match(out.workflowId, new RegExp(`^agent-job/${projectId}/`));
  });

  test('--wait in text mode shows progress and the prLink', async () => {
    const projectId = project({ outcome: 'pr' });
    const run = await starter(startAndWaitArgs(projectId));
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^workflow: agent-job\//m);
    assert.match(run.stdout, /\[(creating|polling|completed)\]/);
    assert.match(run.stdout, /prLink: https:\/\/github\.com\//);
  });

  test('a failed agent job exits 3, a timed-out one 4', async () => {
    const failed = await starter([
      '--project',
      project({ outcome: 'failed' }),
      '--prompt',
      'x',
      '--wait',
      '--json',
      '--poll-interval',
      '50ms',
    ]);
    assert.equal(failed.code, 3, failed.stderr);
    assert.equal((JSON.parse(failed.stdout) as { error: { type: string } }).error.type, 'AgentJobFailed');
    const slow = project({ durationMs: 600_000 });
    const timedOut = await starter([
      '--project',
      slow,
      '--prompt',
      'x',
      '--wait',
      '--timeout',
      '1s',
      '--poll-interval',
      '100ms',
    ]);
    assert.equal(timedOut.code, 4, timedOut.stderr);
    assert.match(timedOut.stderr, /AgentJobTimedOut/);
  });

  test('the same key twice attaches to the same workflow and makes one agent job', async () => {
    const projectId = project();
    const key = uniqueId('key');
    const args = [
      '--project',
      projectId,
      '--prompt',
      'Once',
      '--key',
      key,
      '--wait',
      '--json',
      '--poll-interval',
      '50ms',
    ];
    const [first, second] = await Promise.all([starter(args), starter(args)]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(second.code, 0, second.stderr);
    const a = JSON.parse(first.stdout) as { workflowId: string; job: { id: string } };
    const b = JSON.parse(second.stdout) as { workflowId: string; job: { id: string } };
    assert.equal(a.workflowId, agentJobWorkflowId(projectId, key));
    assert.equal(a.workflowId, b.workflowId);
    assert.equal(a.job.id, b.job.id);
    // Once more after it closed: attaches to the closed run.
    const third = await starter(args);
    assert.equal(third.code, 0);
    assert.equal((JSON.parse(third.stdout) as { job: { id: string } }).job.id, a.job.id);
    assert.equal(createdJobs(sim, projectId), 1);
  });

  test('a create sent again after an unknown outcome: the output says resent, with a warning', async () => {
    const faults = {
      rules: [{ endpoint: 'create' as const, first: 1, kind: 'truncated' as const, status: 502 as const }],
    };
    const text = await starter(startAndWaitArgs(project({ faults })));
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^resent: 1$/m);
    assert.match(
      text.stderr,
      /warning: 1 creates or messages were sent again .*duplicate agent job or turn is possible/,
    );
    const json = await starter(startAndWaitArgs(project({ faults }), '--json'));
    assert.equal(json.code, 0, json.stderr);
    assert.equal((JSON.parse(json.stdout) as { resent: number }).resent, 1);
    const plain = await starter(startAndWaitArgs(project()));
    assert.match(plain.stdout, /^resent: 0$/m);
    assert.doesNotMatch(plain.stderr, /warning/);
  });

  test('a status with terminal escape sequences is printed escaped, never raw', async () => {
    // Every read answers it for 3 s, so the progress the starter follows (every 500 ms) shows it.
    const status = 'active\u001b]8;;https://evil.example\u001b\\\u001b[2J\u202e';
    const projectId = project({
      durationMs: 4_000,
      faults: { rules: [{ endpoint: 'get', forMs: 3_000, kind: 'altered', set: { status } }] },
    });
    const run = await starter(startAndWaitArgs(projectId));
    assert.equal(run.code, 0, run.stderr);
    assert.ok(
      run.stdout.includes('status active\\u{1b}]8;;https://evil.example\\u{1b}\\\\u{1b}[2J\\u{202e}'),
      run.stdout,
    );
    assert.doesNotMatch(run.stdout + run.stderr, /(?!\n)[\p{Cc}\u202a-\u202e]/u, 'nothing raw but line ends');
  });
});

describe('starter --prompt-file', { concurrency: 2 }, () => {
  /** The prompt a workflow was started with, as its static summary (the start of it) shows it. */
  async function summaryOf(workflowId: string): Promise<string> {
    return (await (await env.client.workflow.getHandle(workflowId).describe()).staticSummary()) ?? '';
  }

  test('a prompt from a file, and one from standard input (-), each start a job to its prLink', async () => {
    const fromFile = `file-${uniqueId('marker')}`;
    const path = join(files, 'prompt.md');
    // Commit messages as CI writes them: quotes, $(...), backticks and new lines stay text.
    writeFileSync(path, `Update the docs for ${fromFile}:\n- fix "$(rm -rf /)" and \`x\`\n`);
    const fileArgs = ['--prompt-file', path, '--wait', '--json', '--poll-interval', '50ms'];
    const viaFile = await starter(['--project', project({ outcome: 'pr' }), ...fileArgs]);
    assert.equal(viaFile.code, 0, viaFile.stderr);
    const a = JSON.parse(viaFile.stdout) as { workflowId: string; prLink: string };
    assert.match(a.prLink, /^https:\/\/github\.com\//);
    assert.match(await summaryOf(a.workflowId), new RegExp(`Update the docs for ${fromFile}`));

    const fromStdin = `stdin-${uniqueId('marker')}`;
    const viaStdin = await runStarter(
      [
        '--project',
        project({ outcome: 'pr' }),
        '--prompt-file',
        '-',
        '--wait',
        '--json',
        '--poll-interval',
        '50ms',
      ],
      starterProcessEnv(env, worker.taskQueue),
      { stdin: `Document ${fromStdin}\n` },
    );
    assert.equal(viaStdin.code, 0, viaStdin.stderr);
    const b = JSON.parse(viaStdin.stdout) as { workflowId: string; prLink: string };
    assert.match(b.prLink, /^https:\/\/github\.com\//);
    assert.match(await summaryOf(b.workflowId), new RegExp(`Document ${fromStdin}`));
  });

  test('a prompt past the limit, both flags, a missing or blank file: exit 2 before connecting, nothing created', async () => {
    const projectId = project();
    const long = join(files, 'long-prompt.md');
    writeFileSync(long, 'x'.repeat(MAX_PROMPT_LENGTH + 1));
    const blank = join(files, 'blank-prompt.md');
    writeFileSync(blank, ' \n\n');
    // An unreachable server: an exit 2 (not 5) shows that nothing tried to connect.
    const unreachable = { ...starterProcessEnv(env, worker.taskQueue), TEMPORAL_ADDRESS: '127.0.0.1:1' };
    const cases: Array<{ args: string[]; error: RegExp; stdin?: string }> = [
      {
        args: ['--prompt-file', long],
        error: new RegExp(
          `invalid input: prompt: ${long.replaceAll('/', '\\/')} holds ${MAX_PROMPT_LENGTH + 1} characters, past the prompt limit of ${MAX_PROMPT_LENGTH} \\(MAX_PROMPT_LENGTH\\)\\. Nothing was started\\.`,
        ),
      },
      {
        args: ['--prompt-file', '-'],
        stdin: 'y'.repeat(MAX_PROMPT_LENGTH + 1),
        error: /invalid input: prompt: standard input holds 32001 characters, past the prompt limit of 32000/,
      },
      {
        args: ['--prompt', 'x'.repeat(MAX_PROMPT_LENGTH + 1)],
        error: /invalid input: prompt: is 32001 characters; the limit is 32000/,
      },
      {
        args: ['--prompt', 'Both', '--prompt-file', long],
        error: /error: give --prompt or --prompt-file, not both\n[^]*usage: npm run starter/,
      },
      {
        args: ['--prompt-file', join(files, 'missing.md')],
        error: /invalid input: prompt: cannot read the prompt file .*missing\.md \(ENOENT\)/,
      },
      {
        args: ['--prompt-file', blank],
        error: /invalid input: prompt: .*blank-prompt\.md is empty or blank/,
      },
    ];
    for (const { args, error, stdin } of cases) {
      const run = await runStarter(['--project', projectId, ...args], unreachable, { stdin });
      assert.equal(run.code, 2, `${args.join(' ').slice(0, 80)}: ${run.stderr}`);
      assert.match(run.stderr, error);
      assert.doesNotMatch(run.stderr, /cannot reach the Temporal server/);
    }
    const message = await runStarter(
      ['message', 'job_x', '--project', projectId, '--prompt-file', long],
      unreachable,
    );
    assert.equal(message.code, 2, message.stderr);
    assert.match(
      message.stderr,
      /invalid input: prompt: .*long-prompt\.md holds 32001 characters, past the prompt limit/,
    );
    assert.equal(createdJobs(sim, projectId), 0);
  });
});

describe('client library', () => {
  test('startAgentJob refuses invalid input before starting anything', async () => {
    await assert.rejects(
      startAgentJob(env.client, { projectId: 'x', prompt: '' }, { taskQueue: worker.taskQueue }),
      (err: unknown) => err instanceof InvalidInputError && err.field === 'prompt',
    );
  });

  test('startAgentJob returns a handle whose result carries the prLink', async () => {
    const projectId = project();
    const handle = await startAgentJob(
      env.client,
      { projectId, prompt: 'From a service', poll: { initialInterval: 50 } },
      { taskQueue: worker.taskQueue, key: uniqueId('key') },
    );
    const result = await handle.result();
    assert.match(result.prLink ?? '', /^https:\/\/github\.com\//);
    const description = await handle.describe();
    assert.match(
      (await description.staticSummary()) ?? '',
      new RegExp(`Agent job in ${projectId}: "From a service"`),
    );
  });
});

describe('Temporal CLI alone', () => {
  test('`temporal workflow execute` with a JSON input returns the final record with its prLink', async () => {
    const cli = await resolveTemporalCli(process.env, () => {});
    const projectId = project();
    const input = JSON.stringify({ projectId, prompt: 'From the CLI', poll: { initialInterval: '100ms' } });
    // Asynchronously: the worker that runs the workflow lives in this process.
    const run = await execFileAsync(
      cli.path,
      [
        'workflow',
        'execute',
        '--address',
        env.address,
        '--namespace',
        env.namespace,
        '--type',
        WORKFLOW_TYPE,
        '--task-queue',
        worker.taskQueue,
        '--workflow-id',
        uniqueId('cli'),
        '--input',
        input,
        '--output',
        'json',
      ],
      { timeout: 60_000 },
    );
    const out = JSON.parse(run.stdout) as { result: { prLink: string; job: { status: string } } };
    assert.equal(out.result.job.status, 'completed');
    assert.match(out.result.prLink, /^https:\/\/github\.com\//);
  });
});
