/**
 * The starter CLI: `npm run starter -- [start] --project <id> --prompt "<text>"` starts an
 * agent-job workflow (the default command), `message` sends a follow-up to an agent job, `status`
 * shows where a workflow stands, and `batch` starts one job per line of a JSON Lines file.
 * `--help` works on each. Exit codes are documented in {@link ExitCode} and docs/contract.md.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { SingleBar } from 'cli-progress';
import { Client, Connection, WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import {
  ApplicationFailure,
  CancelledFailure,
  TerminatedFailure,
  WorkflowNotFoundError,
} from '@temporalio/common';
import { BatchFileError, followBatch, parseBatchFile, startBatch, type BatchPhase } from './client/batch.js';
import {
  agentJobIdWorkflowId,
  followAgentJob,
  sendFollowUp,
  startAgentJob,
  workflowUiUrl,
  type AgentJobHandle,
} from './client/index.js';
import { ConfigError, loadTemporalSettings, loadTracingSettings, type TemporalSettings } from './config.js';
import { jsonText, terminalText } from './escape.js';
import { UsageError } from './errors.js';
import { installTracing } from './observability/tracing.js';
import { clientConnectionOptions, temporalApiKeySource } from './temporal-api-key.js';
import {
  ALL_SEARCH_ATTRIBUTES,
  FailureType,
  InvalidInputError,
  START_PRIORITIES,
  statusQuery,
  type AgentJobInput,
  type AgentJobProgress,
  type AgentJobResult,
  type StartPriority,
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
  /** `batch --wait`: at least one job of the batch did not succeed (the summary says which). */
  BatchIncomplete: 8,
} as const;

/** Bad arguments found after the parser accepted them: printed with the command's help, exit 2. */

const out = (line: string) => process.stdout.write(`${line}\n`);
const err = (line: string) => process.stderr.write(`${line}\n`);

/** Options every command that starts or follows workflows shares. */
interface CommonOptions {
  taskQueue?: string;
  wait: boolean;
  json: boolean;
  /** `interactive` or `batch` (START_PRIORITIES); each command has its own default. */
  priority: StartPriority;
}

interface StartOptions extends CommonOptions {
  project?: string;
  prompt?: string;
  key?: string;
  jobId?: string;
  timeout?: string;
  pollInterval?: string;
}

/** The warning for calls sent again after an unknown outcome (`resent` of a result or the status). */
function resentWarning(resent: number): string {
  return (
    `warning: ${resent} creates or messages were sent again after an attempt whose outcome was unknown: ` +
    'a duplicate agent job or turn is possible; look for a second one in the project'
  );
}

function describeProgress(p: AgentJobProgress): string {
  if (p.phase === 'queued' && p.queue) {
    return `[queued] waiting for the project's API budget: position ${p.queue.position} of ${p.queue.queueLength}, earliest start ${p.queue.earliestStartAt}`;
  }
  // What the API sent goes through terminalText: no escape sequence of its own reaches the terminal.
  const status = p.lastRecord ? `status ${terminalText(p.lastRecord.status)}` : 'no record yet';
  const next = p.nextPollAt ? `, next poll at ${p.nextPollAt}` : '';
  const error = p.lastError ? `, last error ${terminalText(p.lastError.type)}` : '';
  return `[${p.phase}] ${status}, ${p.polls} polls${next}${error}`;
}

/** Maps a workflow or update failure to an exit code and its failure type. */
function classifyFailure(e: WorkflowFailedError | WorkflowUpdateFailedError): { code: number; type: string } {
  const cause = e.cause;
  if (cause instanceof CancelledFailure || cause instanceof TerminatedFailure)
    return { code: ExitCode.Cancelled, type: cause.name };
  const type =
    cause instanceof ApplicationFailure ? (cause.type ?? 'ApplicationFailure') : (cause?.name ?? 'Unknown');
  if (type === FailureType.AgentJobFailed) return { code: ExitCode.AgentJobFailed, type };
  if (type === FailureType.AgentJobTimedOut) return { code: ExitCode.TimedOut, type };
  if (type === FailureType.InvalidInput) return { code: ExitCode.Usage, type };
  return { code: ExitCode.WorkflowFailed, type };
}

