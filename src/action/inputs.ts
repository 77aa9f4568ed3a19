/**
 * The GitHub Action's inputs and outputs: one table each, from which dev/build-action.ts writes
 * action.yml (so a new input is one row here), and the inputs read through @actions/core.
 */
import * as core from '@actions/core';
import { DEFAULT_TASK_QUEUE } from '../contract.js';
import { UsageError } from '../errors.js';

/** One input of the action, as action.yml declares it and as the action reads it. */
export interface ActionInput {
  readonly description: string;
  readonly required?: boolean;
  /** The default the runner passes (and the action applies when the variable is absent). */
  readonly default?: string;
  /** Masked in the log ({@link maskValues}) before anything else runs. */
  readonly secret?: boolean;
  /** The `TEMPORAL_*` setting it gives the Temporal connection (src/config/temporal.ts). */
  readonly temporalSetting?: string;
}

/**
 * Every input of the action. Connection inputs take a secret's contents (a key, a PEM), never a
 * path: in a workflow they come from `${{ secrets.X }}`, and nothing is written to disk.
 */
export const ACTION_INPUTS = {
  project: { description: 'The documentation project ID.', required: true },
  prompt: { description: 'The instruction for the agent. Give this or prompt-file, not both.' },
  'prompt-file': {
    description:
      'A file holding the prompt (UTF-8, at most 32,000 characters): for text no shell should interpolate, such as commit messages.',
  },
  key: {
    description:
      'Idempotency key: the same project and key never make a second agent job. Default: the repository, the workflow, the run ID, the job and the step, so every CI run has its own agent job and a re-run attempt attaches to it; give it where one run starts several (a matrix, a reusable workflow called twice; docs/ci.md).',
  },
  wait: {
    description:
      'true: wait for the agent job to end and set job-id, status and pr-link; false: set workflow-id once the workflow has started.',
    default: 'true',
  },
  timeout: {
    description: 'How long the workflow waits for the agent job to end, e.g. 2h (default 6h, at most 7d).',
  },
  'poll-interval': { description: 'First wait between polls of the agent job, e.g. 10s (default 5s).' },
  notify: {
    description:
      "A notification target's name, configured on the workers (docs/notifications.md): when the job ends, its final record is delivered there, also when this step does not wait.",
  },
  'task-queue': {
    description: 'Task queue of the workers.',
    default: DEFAULT_TASK_QUEUE,
    temporalSetting: 'TEMPORAL_TASK_QUEUE',
  },
  'temporal-address': {
    description: 'Temporal frontend, host:port (for Temporal Cloud, <namespace>.<account>.tmprl.cloud:7233).',
    required: true,
    temporalSetting: 'TEMPORAL_ADDRESS',
  },
  'temporal-namespace': {
    description: 'Temporal namespace.',
    default: 'default',
    temporalSetting: 'TEMPORAL_NAMESPACE',
  },
  'temporal-api-key': {
    description: 'Temporal API key (turns TLS on).',
    secret: true,
    temporalSetting: 'TEMPORAL_API_KEY',
  },
  'temporal-tls-cert': {
    description: 'TLS client certificate, PEM contents (with temporal-tls-key; turns TLS on).',
    temporalSetting: 'TEMPORAL_TLS_CLIENT_CERT_DATA',
  },
  'temporal-tls-key': {
    description: 'TLS client private key, PEM contents.',
    secret: true,
    temporalSetting: 'TEMPORAL_TLS_CLIENT_KEY_DATA',
  },
  'temporal-server-ca': {
    description: "CA certificate of the server's TLS, PEM contents (turns TLS on).",
    temporalSetting: 'TEMPORAL_TLS_SERVER_CA_CERT_DATA',
  },
  'temporal-server-name': {
    description: "Server name the server's TLS certificate must match, when it is not the address's host.",
    temporalSetting: 'TEMPORAL_TLS_SERVER_NAME',
  },
  'temporal-ui-url': {
    description:
      'Base URL of the Temporal UI, for the link to the workflow (e.g. https://cloud.temporal.io).',
    temporalSetting: 'TEMPORAL_UI_URL',
  },
  'payload-keys': {
    description:
      "The payload codec's key ring, the contents of the workers' TEMPORAL_PAYLOAD_KEYS_FILE, where they have one: the input is sealed before it leaves the runner.",
    secret: true,
  },
} as const satisfies Record<string, ActionInput>;

/** A name of {@link ACTION_INPUTS}. */
export type ActionInputName = keyof typeof ACTION_INPUTS;

