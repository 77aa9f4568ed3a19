/**
 * The GitHub Action's step: masks the secrets, checks every input before it connects, starts (or
 * attaches to) the agent job through the client library, with `wait` follows it to its end, and
 * sets the outputs and the job summary. Exit codes are the starter's (../starter/exit-codes.ts).
 */
import * as core from '@actions/core';
import { Client, Connection, type DataConverter } from '@temporalio/client';
import {
  followAgentJob,
  progressLine,
  promptDiffers,
  startAgentJob,
  workflowUiUrl,
  type AgentJobHandle,
} from '../client/index.js';
import { readPromptFile } from '../client/prompt-file.js';
import { checkedKey } from '../client/start.js';
import { ConfigError } from '../config/settings.js';
import { loadTemporalSettings, type TemporalSettings } from '../config/temporal.js';
import {
  InvalidInputError,
  SearchAttributes,
  type AgentJobInput,
  type AgentJobProgress,
} from '../contract.js';
import { terminalText } from '../escape.js';
import { UsageError } from '../errors.js';
import { resolveInput } from '../input.js';
import { AesGcmPayloadCodec, parseKeyRing, staticKeyRing } from '../payload-codec/index.js';
import { classifyFailure, ExitCode } from '../starter/exit-codes.js';
import { inputOfSetting, maskValues, readInputs, secretValues, type ActionSettings } from './inputs.js';
import { defaultKey } from './key.js';
import { writeJobSummary, type SummaryFacts } from './summary.js';

/**
 * How often the step asks for progress while it waits. The result arrives on its own (a long
 * poll); the lines are for a person reading the log, and each is a query the worker answers.
 */
const PROGRESS_INTERVAL_MS = 5_000;

/** The warning of a start that attached to an agent job created with another prompt. */
const OTHER_PROMPT =
  "this step's key already started an agent job with another prompt: the step attached to it, and its own prompt was not sent. " +
  'Give a run that must have its own agent job the input key (docs/ci.md).';

/** Everything checked, nothing connected yet. */
type Plan = Awaited<ReturnType<typeof plan>>;

/** The data converter for the key ring's text, or undefined without one. */
function codecOf(payloadKeys: string | undefined): DataConverter | undefined {
  if (payloadKeys === undefined) return undefined;
  const ring = parseKeyRing(payloadKeys);
  // The reason names a line and a key ID, never key material.
  if ('reason' in ring) throw new UsageError(`input payload-keys: ${ring.reason}`);
  return { payloadCodecs: [new AesGcmPayloadCodec(staticKeyRing(ring.value.keys))] };
}

/** Reads and checks everything before anything connects. */
async function plan(inputs: ActionSettings) {
  const prompt = 'text' in inputs.prompt ? inputs.prompt.text : await readPromptFile(inputs.prompt.file);
  const input: AgentJobInput = { projectId: inputs.project, prompt };
  if (inputs.timeout !== undefined) input.timeout = inputs.timeout;
  if (inputs.pollInterval !== undefined) input.poll = { initialInterval: inputs.pollInterval };
  if (inputs.notify !== undefined) input.notify = inputs.notify;
  resolveInput(input);
  const key = checkedKey(inputs.key ?? defaultKey(process.env)) as string;
  let settings: TemporalSettings;
  try {
    settings = loadTemporalSettings(inputs.temporalEnv);
  } catch (err) {
    // The message names the project's setting; the action's user knows the input that gave it.
    if (!(err instanceof ConfigError)) throw err;
    const named = inputOfSetting(err.setting);
    throw new UsageError(
      `${named === undefined ? 'the Temporal connection inputs' : `input ${named}`}: ${err.message}`,
    );
  }
  return {
    project: inputs.project,
    input,
    key,
    wait: inputs.wait,
    settings,
    dataConverter: codecOf(inputs.payloadKeys),
  };
}

/** The `status` output of a failed workflow by its exit code; any other is `workflow-failed`. */
const FAILED_STATUS: Readonly<Record<number, string>> = {
  [ExitCode.AgentJobFailed]: 'failed',
  [ExitCode.TimedOut]: 'timed-out',
  [ExitCode.Cancelled]: 'cancelled',
  [ExitCode.PayloadUnopened]: 'payload-unopened',
};