/** Connects, runs `fn` with a client, and closes: exit 5 when the server cannot be reached. */
async function withClient(
  fn: (client: Client, settings: TemporalSettings) => Promise<number>,
): Promise<number> {
  const settings = loadTemporalSettings();
  const tracingSettings = loadTracingSettings();
  // With TEMPORAL_API_KEY_FILE every request reads the file's current key: a `--wait` of hours
  // outlives a rotation.
  const options = clientConnectionOptions(settings, temporalApiKeySource(settings));
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...options, connectTimeout: 10_000 });
  } catch (e) {
    err(`error: cannot reach the Temporal server at ${settings.address}: ${(e as Error).message}`);
    return ExitCode.Connection;
  }
  const tracing = installTracing(tracingSettings, 'agent-job-starter');
  try {
    const interceptors = { workflow: tracing.clientInterceptors };
    return await fn(new Client({ connection, namespace: settings.namespace, interceptors }), settings);
  } finally {
    await connection.close();
    await tracing.shutdown();
  }
}

/** Prints the end of a workflow or of a follow-up turn and returns the exit code. */
async function report(
  workflowId: string,
  ui: string | null,
  json: boolean,
  outcome: () => Promise<AgentJobResult>,
): Promise<number> {
  try {
    const result = await outcome();
    // A workflow that ended on a build before `resent` has none.
    const resent = result.resent ?? 0;
    if (json) out(jsonText({ workflowId, ui, ...result, resent }));
    else {
      out(`final record: ${jsonText(result.job, 2)}`);
      const prLink =
        result.prLink === null ? '(none: the agent changed no files)' : terminalText(result.prLink);
      out(`prLink: ${prLink}`);
      out(`resent: ${resent}`);
    }
    if (resent > 0) err(resentWarning(resent));
    return ExitCode.Ok;
  } catch (e) {
    if (!(e instanceof WorkflowFailedError) && !(e instanceof WorkflowUpdateFailedError)) throw e;
    const { code, type } = classifyFailure(e);
    const message = e.cause?.message ?? e.message;
    const details = e.cause instanceof ApplicationFailure ? e.cause.details : undefined;
    if (json) out(jsonText({ workflowId, ui, error: { type, message, details } }));
    else err(`workflow failed (${terminalText(type)}): ${terminalText(message)}`);
    return code;
  }
}

/** The workflow input the start and message commands build from their flags. */
function inputFrom(options: StartOptions, jobId?: string): AgentJobInput {
  if (!options.project) throw new UsageError('--project is required');
  const input: AgentJobInput = { projectId: options.project };
  if (options.prompt !== undefined) input.prompt = options.prompt;
  if (jobId) input.jobId = jobId;
  // Durations are checked by the contract's resolveInput, with a message that names the field.
  if (options.timeout) input.timeout = options.timeout;
  if (options.pollInterval) input.poll = { initialInterval: options.pollInterval };
  return input;
}

async function runStart(options: StartOptions): Promise<number> {
  if (!options.project) throw new UsageError('--project is required');
  if (!options.jobId && options.prompt === undefined) throw new UsageError('--prompt is required');
  // --job-id with --prompt is a follow-up: the same as the message command.
  if (options.jobId && options.prompt !== undefined) return runMessage(options.jobId, options);
  const input = inputFrom(options, options.jobId);
  return withClient(async (client, settings) => {
    const handle = await startAgentJob(client, input, {
      key: options.key,
      taskQueue: options.taskQueue ?? settings.taskQueue,
      priority: options.priority,
    });
    const ui = workflowUiUrl(settings.uiUrl, settings.namespace, handle.workflowId);
    if (!options.json) {
      out(`workflow: ${handle.workflowId}`);
      if (ui) out(`ui:       ${ui}`);
    }
    if (!options.wait) {
      if (options.json) out(JSON.stringify({ workflowId: handle.workflowId, ui }));
      return ExitCode.Ok;
    }
    return report(handle.workflowId, ui, options.json, () =>
      followAgentJob(handle, (p) => {
        if (!options.json) out(describeProgress(p));
      }),
    );
  });
}

