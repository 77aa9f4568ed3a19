/**
 * The starter CLI (`npm run starter -- --project <id> --prompt "<text>" [--key <k>] [--wait] [--json]`):
 * starts an agent-job workflow, prints its ID and UI link, and with --wait follows it to the end.
 * Exit codes are documented in {@link ExitCode} and the README.
 */
import { parseArgs } from 'node:util';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, TerminatedFailure } from '@temporalio/common';
import { followAgentJob, startAgentJob, workflowUiUrl } from './client/index.js';
import { ConfigError, loadTemporalSettings } from './config.js';
import {
  ALL_SEARCH_ATTRIBUTES,
  FailureType,
  InvalidInputError,
  type AgentJobInput,
  type AgentJobProgress,
} from './contract.js';

/** The starter's exit codes. */
export const ExitCode = {
  /** Started (without --wait), or the agent job ended `completed` or `archived`. */
  Ok: 0,
  /** Anything unexpected. */
  Error: 1,
  /** Bad arguments, invalid input or configuration: nothing was started. */
  Usage: 2,
  /** The agent job ended `failed`. */
  AgentJobFailed: 3,
  /** The agent job was still working at the workflow's deadline. */
  TimedOut: 4,
  /** The Temporal server could not be reached. */
  Connection: 5,
  /** The workflow failed for another reason (API refused the key, project not found, ...). */
  WorkflowFailed: 6,
  /** The workflow was cancelled or terminated. */
  Cancelled: 7,
} as const;

const USAGE = `usage: npm run starter -- --project <id> --prompt "<text>" [options]

  --project <id>       documentation project ID (required)
  --prompt <text>      instruction for the agent (required)
  --key <key>          idempotency key: the same project and key never make a second agent job
  --job-id <id>        attach to an existing agent job instead of creating one
  --timeout <dur>      how long to wait for the agent job, e.g. 2h (default 6h)
  --poll-interval <d>  first wait between polls, e.g. 5s
  --task-queue <name>  task queue of the workers (default from TEMPORAL_TASK_QUEUE or agent-jobs)
  --wait               follow the workflow and print the final record
  --json               print one JSON object instead of text
  --help               print this help

Temporal connection: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_PROFILE, ...`;

class UsageError extends Error {}

interface Options {
  input: AgentJobInput;
  key: string | undefined;
  taskQueue: string | undefined;
  wait: boolean;
  json: boolean;
}

function parse(argv: string[]): Options | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        project: { type: 'string' },
        prompt: { type: 'string' },
        key: { type: 'string' },
        'job-id': { type: 'string' },
        timeout: { type: 'string' },
        'poll-interval': { type: 'string' },
        'task-queue': { type: 'string' },
        wait: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new UsageError((err as Error).message, { cause: err });
  }
  if (values.help) return 'help';
  if (!values.project) throw new UsageError('--project is required');
  if (!values.prompt) throw new UsageError('--prompt is required');
  const input: AgentJobInput = { projectId: values.project, prompt: values.prompt };
  if (values['job-id']) input.jobId = values['job-id'];
  // Durations are checked by the contract's resolveInput, with a message that names the field.
  if (values.timeout) input.timeout = values.timeout;
  if (values['poll-interval']) input.poll = { initialInterval: values['poll-interval'] };
  return { input, key: values.key, taskQueue: values['task-queue'], wait: values.wait, json: values.json };
}

function describeProgress(p: AgentJobProgress): string {
  if (p.phase === 'queued' && p.queue) {
    return `[queued] waiting for the project's API budget: position ${p.queue.position} of ${p.queue.queueLength}, earliest start ${p.queue.earliestStartAt}`;
  }
  const status = p.lastRecord ? `status ${p.lastRecord.status}` : 'no record yet';
  const next = p.nextPollAt ? `, next poll at ${p.nextPollAt}` : '';
  const error = p.lastError ? `, last error ${p.lastError.type}` : '';
  return `[${p.phase}] ${status}, ${p.polls} polls${next}${error}`;
}

