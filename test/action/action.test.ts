/**
 * The GitHub Action run the way the runner runs it: `node dist/action/index.js` (the committed
 * bundle) as a process with the inputs as INPUT_* variables, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY
 * files and the GITHUB_* variables of a run, against the suite's Temporal server, the simulator and
 * a worker. Outputs and summary hold the prLink; a re-run attaches; another workflow on the commit
 * makes its own job; wait: false returns with the workflow ID; bad inputs start nothing; what the
 * API sent is escaped in the summary; the payload keys seal the input.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import proto from '@temporalio/proto';
import { defaultKey } from '../../src/action/key.js';
import { agentJobWorkflowId } from '../../src/client/index.js';
import { MAX_PROMPT_LENGTH } from '../../src/contract.js';
import { KEY_ID_METADATA_KEY, SEALED_ENCODING } from '../../src/payload-codec/index.js';
import { ROOT, startSimulatedWorld, startWorkerProcess, uniqueId } from '../harness.js';
import { createdJobs } from '../simulator-stats.js';

const files = mkdtempSync(join(tmpdir(), 'action-e2e-'));
after(() => rmSync(files, { recursive: true, force: true }));

const world = await startSimulatedWorld('action', { durationMs: 200 });
const worker = await world.startWorker();
const UI = 'http://temporal-ui.example:8080';

/** What one run of the step left: its exit code, its log, its outputs and its summary. */
interface StepRun {
  code: number | string;
  stdout: string;
  stderr: string;
  outputs: Record<string, string>;
  summary: string;
}

/** GITHUB_OUTPUT's entries (`name<<delimiter`, lines, `delimiter`), as the runner reads them. */
function parseOutputs(text: string): Record<string, string> {
  const outputs: Record<string, string> = {};
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const match = /^([^<]+)<<(.+)$/.exec(lines[i] ?? '');
    if (!match) continue;
    const [, name, delimiter] = match as unknown as [string, string, string];
    const end = lines.indexOf(delimiter, i + 1);
    assert.ok(end > i, `output ${name} ends with its delimiter`);
    outputs[name] = lines.slice(i + 1, end).join('\n');
    i = end;
  }
  return outputs;
}

/** The GITHUB_* variables of one workflow run on a fresh commit. */
function githubRun(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    GITHUB_REPOSITORY: 'acme/docs',
    GITHUB_WORKFLOW: 'Update docs',
    GITHUB_JOB: 'update-docs',
    GITHUB_ACTION: '__acme_agent-job-orchestrator',
    GITHUB_SHA: randomBytes(20).toString('hex'),
    // Per run, kept by its re-run attempts; random here, so concurrent tests never share one.
    GITHUB_RUN_ID: String(randomInt(1, 2 ** 47)),
    GITHUB_RUN_ATTEMPT: '1',
    ...overrides,
  };
}

/** The connection inputs for the suite's server and worker; fast polls. */
function connection(taskQueue = worker.taskQueue): Record<string, string> {
  return {
    'temporal-address': world.env.address,
    'temporal-namespace': world.env.namespace,
    'task-queue': taskQueue,
    'temporal-ui-url': UI,
    'poll-interval': '50ms',
  };
}