/** Every output of the action, with its description in action.yml. */
export const ACTION_OUTPUTS = {
  'workflow-id': { description: 'The workflow that drives the agent job (attached to, on a re-run).' },
  'workflow-url': { description: 'The workflow in the Temporal UI, when temporal-ui-url is known.' },
  'job-id': { description: 'The agent job (with wait: true).' },
  status: {
    description:
      'How the agent job ended (with wait: true): completed, archived, failed, timed-out, cancelled, workflow-failed, or payload-unopened.',
  },
  'pr-link': {
    description: "The agent's pull request (with wait: true); empty when the agent changed no files.",
  },
} as const satisfies Record<string, { description: string }>;

/** The action's inputs, read and checked by {@link readInputs}. */
export type ActionSettings = ReturnType<typeof readInputs>;

/** An input's value (trimmed by @actions/core), its default when empty. */
function inputValue(name: ActionInputName): string | undefined {
  const spec: ActionInput = ACTION_INPUTS[name];
  return core.getInput(name) || spec.default;
}

/** Every input with its spec. */
const INPUTS = Object.entries(ACTION_INPUTS) as [ActionInputName, ActionInput][];

/** The values of the secret inputs given, to mask before anything is printed. */
export function secretValues(): string[] {
  return INPUTS.filter(([, spec]) => spec.secret).flatMap(([name]) => inputValue(name) ?? []);
}

/**
 * What to mask for a secret: the whole value and each of its lines, since the runner masks the log
 * line by line (a PEM key, a key ring would never match whole). PEM armour lines and a key ring's
 * comments are public and left out.
 */
export function maskValues(secret: string): string[] {
  const lines = secret
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(
      (line) => line !== '' && !/^-----(BEGIN|END) [A-Z0-9 ]+-----$/.test(line) && !line.startsWith('#'),
    );
  return [...new Set([secret.trim(), ...lines])].filter((value) => value !== '');
}

/** The input that gives the Temporal setting `setting` (TEMPORAL_UI_URL: temporal-ui-url), if any. */
export function inputOfSetting(setting: string): ActionInputName | undefined {
  return INPUTS.find(([, spec]) => spec.temporalSetting === setting)?.[0];
}

/** YAML 1.2's booleans, as the runner's toolkit reads them (`core.getBooleanInput`). */
const BOOLEANS = ['true', 'True', 'TRUE', 'false', 'False', 'FALSE'];

/**
 * Reads the inputs, the prompt file not yet read; `key` undefined for the default (./key.ts), the
 * connection as `TEMPORAL_*` settings. A bad input is a {@link UsageError} naming the input, never
 * its value (it may be a secret).
 */
export function readInputs() {
  const project = inputValue('project');
  if (project === undefined) throw new UsageError('input project is required');
  const prompt = inputValue('prompt');
  const promptFile = inputValue('prompt-file');
  if (prompt !== undefined && promptFile !== undefined) {
    throw new UsageError('give the input prompt or prompt-file, not both');
  }
  if (prompt === undefined && promptFile === undefined) {
    throw new UsageError('the input prompt or prompt-file is required');
  }
  // Not core.getBooleanInput: its TypeError would not be a usage error (exit 2) naming the value.
  const waitText = inputValue('wait') ?? 'true';
  if (!BOOLEANS.includes(waitText))
    throw new UsageError(`input wait must be true or false, not "${waitText}"`);
  const temporalEnv: Record<string, string> = {};
  for (const [name, { temporalSetting }] of INPUTS) {
    const given = inputValue(name);
    if (temporalSetting !== undefined && given !== undefined) temporalEnv[temporalSetting] = given;
  }
  if (temporalEnv.TEMPORAL_ADDRESS === undefined) throw new UsageError('input temporal-address is required');
  if (
    (temporalEnv.TEMPORAL_TLS_CLIENT_CERT_DATA === undefined) !==
    (temporalEnv.TEMPORAL_TLS_CLIENT_KEY_DATA === undefined)
  ) {
    throw new UsageError('give the inputs temporal-tls-cert and temporal-tls-key together');
  }
  return {
    project,
    prompt: prompt !== undefined ? { text: prompt } : { file: promptFile as string },
    key: inputValue('key'),
    wait: waitText.toLowerCase() === 'true',
    timeout: inputValue('timeout'),
    pollInterval: inputValue('poll-interval'),
    notify: inputValue('notify'),
    payloadKeys: inputValue('payload-keys'),
    temporalEnv,
  };
}
