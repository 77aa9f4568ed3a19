/**
 * The GitHub Action's modules that need no server: how inputs are read from the runner's
 * variables, what is masked, the default key, and the job summary's escaping.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ACTION_INPUTS,
  inputOfSetting,
  maskValues,
  readInputs,
  secretValues,
} from '../../src/action/inputs.js';
import { defaultKey } from '../../src/action/key.js';
import { jobSummary } from '../../src/action/summary.js';
import { UsageError } from '../../src/errors.js';

/**
 * `read()` with `inputs` in this process's environment as the runner passes them (`INPUT_` and the
 * name upper-cased), every other input of the action unset; the environment is restored before it
 * returns, and synchronously, so no other test sees the inputs.
 */
function withInputs<T>(inputs: Record<string, string>, read: () => T): T {
  const variables = Object.keys(ACTION_INPUTS).map((name) => [`INPUT_${name.toUpperCase()}`, name] as const);
  const saved = variables.map(([variable]) => [variable, process.env[variable]] as const);
  const set = (variable: string, value: string | undefined) => {
    if (value === undefined) delete process.env[variable];
    else process.env[variable] = value;
  };
  for (const [variable, name] of variables) set(variable, inputs[name]);
  try {
    return read();
  } finally {
    for (const [variable, value] of saved) set(variable, value);
  }
}

const MINIMAL = { project: 'docs-site', prompt: 'Update the docs', 'temporal-address': 'temporal:7233' };

describe('action inputs', () => {
  test('defaults apply to inputs the runner left empty, and the connection inputs become TEMPORAL_* settings', () => {
    const settings = withInputs({ ...MINIMAL, 'task-queue': '  ', 'temporal-api-key': 'k' }, readInputs);
    assert.deepEqual(settings.prompt, { text: 'Update the docs' });
    assert.equal(settings.wait, true);
    assert.equal(settings.key, undefined);
    assert.deepEqual(settings.temporalEnv, {
      TEMPORAL_ADDRESS: 'temporal:7233',
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: 'agent-jobs',
      TEMPORAL_API_KEY: 'k',
    });
    assert.equal(withInputs({ ...MINIMAL, wait: 'False' }, readInputs).wait, false);
    assert.equal(withInputs({ ...MINIMAL, notify: ' docs-team ' }, readInputs).notify, 'docs-team');
  });

  test('each bad combination is a usage error naming the input, never its value', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ ...MINIMAL, project: '' }, /input project is required/],
      [{ ...MINIMAL, 'prompt-file': 'p.md' }, /prompt or prompt-file, not both/],
      [{ ...MINIMAL, prompt: '' }, /prompt or prompt-file is required/],
      [{ ...MINIMAL, wait: 'yes' }, /input wait must be true or false, not "yes"/],
      [{ ...MINIMAL, 'temporal-address': '' }, /input temporal-address is required/],
      [{ ...MINIMAL, 'temporal-tls-key': 'SECRET-KEY' }, /temporal-tls-cert and temporal-tls-key together/],
    ];
    for (const [inputs, message] of cases) {
      assert.throws(
        () => withInputs(inputs, readInputs),
        (err: unknown) =>
          err instanceof UsageError && message.test(err.message) && !/SECRET/.test(err.message),
      );
    }
  });

  test('a Temporal setting is traced back to the input that gave it', () => {
    assert.equal(inputOfSetting('TEMPORAL_UI_URL'), 'temporal-ui-url');
    assert.equal(inputOfSetting('TEMPORAL_PROFILE'), undefined);
  });

  test('the secret inputs are the API key, the TLS key and the payload keys', () => {
    const secret = Object.entries(ACTION_INPUTS).flatMap(([name, spec]) => ('secret' in spec ? [name] : []));
    assert.deepEqual(secret.sort(), ['payload-keys', 'temporal-api-key', 'temporal-tls-key']);
    const inputs = {
      ...MINIMAL,
      'temporal-api-key': 'a',
      'payload-keys': 'k1 AAAA',
      'temporal-tls-cert': 'c',
    };
    assert.deepEqual(withInputs(inputs, secretValues).sort(), ['a', 'k1 AAAA']);
  });

  test('a multi-line secret is masked whole and line by line, PEM armour and comments left out', () => {
    const pem = '-----BEGIN PRIVATE KEY-----\nMIIEvQ\nIBADAN\n-----END PRIVATE KEY-----\n';
    assert.deepEqual(maskValues(pem), [pem.trim(), 'MIIEvQ', 'IBADAN']);
    assert.deepEqual(maskValues('# ring\nk2 QUJD\n\nk1 REVG\n'), [
      '# ring\nk2 QUJD\n\nk1 REVG',
      'k2 QUJD',
      'k1 REVG',
    ]);
  });
});

