/**
 * Every GitHub Actions workflow file of the repository (examples/, .github/) passes actionlint
 * (built once per machine: dev/actionlint.ts); the recipe's workflow, pointed at this repository's
 * action.yml, uses only inputs and outputs the action has; and docs/ci.md shows the recipe's file
 * as it is, so the page and the file cannot drift apart.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { after, test } from 'node:test';
import { resolveActionlint } from '../../dev/actionlint.js';
import { ROOT } from '../harness.js';

const execFileAsync = promisify(execFile);
const RECIPE = 'examples/github-actions/update-docs.yml';
/** How the recipe names the action: replaced by `./` to lint it against this repository's action.yml. */
const RECIPE_USES = 'uses: your-org/agent-job-orchestrator@v1';

/** The YAML files under `dir` (relative to the root) that are workflows: a top-level `jobs:`. */
function workflowFiles(dir: string): string[] {
  let entries;
  try {
    entries = readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true });
  } catch {
    return [];
  }
  return entries
    .filter((entry) => entry.isFile() && /\.ya?ml$/.test(entry.name))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)))
    .filter((path) => /^jobs:/m.test(readFileSync(join(ROOT, path), 'utf8')));
}

/** Runs actionlint in `cwd` with `args`; its output on a failure. */
async function actionlint(cwd: string, args: string[]): Promise<{ code: number; output: string }> {
  const binary = await resolveActionlint(process.env, (line) =>
    process.stderr.write(`[actionlint] ${line}\n`),
  );
  try {
    await execFileAsync(binary, ['-no-color', ...args], { cwd });
    return { code: 0, output: '' };
  } catch (err) {
    const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string };
    return { code, output: `${stdout}${stderr}` };
  }
}

test('every workflow file under examples/ and .github/ passes actionlint', { timeout: 600_000 }, async () => {
  const files = [...workflowFiles('examples'), ...workflowFiles('.github')];
  assert.ok(files.includes(RECIPE), `found ${files.join(', ')}`);
  const run = await actionlint(ROOT, files);
  assert.equal(run.code, 0, run.output);
});

test(
  "the recipe uses only the action's inputs and outputs, and every required input",
  { timeout: 600_000 },
  async () => {
    const project = mkdtempSync(join(tmpdir(), 'actionlint-'));
    after(() => rmSync(project, { recursive: true, force: true }));
    // A repository whose root is this one's action: action.yml and its bundle, and the recipe as a
    // workflow that uses it locally, which actionlint checks against action.yml.
    mkdirSync(join(project, '.git'));
    mkdirSync(join(project, '.github', 'workflows'), { recursive: true });
    symlinkSync(join(ROOT, 'action.yml'), join(project, 'action.yml'));
    symlinkSync(join(ROOT, 'dist'), join(project, 'dist'));
    const recipe = readFileSync(join(ROOT, RECIPE), 'utf8');
    assert.ok(recipe.includes(RECIPE_USES), `the recipe has "${RECIPE_USES}"`);
    const local = join(project, '.github', 'workflows', 'update-docs.yml');
    writeFileSync(local, recipe.replace(RECIPE_USES, 'uses: ./'));
    const run = await actionlint(project, []);
    assert.equal(run.code, 0, run.output);
    // The same check fails on an input the action does not have.
    writeFileSync(local, recipe.replace(RECIPE_USES, 'uses: ./').replace('prompt-file:', 'prompt-path:'));
    const wrong = await actionlint(project, []);
    assert.equal(wrong.code, 1);
    assert.match(wrong.output, /input "prompt-path" is not defined in action/);
  },
);

test('docs/ci.md shows the recipe file as it is', () => {
  const page = readFileSync(join(ROOT, 'docs/ci.md'), 'utf8');
  const blocks = [...page.matchAll(/^```yaml\n([^]*?)^```$/gm)].map((match) => match[1]);
  assert.ok(
    blocks.includes(readFileSync(join(ROOT, RECIPE), 'utf8')),
    `docs/ci.md has a yaml block equal to ${RECIPE}: copy the file into the page again`,
  );
});