/** Runs `node dist/action/index.js` as the runner does, with nothing inherited but PATH and HOME. */
async function runStep(inputs: Record<string, string>, github: Record<string, string>): Promise<StepRun> {
  const dir = mkdtempSync(join(files, 'step-'));
  const outputFile = join(dir, 'output');
  const summaryFile = join(dir, 'summary');
  writeFileSync(outputFile, '');
  writeFileSync(summaryFile, '');
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    GITHUB_ACTIONS: 'true',
    GITHUB_OUTPUT: outputFile,
    GITHUB_STEP_SUMMARY: summaryFile,
    ...github,
    // The inputs as the runner passes them: INPUT_ and the name upper-cased.
    ...Object.fromEntries(
      Object.entries(inputs).map(([name, value]) => [`INPUT_${name.toUpperCase()}`, value]),
    ),
  };
  const child = spawn(process.execPath, [join(ROOT, 'dist/action/index.js')], {
    cwd: dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | string>((resolve) =>
    child.once('exit', (exitCode, signal) => resolve(exitCode ?? signal ?? 'unknown')),
  );
  return {
    code,
    stdout,
    stderr,
    outputs: parseOutputs(readFileSync(outputFile, 'utf8')),
    summary: readFileSync(summaryFile, 'utf8'),
  };
}

/** A prompt file as a workflow writes it from the push event's commits. */
function promptFile(text: string): string {
  const path = join(files, `${uniqueId('prompt')}.md`);
  writeFileSync(path, text);
  return path;
}

describe('the action, run as the runner runs it', { concurrency: 4 }, () => {
  test('it waits for the prLink; a re-run attaches; another workflow on the commit makes its own job', async () => {
    const project = world.project({ outcome: 'pr' });
    const prompt = promptFile(
      'Bring the docs in line with these commits:\n- abc123 Add `--json` to "export" $(whoami)\n',
    );
    const inputs = { project, 'prompt-file': prompt, ...connection() };
    const github = githubRun();
    const first = await runStep(inputs, github);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const workflowId = agentJobWorkflowId(project, defaultKey(github));
    assert.equal(first.outputs['workflow-id'], workflowId);
    assert.equal(
      first.outputs['workflow-url'],
      `${UI}/namespaces/${world.env.namespace}/workflows/${encodeURIComponent(workflowId)}`,
    );
    assert.equal(first.outputs.status, 'completed');
    assert.match(first.outputs['job-id'] ?? '', /.+/);
    const prLink = first.outputs['pr-link'] ?? '';
    assert.match(prLink, /^https:\/\/github\.com\//);
    assert.ok(first.summary.includes(`| Pull request | <${prLink}> |`), first.summary);
    assert.ok(first.summary.includes(`| Temporal UI | <${first.outputs['workflow-url']}> |`), first.summary);
    assert.match(first.summary, /^\| Status \| completed \|$/m);
    assert.match(first.stdout, new RegExp(`^prLink: ${prLink.replaceAll('.', '\\.')}$`, 'm'));

    // The re-run: a new run attempt of the same workflow on the same commit.
    const rerun = await runStep(inputs, { ...github, GITHUB_RUN_ATTEMPT: '2' });
    assert.equal(rerun.code, 0, rerun.stdout + rerun.stderr);
    assert.deepEqual(rerun.outputs, first.outputs);
    assert.equal(createdJobs(world.sim, project), 1, 'the re-run created nothing');

    // Another workflow on the same commit: a key, a workflow and an agent job of its own.
    const other = await runStep(inputs, { ...github, GITHUB_WORKFLOW: 'Release notes' });
    assert.equal(other.code, 0, other.stdout + other.stderr);
    assert.notEqual(other.outputs['workflow-id'], workflowId);
    assert.notEqual(other.outputs['job-id'], first.outputs['job-id']);
    assert.equal(createdJobs(world.sim, project), 2);
  });

  test('two runs on one commit make two agent jobs; every attempt of a run attaches to its own', async () => {
    const project = world.project({ outcome: 'pr' });
    const inputs = { project, prompt: 'Answer the issue comment', ...connection() };
    // issue_comment, schedule, workflow_dispatch: many runs of one workflow on one SHA.
    const github = githubRun();
    const first = await runStep(inputs, github);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const second = await runStep(inputs, {
      ...github,
      GITHUB_RUN_ID: String(Number(github.GITHUB_RUN_ID) + 1),
    });
    assert.equal(second.code, 0, second.stdout + second.stderr);
    assert.notEqual(second.outputs['workflow-id'], first.outputs['workflow-id']);
    assert.notEqual(second.outputs['job-id'], first.outputs['job-id']);
    assert.equal(createdJobs(world.sim, project), 2, 'each run its own agent job');
    for (const attempt of ['2', '3']) {
      const rerun = await runStep(inputs, { ...github, GITHUB_RUN_ATTEMPT: attempt });
      assert.equal(rerun.code, 0, rerun.stdout + rerun.stderr);
      assert.deepEqual(rerun.outputs, first.outputs, `attempt ${attempt} attaches to the first run's job`);
    }
    assert.equal(createdJobs(world.sim, project), 2, 'a re-run attempt creates nothing');
  });

  test('a start that attaches to a job given another prompt warns in the log and the summary', async () => {
    const project = world.project({ outcome: 'pr' });
    const github = githubRun();
    const first = await runStep({ project, prompt: 'Document the export command', ...connection() }, github);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    assert.doesNotMatch(first.stdout, /::warning::/);
    const same = await runStep(
      { project, prompt: 'Document the export command', ...connection() },
      { ...github, GITHUB_RUN_ATTEMPT: '2' },
    );
    assert.equal(same.code, 0, same.stdout + same.stderr);
    assert.doesNotMatch(same.stdout, /::warning::/, 'the same prompt attaches without a warning');
    const other = await runStep(
      { project, prompt: 'Document the import command', ...connection() },
      { ...github, GITHUB_RUN_ATTEMPT: '3' },
    );
    assert.equal(other.code, 0, other.stdout + other.stderr);
    assert.equal(other.outputs['workflow-id'], first.outputs['workflow-id']);
    assert.match(other.stdout, /^::warning::.*another prompt.*input key/m);
    assert.match(other.summary, /^\| Warning \| .*another prompt/m);
    assert.equal(createdJobs(world.sim, project), 1, 'the other prompt was not sent');
  });

  test('wait: false returns with the workflow ID while the agent job runs on', async () => {
    const project = world.project({ durationMs: 600_000 });
    const run = await runStep({ project, prompt: 'A long one', wait: 'false', ...connection() }, githubRun());
    assert.equal(run.code, 0, run.stdout + run.stderr);
    const workflowId = run.outputs['workflow-id'] ?? '';
    assert.match(workflowId, new RegExp(`^agent-job/${project}/`));
    assert.equal(run.outputs.status, undefined, 'no status without waiting');
    assert.equal(run.outputs['pr-link'], undefined);
    assert.match(run.summary, /\| Status \| started; not waited for/);
    const handle = world.env.client.workflow.getHandle(workflowId);
    assert.equal((await handle.describe()).status.name, 'RUNNING');
    await handle.terminate('the test is done with it');
  });

  test('a failed agent job exits 3 with status failed; its re-run reports the same job and creates none', async () => {
    const project = world.project({ outcome: 'failed' });
    const github = githubRun();
    const run = await runStep({ project, prompt: 'Fail', ...connection() }, github);
    assert.equal(run.code, 3, run.stdout + run.stderr);
    assert.equal(run.outputs.status, 'failed');
    assert.match(run.outputs['job-id'] ?? '', /.+/);
    assert.equal(run.outputs['pr-link'], '');
    assert.match(run.stdout, /^::error::the agent job's workflow failed \(AgentJobFailed\): /m);
    assert.match(run.summary, /^\| Status \| failed \|$/m);
    // The re-run starts a new workflow run under the key, which goes on with the failed job (the
    // API honours no idempotency key, so a create would be a second job): the same failure.
    const rerun = await runStep(
      { project, prompt: 'Fail', ...connection() },
      { ...github, GITHUB_RUN_ATTEMPT: '2' },
    );
    assert.equal(rerun.code, 3, rerun.stdout + rerun.stderr);
    assert.equal(rerun.outputs['job-id'], run.outputs['job-id']);
    assert.equal(rerun.outputs.status, 'failed');
    assert.equal(createdJobs(world.sim, project), 1);
  });

  test('a workflow failed by the API after the create exits 6 with the job it created as job-id', async () => {
    const project = world.project({ faults: { rules: [{ endpoint: 'get', kind: 'status', status: 400 }] } });
    const run = await runStep({ project, prompt: 'Refused', ...connection() }, githubRun());
    assert.equal(run.code, 6, run.stdout + run.stderr);
    assert.equal(run.outputs.status, 'workflow-failed');
    assert.match(run.stdout, /^::error::the agent job's workflow failed \(InvalidRequest\): /m);
    const [job] = world.sim.stats().jobs.filter((j) => j.projectId === project);
    assert.ok(job, 'the simulator made the job');
    assert.equal(run.outputs['job-id'], job.id);
    assert.match(run.summary, new RegExp(`^\\| Agent job \\| ${job.id.replaceAll('_', '\\\\_')} \\|$`, 'm'));
  });

  test('bad inputs fail with ::error:: and exit 2 before connecting; secrets are masked and printed nowhere else', async () => {
    const project = world.project();
    const apiKey = `temporal-key-${randomUUID()}`;
    const ringKey = randomBytes(32).toString('base64');
    // k2's key is a slice of k1's, so a check for k1's would miss a line that printed k2's alone.
    const shortKey = ringKey.slice(4);
    const long = promptFile('x'.repeat(MAX_PROMPT_LENGTH + 1));
    // An unreachable server: an exit 2 (not 5) shows that nothing tried to connect.
    const base = { ...connection(), 'temporal-address': '127.0.0.1:1', 'temporal-api-key': apiKey };
    const cases: Array<[Record<string, string>, RegExp]> = [
      [
        { project, prompt: 'A', 'prompt-file': long, ...base },
        /^::error::give the input prompt or prompt-file, not both\. Nothing was started\.$/m,
      ],
      [
        { project, 'prompt-file': long, ...base },
        new RegExp(
          `^::error::invalid input: prompt: ${long.replaceAll('/', '\\/')} holds ${MAX_PROMPT_LENGTH + 1} characters, past the prompt limit of ${MAX_PROMPT_LENGTH} \\(MAX_PROMPT_LENGTH\\)\\. Nothing was started\\.$`,
          'm',
        ),
      ],
      [{ prompt: 'A', ...base }, /^::error::input project is required\. Nothing was started\.$/m],
      [
        { project, prompt: 'A', ...base, timeout: '30d' },
        /^::error::invalid input: timeout: must be at most 7 days/m,
      ],
      [{ project, prompt: 'A', ...base, notify: 'team slack!' }, /^::error::invalid input: notify: /m],
      [
        { project, prompt: 'A', ...base, 'payload-keys': `k1 ${ringKey}\nk2 ${shortKey}` },
        /^::error::input payload-keys: key k2 is \d+ bytes, not 32\. Nothing was started\.$/m,
      ],
    ];
    for (const [inputs, error] of cases) {
      const run = await runStep(inputs, githubRun());
      assert.equal(run.code, 2, `${Object.keys(inputs).join(',')}: ${run.stdout}${run.stderr}`);
      assert.match(run.stdout, error);
      assert.doesNotMatch(run.stdout, /cannot reach the Temporal server/);
      assert.deepEqual(run.outputs, {}, 'no output set');
      // The runner masks what ::add-mask:: names, as the first lines, before anything else.
      const lines = run.stdout.split('\n');
      assert.equal(lines[0], `::add-mask::${apiKey}`);
      if (inputs['payload-keys'] !== undefined) {
        // The runner masks line by line: each line of the ring is masked on its own.
        for (const [id, key] of [
          ['k1', ringKey],
          ['k2', shortKey],
        ]) {
          assert.ok(lines.includes(`::add-mask::${id} ${key}`), `${id}'s line masked on its own`);
        }
      }
      const unmasked = lines.filter((line) => !line.startsWith('::add-mask::'));
      const printed = Object.entries({ apiKey, shortKey }).flatMap(([name, secret]) =>
        unmasked.some((line) => line.includes(secret)) ? [name] : [],
      );
      assert.deepEqual(printed, [], 'no secret printed');
    }
    assert.equal(createdJobs(world.sim, project), 0);
  });

  test('an unreachable server exits 5 with an ::error:: naming its address', async () => {
    const run = await runStep(
      { project: world.project(), prompt: 'A', ...connection(), 'temporal-address': '127.0.0.1:1' },
      githubRun(),
    );
    assert.equal(run.code, 5, run.stdout + run.stderr);
    assert.match(run.stdout, /^::error::cannot reach the Temporal server at 127\.0\.0\.1:1/m);
  });

  test('markdown and HTML in what the API sent are escaped in the summary, and kept as they are in the output', async () => {
    const evil = 'https://github.com/acme/docs/pull/7?q=**bold**_x_|&lt;img&gt;&amp;{workflowId}';
    const project = world.project({
      outcome: 'pr',
      faults: { rules: [{ endpoint: 'get', kind: 'altered', set: { prLink: evil } }] },
    });
    const run = await runStep({ project, prompt: 'Escape it', ...connection() }, githubRun());
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.equal(run.outputs['pr-link'], evil);
    // Raw, `**bold**` would render bold and `&lt;img&gt;` as the text `<img>`: every character
    // markdown acts on has its backslash.
    const pullRequest = /^\| Pull request \| (.*) \|$/m.exec(run.summary)?.[1];
    assert.ok(pullRequest !== undefined, run.summary);
    assert.doesNotMatch(pullRequest, /(?<!\\)[*_|&{}<>]/, run.summary);
    assert.ok(
      run.summary.includes(
        '| Pull request | https://github.com/acme/docs/pull/7?q=\\*\\*bold\\*\\*\\_x\\_\\|\\&lt;img\\&gt;\\&amp;\\{workflowId\\} |',
      ),
      run.summary,
    );
  });
});

describe('the action with the payload codec', () => {
  test('payload-keys seals the input: the prompt is in no history event, and the job runs to its prLink', async () => {
    const keyId = 'ci-1';
    const key = randomBytes(32).toString('base64');
    const ringPath = join(files, 'payload-keys');
    writeFileSync(ringPath, `${keyId} ${key}\n`);
    const workerEnv = await world.workerEnv({ TEMPORAL_PAYLOAD_KEYS_FILE: ringPath });
    await startWorkerProcess(workerEnv, { what: 'the sealing worker' });
    const marker = `secret-${randomUUID()}`;
    const run = await runStep(
      {
        project: world.project({ outcome: 'pr' }),
        prompt: `Document the ${marker} module`,
        'payload-keys': `# the ring\n${keyId} ${key}\n`,
        ...connection(workerEnv.taskQueue),
      },
      githubRun(),
    );
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.match(run.outputs['pr-link'] ?? '', /^https:\/\/github\.com\//);
    assert.ok(run.stdout.includes(`::add-mask::${keyId} ${key}`), 'the ring line is masked');
    const handle = world.env.client.workflow.getHandle(run.outputs['workflow-id'] ?? '');
    const history = await handle.fetchHistory();
    const bytes = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
    assert.equal(bytes.indexOf(marker), -1, 'the marker is in no history event');
    const input = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads ?? [];
    const text = (b: Uint8Array | null | undefined) => Buffer.from(b ?? new Uint8Array()).toString('utf8');
    assert.deepEqual(
      input.map((p) => `${text(p.metadata?.encoding)} ${text(p.metadata?.[KEY_ID_METADATA_KEY])}`),
      [`${SEALED_ENCODING} ${keyId}`],
    );
    const unmasked = run.stdout.split('\n').filter((line) => !line.startsWith('::add-mask::'));
    assert.ok(!unmasked.some((line) => line.includes(key)), 'the key is printed nowhere else');
  });
});