describe('the default key', () => {
  const github = {
    GITHUB_REPOSITORY: 'acme/docs',
    GITHUB_WORKFLOW: 'Update docs',
    GITHUB_JOB: 'update',
    GITHUB_ACTION: '__acme_agent-job',
    GITHUB_SHA: 'a'.repeat(40),
    GITHUB_RUN_ID: '7001',
    GITHUB_RUN_ATTEMPT: '1',
  };

  test('every attempt of one run gets the same key; another run on the same commit, workflow, job or step its own', () => {
    const key = defaultKey(github);
    assert.equal(key, 'acme/docs/Update docs/7001/update/__acme_agent-job');
    assert.equal(defaultKey({ ...github, GITHUB_RUN_ATTEMPT: '2' }), key);
    assert.equal(defaultKey({ ...github, GITHUB_RUN_ATTEMPT: '3', GITHUB_SHA: 'b'.repeat(40) }), key);
    for (const change of [
      // A second run on one commit: issue_comment, schedule, workflow_dispatch, pull_request_target.
      { GITHUB_RUN_ID: '7002' },
      { GITHUB_WORKFLOW: 'Release notes' },
      { GITHUB_JOB: 'other' },
      { GITHUB_ACTION: '__acme_agent-job_2' },
    ]) {
      assert.notEqual(defaultKey({ ...github, ...change }), key, JSON.stringify(change));
    }
  });

  test('a / in a workflow or job name cannot make two lists of parts one key', () => {
    const a = defaultKey({ ...github, GITHUB_WORKFLOW: 'docs/update', GITHUB_JOB: 'x' });
    const b = defaultKey({ ...github, GITHUB_WORKFLOW: 'docs', GITHUB_JOB: 'update/x' });
    assert.notEqual(a, b);
    assert.match(a, /docs%2Fupdate/);
  });

  test('outside GitHub Actions the error names the missing variables', () => {
    assert.throws(
      () => defaultKey({ ...github, GITHUB_RUN_ID: undefined, GITHUB_JOB: '' }),
      /input key not given and GITHUB_RUN_ID, GITHUB_JOB not set/,
    );
  });
});

describe('the job summary', () => {
  const facts = {
    project: 'docs_site',
    workflowId: 'agent-job/docs_site/acme/docs/Update docs',
    workflowUrl: 'http://localhost:8233/namespaces/default/workflows/agent-job%2Fdocs_site',
  };

  test('an ended job: project, workflow, UI link, job, status and the prLink as a link', () => {
    const md = jobSummary({
      ...facts,
      outcome: {
        kind: 'ended',
        status: 'completed',
        jobId: 'job_1',
        prLink: 'https://github.com/acme/docs/pull/7',
      },
    });
    assert.match(md, /^\| Project \| docs\\_site \|$/m);
    assert.match(
      md,
      /^\| Temporal UI \| <http:\/\/localhost:8233\/namespaces\/default\/workflows\/agent-job%2Fdocs_site> \|$/m,
    );
    assert.match(md, /^\| Agent job \| job\\_1 \|$/m);
    assert.match(md, /^\| Status \| completed \|$/m);
    assert.match(md, /^\| Pull request \| <https:\/\/github\.com\/acme\/docs\/pull\/7> \|$/m);
  });

  test('markdown and HTML the API sent render as text: no emphasis, no table cell, no tag, no line', () => {
    const md = jobSummary({
      ...facts,
      outcome: {
        kind: 'failed',
        status: 'failed',
        type: 'AgentJobFailed',
        message: '**bold** <img src=x onerror=alert(1)>\n# heading | cell',
        jobId: 'job_<b>1</b>',
      },
    });
    assert.ok(
      md.includes('\\*\\*bold\\*\\* \\<img src=x onerror=alert\\(1\\)\\>\\u{a}\\# heading \\| cell'),
      md,
    );
    assert.ok(md.includes('job\\_\\<b\\>1\\</b\\>'), md);
    assert.doesNotMatch(md, /(?<!\\)<\/?(img|b)|^# /m, 'no unescaped tag, no heading');
    const link = jobSummary({
      ...facts,
      outcome: {
        kind: 'ended',
        status: 'completed',
        jobId: 'j',
        prLink: 'https://github.com/a/b/pull/1?x=*y*|&lt;',
      },
    });
    assert.match(link, /\| Pull request \| https:\/\/github\.com\/a\/b\/pull\/1\?x=\\\*y\\\*\\\|\\&lt; \|/);
  });

  test('a job not waited for says so; a warning has a row of its own, escaped', () => {
    const md = jobSummary({ ...facts, workflowUrl: null, outcome: { kind: 'started' } });
    assert.match(md, /\| Status \| started; not waited for/);
    assert.doesNotMatch(md, /Warning/);
    const warned = jobSummary({
      ...facts,
      workflowUrl: null,
      warning: 'a *new* key',
      outcome: { kind: 'started' },
    });
    assert.match(warned, /^\| Warning \| a \\\*new\\\* key \|$/m);
  });
});
