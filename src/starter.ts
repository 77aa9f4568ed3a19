/**
 * The starter CLI (`npm run starter -- [start|message|status|batch] --help`): this file parses the
 * arguments; the commands are in ./starter/, the exit codes in ./starter/exit-codes.ts.
 */
import { Command, CommanderError, Option } from 'commander';
import { agentJobIdWorkflowId } from './client/index.js';
import { ConfigError } from './config/settings.js';
import { terminalText } from './escape.js';
import { messageChain, UsageError } from './errors.js';
import {
  ALL_SEARCH_ATTRIBUTES,
  InvalidInputError,
  START_PRIORITIES,
  type StartPriority,
} from './contract.js';
import { runBatch } from './starter/batch.js';
import {
  err,
  ExitCode,
  runMessage,
  runStart,
  runStatus,
  type CommonOptions,
  type StartOptions,
} from './starter/commands.js';

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

/** `--notify`: a target configured on the worker (docs/notifications.md). */
const NOTIFY_HELP = 'tell this notification target (configured on the worker) when the job ends';

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
      .option('--prompt-file <path>', 'read the prompt from a file, or from standard input with -')
      .option('--key <key>', 'idempotency key: the same project and key never make a second agent job')
      .option('--job-id <id>', 'an existing agent job: watch it, or with --prompt send it a follow-up')
      .option('--notify <name>', NOTIFY_HELP)
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
      .option('--prompt <text>', 'the follow-up message (this or --prompt-file is required)')
      .option('--prompt-file <path>', 'read the follow-up message from a file, or from standard input with -')
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
    .option('--notify <name>', `${NOTIFY_HELP}, for lines without their own "notify"`)
    .addOption(priorityOption('batch'))
    .action(function (this: Command, file: string) {
      return run(() => runBatch(file, this.opts<CommonOptions & { notify?: string }>()))();
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

/** The error and its causes for the terminal, with the fix for search attributes not registered. */
function explain(e: unknown): string {
  const text = terminalText(messageChain(e));
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