async function runMessage(jobId: string, options: StartOptions): Promise<number> {
  if (options.prompt === undefined) throw new UsageError('--prompt is required');
  const input = inputFrom(options, jobId);
  return withClient(async (client, settings) => {
    const followUp = await sendFollowUp(
      client,
      { ...input, jobId, prompt: options.prompt as string },
      {
        key: options.key,
        taskQueue: options.taskQueue ?? settings.taskQueue,
        priority: options.priority,
      },
    );
    const ui = workflowUiUrl(settings.uiUrl, settings.namespace, followUp.workflowId);
    if (!options.json) {
      out(`workflow: ${followUp.workflowId}`);
      out(`follow-up: ${followUp.updateId} (queued behind any turn in progress)`);
      if (ui) out(`ui:       ${ui}`);
    }
    if (!options.wait) {
      if (options.json)
        out(JSON.stringify({ workflowId: followUp.workflowId, updateId: followUp.updateId, ui }));
      return ExitCode.Ok;
    }
    return report(followUp.workflowId, ui, options.json, () =>
      Promise.race([
        followUp.result(),
        followAgentJob(followUp.workflow, (p) => {
          if (!options.json) out(describeProgress(p));
        }).then(() => followUp.result()),
      ]),
    );
  });
}

async function runStatus(workflowId: string, options: { json: boolean }): Promise<number> {
  return withClient(async (client, settings) => {
    const handle: AgentJobHandle = client.workflow.getHandle(workflowId);
    let progress: AgentJobProgress;
    let closed: string;
    try {
      const description = await handle.describe();
      closed = description.status.name;
      progress = await handle.query(statusQuery);
    } catch (e) {
      if (!(e instanceof WorkflowNotFoundError)) throw e;
      err(`error: no workflow ${workflowId} in namespace ${settings.namespace}`);
      return ExitCode.Usage;
    }
    const ui = workflowUiUrl(settings.uiUrl, settings.namespace, workflowId);
    const record = progress.lastRecord;
    if (options.json) {
      out(
        jsonText({
          workflowId,
          ui,
          workflowStatus: closed,
          phase: progress.phase,
          jobId: progress.jobId,
          jobStatus: record?.status ?? null,
          polls: progress.polls,
          turns: progress.turns,
          prLink: record?.prLink ?? null,
          nextPollAt: progress.nextPollAt,
          lastError: progress.lastError,
          resent: progress.resent,
        }),
      );
    } else {
      out(`workflow:   ${workflowId} (${closed.toLowerCase()})`);
      if (ui) out(`ui:         ${ui}`);
      out(`phase:      ${progress.phase}`);
      out(`agent job:  ${progress.jobId === null ? '(not created yet)' : terminalText(progress.jobId)}`);
      out(`job status: ${record ? terminalText(record.status) : '(not read yet)'}`);
      out(`polls:      ${progress.polls} (turns ${progress.turns})`);
      out(`prLink:     ${record?.prLink ? terminalText(record.prLink) : '(none yet)'}`);
      out(`resent:     ${progress.resent}`);
      if (progress.nextPollAt) out(`next poll:  ${progress.nextPollAt}`);
      if (progress.lastError) {
        const { type, message } = progress.lastError;
        out(`last error: ${terminalText(type)}: ${terminalText(message)}`);
      }
    }
    if (progress.resent > 0) err(resentWarning(progress.resent));
    // A closed workflow exits as `start --wait` would have.
    if (closed === 'RUNNING') return ExitCode.Ok;
    return handle.result().then(
      () => ExitCode.Ok,
      (e: unknown) => {
        if (e instanceof WorkflowFailedError) return classifyFailure(e).code;
        throw e;
      },
    );
  });
}

function countPhases(phases: BatchPhase[]): Record<BatchPhase, number> {
  const counts: Record<BatchPhase, number> = { queued: 0, active: 0, completed: 0, failed: 0 };
  for (const phase of phases) counts[phase]++;
  return counts;
}

