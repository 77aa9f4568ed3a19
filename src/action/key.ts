/**
 * The action's default key: one agent job per CI run (and per workflow, job and step in it). A
 * re-run attempt keeps GITHUB_RUN_ID (only GITHUB_RUN_ATTEMPT changes), so it attaches to the
 * workflow its first attempt started instead of making a second agent job; another run on the same
 * commit (issue_comment, schedule, workflow_dispatch, pull_request_target) has a run ID, and so a
 * key, of its own. Runs the runner's variables cannot tell apart (a reusable workflow called twice
 * in one run, matrix legs) need the input key (docs/ci.md). Pure: no I/O.
 */
import { encodeIdPart } from '../ids.js';
import { UsageError } from '../errors.js';

/** The runner's variables the key is made of, in order. */
export const KEY_VARIABLES = [
  'GITHUB_REPOSITORY',
  'GITHUB_WORKFLOW',
  'GITHUB_RUN_ID',
  'GITHUB_JOB',
  'GITHUB_ACTION',
] as const;

/**
 * `<owner>/<repo>/<workflow>/<run ID>/<job>/<step>`: the repository as it is (its one `/` is
 * GitHub's), every other part with `%` and `/` percent-encoded, so that two different lists of
 * parts never join into one key.
 *
 * @throws {UsageError} when a variable is missing (outside GitHub Actions: give the input key)
 */
export function defaultKey(env: Record<string, string | undefined>): string {
  const missing = KEY_VARIABLES.filter((name) => !env[name]);
  if (missing.length > 0) {
    throw new UsageError(
      `input key not given and ${missing.join(', ')} not set, which the default key is made of: give the input key`,
    );
  }
  const [repository, ...rest] = KEY_VARIABLES.map((name) => env[name] as string);
  return [repository, ...rest.map(encodeIdPart)].join('/');
}
