/**
 * The action's default key: one agent job per repository, workflow, job, step and commit. A re-run
 * of a workflow (a new GITHUB_RUN_ATTEMPT, the same everything else) gets the same key, so it
 * attaches to the workflow its first attempt started instead of making a second agent job; two
 * workflows, two jobs or two steps on one commit get keys of their own. Pure: no I/O.
 */
import { UsageError } from '../errors.js';

/** The runner's variables the key is made of, in order. */
export const KEY_VARIABLES = [
  'GITHUB_REPOSITORY',
  'GITHUB_WORKFLOW',
  'GITHUB_JOB',
  'GITHUB_ACTION',
  'GITHUB_SHA',
] as const;

/**
 * A part with `%` and `/` percent-encoded: a workflow or job name may hold `/`, and two different
 * lists of parts must never join into one key.
 */
function part(value: string): string {
  return value.replaceAll('%', '%25').replaceAll('/', '%2F');
}

/**
 * `<owner>/<repo>/<workflow>/<job>/<step>/<sha>`: the repository as it is (its one `/` is
 * GitHub's), every other part percent-encoded ({@link part}).
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
  return [repository, ...rest.map(part)].join('/');
}
