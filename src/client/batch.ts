/**
 * Many agent jobs from one JSON Lines file, checked whole before anything starts, one stable key
 * per line: starting them and following them to their end (the starter's `batch` command).
 */
import { createHash } from 'node:crypto';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure, TerminatedFailure } from '@temporalio/common';
import {
  InvalidInputError,
  SearchAttributes,
  type AgentJobInput,
  type AgentJobResult,
  type StartPriority,
} from '../contract.js';
import { resolveInput } from '../input.js';
import { AgentJobError, ErrorName } from '../errors.js';
import { checkedKey, startAgentJob, type AgentJobHandle } from './start.js';
import { mapLimit } from './map-limit.js';

/** One valid line of a batch file. */
export interface BatchLine {
  /** 1-based line number in the file. */
  line: number;
  /** The line's `key`, or one derived from its content (see {@link derivedBatchKey}). */
  key: string;
  /** Whether the key was derived rather than given. */
  derivedKey: boolean;
  /** The workflow input: the line without `key`. */
  input: AgentJobInput;
}

/** The batch file is not valid; `problems` names every bad line. Nothing was started. */
export class BatchFileError extends AgentJobError {
  constructor(readonly problems: { line: number; message: string }[]) {
    super(
      ErrorName.BatchFile,
      `${problems.length} bad line${problems.length === 1 ? '' : 's'} in the batch file; nothing was started:\n` +
        problems.map((p) => `  line ${p.line}: ${p.message}`).join('\n'),
    );
  }
}

/**
 * The key of a line that has none: a hash of its input, object keys sorted, so the same line
 * gives the same workflow on every run, whatever its key order or position in the file.
 */
export function derivedBatchKey(input: Record<string, unknown>): string {
  const digest = createHash('sha256').update(canonicalJson(input)).digest('hex');
  return `line-${digest.slice(0, 32)}`;
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Parses a JSON Lines batch, one `{ "projectId", "prompt", "key"?, ...input }` per line, blank lines
 * skipped: every line is checked with the workflow's input rules, and two with the same project
 * and key are refused. Throws {@link BatchFileError} listing every bad line.
 */
export function parseBatchFile(text: string): BatchLine[] {
  const lines: BatchLine[] = [];
  const problems: { line: number; message: string }[] = [];
  const seen = new Map<string, number>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === '') return;
    const problem = (message: string) => problems.push({ line, message });
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (err) {
      problem(`not JSON (${(err as Error).message})`);
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      problem('must be one JSON object with projectId and prompt');
      return;
    }
    const { key: given, ...input } = value as Record<string, unknown>;
    let key: string | undefined;
    try {
      key = checkedKey(given as string | undefined);
      const resolved = resolveInput(input);
      if (resolved.jobId !== undefined && resolved.prompt !== undefined) {
        problem('a follow-up (jobId with prompt) cannot be batched; send it with the message command');
        return;
      }
    } catch (err) {
      if (!(err instanceof InvalidInputError)) throw err;
      problem(err.message);
      return;
    }
    const lineKey = key ?? derivedBatchKey(input);
    const identity = `${String(input.projectId)}\0${lineKey}`;
    const earlier = seen.get(identity);
    if (earlier !== undefined) {
      problem(
        key === undefined
          ? `the same job as line ${earlier}; give each line a distinct key`
          : `key "${key}" is already used on line ${earlier} in this project`,
      );
      return;
    }
    seen.set(identity, line);
    lines.push({
      line,
      key: lineKey,
      derivedKey: key === undefined,
      input: input as unknown as AgentJobInput,
    });
  });
  if (problems.length > 0) throw new BatchFileError(problems);
  if (lines.length === 0) throw new BatchFileError([{ line: 1, message: 'the file holds no job' }]);
  return lines;
}

/** A started line: its workflow. */
export interface StartedBatchLine extends BatchLine {
  handle: AgentJobHandle;
}

/**
 * Starts one workflow per line through {@link startAgentJob} with the line's key, `concurrency` at
 * a time (default 16), at `batch` priority unless `priority` says otherwise.
 */
export function startBatch(
  client: Client,
  lines: BatchLine[],
  options: { taskQueue?: string; concurrency?: number; priority?: StartPriority } = {},
): Promise<StartedBatchLine[]> {
  return mapLimit(lines, options.concurrency ?? 16, async (line) => ({
    ...line,
    handle: await startAgentJob(client, line.input, {
      key: line.key,
      taskQueue: options.taskQueue,
      priority: options.priority ?? 'batch',
    }),
  }));
}

/** Where a batch line stands, as the progress display counts it. */
export type BatchPhase = 'queued' | 'active' | 'completed' | 'failed';

/** A line's outcome once its workflow closed. */
export interface BatchOutcome {
  phase: 'completed' | 'failed';
  result: AgentJobResult | null;
  /** Failure type (`AgentJobFailed`, `AgentJobTimedOut`, `Cancelled`, ...) when it failed. */
  failureType: string | null;
  failureMessage: string | null;
  /** The error the workflow failed with, for callers that map it to an exit code. */
  error: WorkflowFailedError | null;
}

/** The failure type a caller matches on: the `ApplicationFailure`'s, or `Cancelled`, `Terminated`. */
export function failureTypeOf(err: { cause?: Error }): string {
  const cause = err.cause;
  if (cause instanceof CancelledFailure) return 'Cancelled';
  if (cause instanceof TerminatedFailure) return 'Terminated';
  if (cause instanceof ApplicationFailure) return cause.type ?? 'ApplicationFailure';
  return cause?.name ?? 'Unknown';
}

/**
 * Follows every started line until its workflow closes, calling `onChange` with every line's phase
 * when one changes: `describe` (no worker involved) tells running from closed and, by the
 * `AgentJobId` search attribute, queued from active. Resolves with the outcomes in line order.
 */
export async function followBatch(
  lines: StartedBatchLine[],
  onChange: (phases: BatchPhase[]) => void,
  options: { intervalMs?: number; concurrency?: number } = {},
): Promise<BatchOutcome[]> {
  const phases: BatchPhase[] = lines.map(() => 'queued');
  const outcomes: Array<BatchOutcome | undefined> = lines.map(() => undefined);
  // Hundreds of workflows: one round of describes takes time itself, so rounds never overlap
  // and a big batch is looked at less often than a small one.
  const intervalMs = options.intervalMs ?? Math.max(500, lines.length * 5);
  onChange([...phases]);
  for (;;) {
    const open = lines.map((_, index) => index).filter((index) => outcomes[index] === undefined);
    let changed = false;
    await mapLimit(open, options.concurrency ?? 16, async (index) => {
      const line = lines[index] as StartedBatchLine;
      const description = await line.handle.describe();
      let phase: BatchPhase;
      if (description.status.name === 'RUNNING') {
        phase = description.typedSearchAttributes.get(SearchAttributes.jobId) ? 'active' : 'queued';
      } else {
        const outcome = await outcomeOf(line.handle);
        outcomes[index] = outcome;
        phase = outcome.phase;
      }
      if (phases[index] !== phase) {
        phases[index] = phase;
        changed = true;
      }
    });
    if (changed) onChange([...phases]);
    if (outcomes.every((o) => o !== undefined)) return outcomes;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

async function outcomeOf(handle: AgentJobHandle): Promise<BatchOutcome> {
  try {
    const result = await handle.result();
    return { phase: 'completed', result, failureType: null, failureMessage: null, error: null };
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) throw err;
    return {
      phase: 'failed',
      result: null,
      failureType: failureTypeOf(err),
      failureMessage: err.cause?.message ?? err.message,
      error: err,
    };
  }
}
