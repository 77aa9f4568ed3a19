/**
 * The starter's commands `start`, `message` and `status`, and what they share with ./batch.ts: the
 * Temporal connection and how a result or a failure is printed. src/starter.ts parses the arguments.
 */
import { Client, Connection } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/common';
import {
  followAgentJob,
  progressLine,
  promptDiffers,
  sendFollowUp,
  startAgentJob,
  workflowUiUrl,
  type AgentJobHandle,
  type StartAgentJobOptions,
} from '../client/index.js';
import { loadTemporalSettings, type TemporalSettings } from '../config/temporal.js';
import { loadTracingSettings } from '../config/tracing.js';
import { readPromptFile } from '../client/prompt-file.js';
import { jsonText, terminalText } from '../escape.js';
import { resolveInput } from '../input.js';
import { UsageError } from '../errors.js';
import { installTracing } from '../observability/tracing.js';
import { classifyFailure, ExitCode } from './exit-codes.js';
import { payloadDataConverter } from '../payload-codec/index.js';
import { clientConnectionOptions, temporalApiKeySource } from '../temporal-api-key.js';
import {
  statusQuery,
  type AgentJobInput,
  type AgentJobProgress,
  type AgentJobResult,
  type StartPriority,
} from '../contract.js';

export { ExitCode } from './exit-codes.js';

/** A line on stdout, for results. */
export const out = (line: string) => process.stdout.write(`${line}\n`);
/** A line on stderr, for progress, warnings and errors. */
export const err = (line: string) => process.stderr.write(`${line}\n`);

/** Options every command that starts or follows workflows shares. */
export interface CommonOptions {
  taskQueue?: string;
  wait: boolean;
  json: boolean;
  /** `interactive` or `batch` (START_PRIORITIES); each command has its own default. */
  priority: StartPriority;
}

/** The flags of `start` and `message`. */
export interface StartOptions extends CommonOptions {
  project?: string;
  prompt?: string;
  /** A path, or `-` for standard input: read into `prompt` before anything connects. */
  promptFile?: string;
  key?: string;
  jobId?: string;
  timeout?: string;
  pollInterval?: string;
  notify?: string;
}

/** The warning for calls sent again after an unknown outcome (`resent` of a result or the status). */
export function resentWarning(resent: number): string {
  return (
    `warning: ${resent} creates or messages were sent again after an attempt whose outcome was unknown: ` +
    'a duplicate agent job or turn is possible; look for a second one in the project'
  );
}

