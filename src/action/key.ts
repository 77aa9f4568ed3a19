/**
 * The action's default key: one agent job per CI run, workflow, job and step. A re-run attempt
 * keeps GITHUB_RUN_ID, so it attaches instead of making a second agent job; runs the variables
 * cannot tell apart (matrix legs, a reusable workflow called twice) need the input key (docs/ci.md).
 */
import { encodeIdPart } from '../ids.js';
import { UsageError } from '../errors.js';

/** The runner's variables the key is made of, in order. */
const KEY_VARIABLES = [
  'GITHUB_REPOSITORY',
  'GITHUB_WORKFLOW',
  'GITHUB_RUN_ID',
  'GITHUB_JOB',
  'GITHUB_ACTION',
] as const;

/**
 * `<owner>/<repo>/<workflow>/<run ID>/<job>/<step>`, every part but the repository with `%` and `/`
 * percent-encoded, so two lists of parts never join into one key. A missing variable (outside
 * GitHub Actions) is a {@link UsageError}.
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