function countsLine(counts: Record<BatchPhase, number>): string {
  return `queued ${counts.queued}, active ${counts.active}, completed ${counts.completed}, failed ${counts.failed}`;
}

/** Columns padded to their widest cell. */
function table(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, column) =>
    Math.max(...rows.map((row) => (row[column] ?? '').length)),
  );
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

async function runBatch(file: string, options: CommonOptions): Promise<number> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as Error).message}`, { cause: e });
  }
  let lines;
  try {
    lines = parseBatchFile(text);
  } catch (e) {
    if (!(e instanceof BatchFileError)) throw e;
    err(`error: ${e.message}`);
    return ExitCode.Usage;
  }
  return withClient(async (client, settings) => {
    const started = await startBatch(client, lines, {
      taskQueue: options.taskQueue ?? settings.taskQueue,
      priority: options.priority,
    });
    if (!options.wait) {
      for (const line of started) {
        if (options.json)
          out(jsonText({ line: line.line, key: line.key, workflowId: line.handle.workflowId }));
        else out(`line ${line.line}: ${terminalText(line.handle.workflowId)}`);
      }
      if (!options.json) out(`${started.length} workflows started or attached`);
      return ExitCode.Ok;
    }
    // Progress goes to stderr, so stdout holds only the summary (or the JSON objects).
    const tty = process.stderr.isTTY;
    const bar = tty
      ? new SingleBar({
          format:
            '{bar} {value}/{total} ended | queued {queued} | active {active} | completed {completed} | failed {failed}',
          stream: process.stderr,
          hideCursor: true,
        })
      : null;
    bar?.start(started.length, 0, countPhases([]));
    const outcomes = await followBatch(started, (phases) => {
      const counts = countPhases(phases);
      if (bar) bar.update(counts.completed + counts.failed, counts);
      else err(`[batch] ${countsLine(counts)}`);
    }).finally(() => bar?.stop());
    const rows = started.map((line, index) => {
      const outcome = outcomes[index];
      return {
        line: line.line,
        key: line.key,
        workflowId: line.handle.workflowId,
        status: outcome?.result?.status ?? 'failed',
        prLink: outcome?.result?.prLink ?? null,
        // A workflow that ended on a build before `resent` has none.
        resent: outcome?.result?.resent ?? 0,
        error: outcome?.failureType ? { type: outcome.failureType, message: outcome.failureMessage } : null,
      };
    });
    if (options.json) for (const row of rows) out(jsonText(row));
    else {
      out(
        table([
          ['KEY', 'STATUS', 'PRLINK OR FAILURE'],
          ...rows.map((row) =>
            [row.key, row.status, row.error?.type ?? row.prLink ?? '(no changes)'].map(terminalText),
          ),
        ]),
      );
      out(countsLine(countPhases(outcomes.map((o) => o.phase))));
    }
    for (const row of rows) if (row.resent > 0) err(`${terminalText(row.key)}: ${resentWarning(row.resent)}`);
    return outcomes.every((o) => o.phase === 'completed') ? ExitCode.Ok : ExitCode.BatchIncomplete;
  });
}

/** Flags for the poll schedule, deadline and task queue, shared by start and message. */
function workflowFlags(command: Command): Command {
  return command
    .option('--timeout <duration>', 'how long to wait for the agent job, e.g. 2h (default 6h)')
    .option('--poll-interval <duration>', 'first wait between polls, e.g. 5s')
    .option('--task-queue <name>', 'task queue of the workers (default TEMPORAL_TASK_QUEUE or agent-jobs)')
    .option('--wait', 'follow the workflow and print the final record', false)
    .option('--json', 'print one JSON object instead of text', false);
}

/** `--priority`, checked by the parser: a class that is not one is a usage error, before connecting. */
function priorityOption(fallback: StartPriority): Option {
  return new Option('--priority <class>', 'on busy workers, interactive jobs go ahead of batch jobs')
    .choices(Object.keys(START_PRIORITIES))
    .default(fallback);
}

function program(exit: { code: number }): Command {
  const root = new Command('npm run starter --')
    .description(
      'Start and follow agent-job workflows.\n\nTemporal connection: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_PROFILE, ...',
    )
    // Lower-case titles ("usage:"), as the starter has always printed them.
    .configureHelp({ styleTitle: (title) => title.toLowerCase() })
    .showHelpAfterError()
    .exitOverride();
  const run = (fn: () => Promise<number>) => async () => {
    exit.code = await fn();
  };

  workflowFlags(
    root
      .command('start', { isDefault: true })
      .description('start an agent-job workflow (the default command), or attach with --job-id')
      .option('--project <id>', 'documentation project ID (required)')
      .option('--prompt <text>', 'instruction for the agent (required unless --job-id watches a job)')
      .option('--key <key>', 'idempotency key: the same project and key never make a second agent job')
      .option('--job-id <id>', 'an existing agent job: watch it, or with --prompt send it a follow-up')
      .addOption(priorityOption('interactive')),
  ).action(function (this: Command) {
    return run(() => runStart(this.opts<StartOptions>()))();
  });

  workflowFlags(
    root
      .command('message')
      .description('send a follow-up prompt to an agent job: a new turn, after any turn in progress')
      .argument('<job-id>', 'the agent job')
      .option('--project <id>', 'documentation project ID (required)')
      .option('--prompt <text>', 'the follow-up message (required)')
      .option('--key <key>', 'idempotency key of this follow-up: the same key never sends twice')
      .addOption(priorityOption('interactive')),
  ).action(function (this: Command, jobId: string) {
    return run(() => runMessage(jobId, this.opts<StartOptions>()))();
  });

  root
    .command('status')
    .description('show where a workflow stands: phase, agent job status, polls, prLink')
    .argument('<workflow-id>', `the workflow, e.g. ${agentJobIdWorkflowId('docs-site', '<job-id>')}`)
    .option('--json', 'print one JSON object instead of text', false)
    .action(function (this: Command, workflowId: string) {
      return run(() => runStatus(workflowId, this.opts<{ json: boolean }>()))();
    });

  root
    .command('batch')
    .description(
      'start one agent job per line of a JSON Lines file: {"projectId", "prompt", "key"?, ...input}. ' +
        'Nothing starts unless every line is valid; a re-run attaches instead of starting again.',
    )
    .argument('<file>', 'the .jsonl file')
    .option('--task-queue <name>', 'task queue of the workers (default TEMPORAL_TASK_QUEUE or agent-jobs)')
    .option(
      '--wait',
      'follow every job: live counts, then a summary table; exit 8 unless all succeeded',
      false,
    )
    .option('--json', 'print one JSON object per job', false)
    .addOption(priorityOption('batch'))
    .action(function (this: Command, file: string) {
      return run(() => runBatch(file, this.opts<CommonOptions>()))();
    });
  return root;
}

async function main(argv: string[]): Promise<number> {
  const exit = { code: ExitCode.Ok as number };
  const root = program(exit);
  try {
    await root.parseAsync(argv, { from: 'user' });
    return exit.code;
  } catch (e) {
    if (e instanceof CommanderError) {
      // Help and version end with exit code 0; every parse error with 2, after the usage.
      return e.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage;
    }
    if (e instanceof UsageError) {
      const command = root.commands.find((c) => argv.includes(c.name())) ?? root.commands[0];
      err(`error: ${e.message}\n`);
      err(command?.helpInformation() ?? root.helpInformation());
      return ExitCode.Usage;
    }
    if (e instanceof InvalidInputError) {
      err(`error: invalid input: ${e.message}. Nothing was started.`);
      return ExitCode.Usage;
    }
    if (e instanceof ConfigError) {
      err(`error: ${e.message}`);
      return ExitCode.Usage;
    }
    throw e;
  }
}

/**
 * The error's message followed by its causes', since the SDK's own messages are generic; any of
 * them may carry what the API or the server sent, so it reaches the terminal through terminalText.
 */
function explain(e: unknown): string {
  const parts: string[] = [];
  for (let cause: unknown = e; cause instanceof Error && parts.length < 5; cause = cause.cause) {
    if (!parts.includes(cause.message)) parts.push(cause.message);
  }
  const text = terminalText(parts.length > 0 ? parts.join(': ') : String(e));
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