/** Maps a workflow failure to an exit code and a one-line explanation. */
function classifyFailure(err: WorkflowFailedError): { code: number; type: string } {
  const cause = err.cause;
  if (cause instanceof CancelledFailure || cause instanceof TerminatedFailure)
    return { code: ExitCode.Cancelled, type: cause.name };
  const type =
    cause instanceof ApplicationFailure ? (cause.type ?? 'ApplicationFailure') : (cause?.name ?? 'Unknown');
  if (type === FailureType.AgentJobFailed) return { code: ExitCode.AgentJobFailed, type };
  if (type === FailureType.AgentJobTimedOut) return { code: ExitCode.TimedOut, type };
  if (type === FailureType.InvalidInput) return { code: ExitCode.Usage, type };
  return { code: ExitCode.WorkflowFailed, type };
}

async function main(argv: string[]): Promise<number> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const err = (line: string) => process.stderr.write(`${line}\n`);
  let options: Options | 'help';
  let settings;
  try {
    options = parse(argv);
    if (options === 'help') {
      out(USAGE);
      return ExitCode.Ok;
    }
    settings = loadTemporalSettings();
  } catch (e) {
    if (e instanceof UsageError) {
      err(`error: ${e.message}\n\n${USAGE}`);
      return ExitCode.Usage;
    }
    if (e instanceof ConfigError) {
      err(`error: ${e.message}`);
      return ExitCode.Usage;
    }
    throw e;
  }

  let connection: Connection;
  try {
    connection = await Connection.connect({ ...settings.connect.connectionOptions, connectTimeout: 10_000 });
  } catch (e) {
    err(`error: cannot reach the Temporal server at ${settings.address}: ${(e as Error).message}`);
    return ExitCode.Connection;
  }
  try {
    const client = new Client({ connection, namespace: settings.namespace });
    let handle;
    try {
      handle = await startAgentJob(client, options.input, {
        key: options.key,
        taskQueue: options.taskQueue ?? settings.taskQueue,
      });
    } catch (e) {
      if (e instanceof InvalidInputError) {
        err(`error: invalid input: ${e.message}. Nothing was started.`);
        return ExitCode.Usage;
      }
      throw e;
    }
    const ui = workflowUiUrl(settings.uiUrl, settings.namespace, handle.workflowId);
    if (!options.json) {
      out(`workflow: ${handle.workflowId}`);
      if (ui) out(`ui:       ${ui}`);
    }
    if (!options.wait) {
      if (options.json) out(JSON.stringify({ workflowId: handle.workflowId, ui }));
      return ExitCode.Ok;
    }
    try {
      const result = await followAgentJob(handle, (p) => {
        if (!options.json) out(describeProgress(p));
      });
      if (options.json) out(JSON.stringify({ workflowId: handle.workflowId, ui, ...result }));
      else {
        out(`final record: ${JSON.stringify(result.job, null, 2)}`);
        out(`prLink: ${result.prLink ?? '(none: the agent changed no files)'}`);
      }
      return ExitCode.Ok;
    } catch (e) {
      if (!(e instanceof WorkflowFailedError)) throw e;
      const { code, type } = classifyFailure(e);
      const message = e.cause?.message ?? e.message;
      const details = e.cause instanceof ApplicationFailure ? e.cause.details : undefined;
      if (options.json)
        out(JSON.stringify({ workflowId: handle.workflowId, ui, error: { type, message, details } }));
      else err(`workflow failed (${type}): ${message}`);
      return code;
    }
  } finally {
    await connection.close();
  }
}

/** The error's message followed by its causes', since the SDK's own messages are generic. */
function explain(e: unknown): string {
  const parts: string[] = [];
  for (let cause: unknown = e; cause instanceof Error && parts.length < 5; cause = cause.cause) {
    if (!parts.includes(cause.message)) parts.push(cause.message);
  }
  const text = parts.length > 0 ? parts.join(': ') : String(e);
  if (/no mapping defined for search attribute/.test(text)) {
    return (
      `${text}. Register the search attributes once per namespace: ` +
      ALL_SEARCH_ATTRIBUTES.map(
        (key) => `temporal operator search-attribute create --name ${key.name} --type Keyword`,
      ).join('; ')
    );
  }
  return text;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`error: ${explain(e)}\n`);
    process.exit(ExitCode.Error);
  },
);