/** Connects, runs `fn` with a client, and closes: exit 5 when the server cannot be reached. */
export async function withClient(
  fn: (client: Client, settings: TemporalSettings) => Promise<number>,
): Promise<number> {
  const settings = loadTemporalSettings();
  const tracingSettings = loadTracingSettings();
  // With TEMPORAL_API_KEY_FILE every request reads the file's current key: a `--wait` of hours
  // outlives a rotation.
  const options = clientConnectionOptions(
    settings.connect.connectionOptions,
    temporalApiKeySource(settings.apiKeyFile),
  );
  let connection: Connection;
  try {
    connection = await Connection.connect({ ...options, connectTimeout: 10_000 });
  } catch (e) {
    err(`error: cannot reach the Temporal server at ${settings.address}: ${(e as Error).message}`);
    return ExitCode.Connection;
  }
  const withoutExceptionText = settings.payloadKeysFile !== null;
  const tracing = installTracing({ ...tracingSettings, withoutExceptionText }, 'agent-job-starter');
  try {
    const interceptors = { workflow: tracing.clientInterceptors };
    // The same codec as the worker's: the input is sealed before it leaves, the result opened here.
    const dataConverter = payloadDataConverter(settings.payloadKeysFile);
    return await fn(
      new Client({ connection, namespace: settings.namespace, interceptors, dataConverter }),
      settings,
    );
  } finally {
    await connection.close();
    await tracing.shutdown();
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
  if (options.notify !== undefined) input.notify = options.notify;
  return input;
}

/** The options with `--prompt-file` read into `prompt`; both at once is a usage error. */
async function withPromptFile(options: StartOptions): Promise<StartOptions> {
  if (options.promptFile === undefined) return options;
  if (options.prompt !== undefined) throw new UsageError('give --prompt or --prompt-file, not both');
  return { ...options, prompt: await readPromptFile(options.promptFile), promptFile: undefined };
}

/** A started workflow or a sent follow-up: what `send` prints, and its end. */
interface Sent {
  workflowId: string;
  /** The follow-up's update ID; none for a start. */
  updateId?: string;
  result(onProgress: (p: AgentJobProgress) => void): Promise<AgentJobResult>;
}

/**
 * Checks `input` (the prompt limit and every other field) before anything connects, sends it
 * through `sendIt`, prints the workflow, and with --wait follows it to its end: the exit code.
 */
async function send(
  options: StartOptions,
  input: AgentJobInput,
  sendIt: (client: Client, start: StartAgentJobOptions) => Promise<Sent>,
): Promise<number> {
  resolveInput(input);
  return withClient(async (client, settings) => {
    const { key, priority, json } = options;
    const sent = await sendIt(client, { key, priority, taskQueue: options.taskQueue ?? settings.taskQueue });
    const { workflowId, updateId } = sent;
    const ui = workflowUiUrl(settings.uiUrl, settings.namespace, workflowId);
    if (!json) {
      out(`workflow: ${workflowId}`);
      if (updateId) out(`follow-up: ${updateId} (queued behind any turn in progress)`);
      if (ui) out(`ui:       ${ui}`);
    }
    if (!options.wait) {
      if (json) out(JSON.stringify({ workflowId, updateId, ui }));
      return ExitCode.Ok;
    }
    try {
      const result = await sent.result((p) => {
        if (!json) out(progressLine(p));
      });
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
      const failure = classifyFailure(e);
      if (failure === null) throw e;
      const { code, type, message, details } = failure;
      if (json) out(jsonText({ workflowId, ui, error: { type, message, details } }));
      else err(`workflow failed (${terminalText(type)}): ${terminalText(message)}`);
      return code;
    }
  });
}

/** `start`: starts a workflow (or attaches with --job-id), and with --wait follows it to its end. */
export async function runStart(given: StartOptions): Promise<number> {
  if (!given.project) throw new UsageError('--project is required');
  const options = await withPromptFile(given);
  if (!options.jobId && options.prompt === undefined)
    throw new UsageError('--prompt or --prompt-file is required');
  // --job-id with --prompt is a follow-up: the same as the message command.
  if (options.jobId && options.prompt !== undefined) return runMessage(options.jobId, options);
  const input = inputFrom(options, options.jobId);
  return send(options, input, async (client, start) => {
    const handle = await startAgentJob(client, input, start);
    if (start.key !== undefined && input.prompt !== undefined && (await promptDiffers(handle, input.prompt)))
      err(
        'warning: the key already started an agent job with another prompt: attached to it; this prompt was not sent',
      );
    return { workflowId: handle.workflowId, result: (onProgress) => followAgentJob(handle, onProgress) };
  });
}

/** `message`: sends a follow-up, and with --wait follows its turn to its end. */
export async function runMessage(jobId: string, given: StartOptions): Promise<number> {
  const options = await withPromptFile(given);
  const prompt = options.prompt;
  if (prompt === undefined) throw new UsageError('--prompt or --prompt-file is required');
  const input = inputFrom(options, jobId);
  return send(options, input, async (client, start) => {
    const followUp = await sendFollowUp(client, { ...input, jobId, prompt }, start);
    return {
      ...followUp,
      // The turn's own result, or the workflow's failure when it ends first.
      result: (onProgress) =>
        Promise.race([
          followUp.result(),
          followAgentJob(followUp.workflow, onProgress).then(() => followUp.result()),
        ]),
    };
  });
}

/** `status`: where a workflow stands; a closed one exits as `start --wait` would have. */
export async function runStatus(workflowId: string, options: { json: boolean }): Promise<number> {
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
        const failure = classifyFailure(e);
        if (failure === null) throw e;
        return failure.code;
      },
    );
  });
}