/** The agent job ID a failure's details carry (the final or last record), if any. */
function jobIdOf(details: unknown[] | null | undefined): string | null {
  const id = (details?.[0] as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' ? id : null;
}

/**
 * The agent job the workflow recorded (`AgentJobId`), for a failure whose details carry no record;
 * null when it made none, or when the read fails (logged: the failure itself matters more).
 */
async function recordedJobId(handle: AgentJobHandle): Promise<string | null> {
  try {
    return (await handle.describe()).typedSearchAttributes.get(SearchAttributes.jobId) ?? null;
  } catch (err) {
    core.info(`could not read the agent job's ID from the workflow: ${terminalText((err as Error).message)}`);
    return null;
  }
}

/** Starts (or attaches), and with `wait` follows the job to its end: the exit code. */
async function start(plan: Plan): Promise<number> {
  const { settings } = plan;
  let connection: Connection;
  try {
    connection = await Connection.connect({
      ...settings.connect.connectionOptions,
      connectTimeout: 10_000,
    });
  } catch (err) {
    core.error(
      `cannot reach the Temporal server at ${settings.address}: ${terminalText((err as Error).message)}`,
    );
    return ExitCode.Connection;
  }
  try {
    const client = new Client({
      connection,
      namespace: settings.namespace,
      dataConverter: plan.dataConverter,
    });
    const handle = await startAgentJob(client, plan.input, { key: plan.key, taskQueue: settings.taskQueue });
    const workflowUrl = workflowUiUrl(settings.uiUrl, settings.namespace, handle.workflowId);
    core.info(`workflow: ${terminalText(handle.workflowId)}`);
    if (workflowUrl) core.info(`ui:       ${workflowUrl}`);
    core.setOutput('workflow-id', handle.workflowId);
    core.setOutput('workflow-url', workflowUrl ?? '');
    const warning = (await promptDiffers(handle, plan.input.prompt as string)) ? OTHER_PROMPT : null;
    if (warning !== null) core.warning(warning);
    const facts = { project: plan.project, workflowId: handle.workflowId, workflowUrl, warning };
    if (!plan.wait) {
      await writeJobSummary({ ...facts, outcome: { kind: 'started' } });
      return ExitCode.Ok;
    }
    return await waitForEnd(facts, handle);
  } finally {
    await connection.close();
  }
}

/** Waits for the result; sets job-id, status and pr-link, and writes the summary. */
async function waitForEnd(facts: Omit<SummaryFacts, 'outcome'>, handle: AgentJobHandle): Promise<number> {
  try {
    const onProgress = (p: AgentJobProgress) => core.info(progressLine(p));
    const { job, status, prLink } = await followAgentJob(handle, onProgress, {
      intervalMs: PROGRESS_INTERVAL_MS,
    });
    core.setOutput('job-id', job.id);
    core.setOutput('status', status);
    core.setOutput('pr-link', prLink ?? '');
    core.info(`prLink: ${prLink === null ? '(none: the agent changed no files)' : terminalText(prLink)}`);
    await writeJobSummary({ ...facts, outcome: { kind: 'ended', status, jobId: job.id, prLink } });
    return ExitCode.Ok;
  } catch (err) {
    const failure = classifyFailure(err);
    if (failure === null) throw err;
    const { code, type, message } = failure;
    const status = FAILED_STATUS[code] ?? 'workflow-failed';
    const jobId = jobIdOf(failure.details) ?? (await recordedJobId(handle));
    core.setOutput('job-id', jobId ?? '');
    core.setOutput('status', status);
    core.setOutput('pr-link', '');
    core.error(`the agent job's workflow failed (${terminalText(type)}): ${terminalText(message)}`);
    await writeJobSummary({ ...facts, outcome: { kind: 'failed', status, type, message, jobId } });
    return code;
  }
}

/** Runs the step for this process's `INPUT_*` and `GITHUB_*` variables: the exit code. Secrets are masked first. */
export async function runAction(): Promise<number> {
  for (const secret of secretValues()) maskValues(secret).forEach((value) => core.setSecret(value));
  let checked: Plan;
  try {
    checked = await plan(readInputs());
  } catch (err) {
    if (!(err instanceof UsageError) && !(err instanceof InvalidInputError)) throw err;
    const what = err instanceof InvalidInputError ? `invalid input: ${err.message}` : err.message;
    core.error(`${terminalText(what)}. Nothing was started.`);
    return ExitCode.Usage;
  }
  return start(checked);
}
