/**
 * The starter's `batch` command: one agent job per line of a JSON Lines file, started together
 * (src/client/batch.ts), and with --wait live counts and a summary table.
 */
import { readFileSync } from 'node:fs';
import { SingleBar } from 'cli-progress';
import { BatchFileError, followBatch, parseBatchFile, startBatch, type BatchPhase } from '../client/batch.js';
import { jsonText, terminalText } from '../escape.js';
import { UsageError } from '../errors.js';
import { checkNotifyTargetName } from '../input.js';
import { err, ExitCode, out, resentWarning, withClient, type CommonOptions } from './commands.js';

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

/** `batch`: starts every line's job, or none when a line is invalid; --wait follows them all. */
export async function runBatch(file: string, options: CommonOptions & { notify?: string }): Promise<number> {
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
  if (options.notify !== undefined) {
    // After the keys are derived: --notify on a re-run attaches to the same jobs.
    const notify = checkNotifyTargetName(options.notify, '--notify');
    lines = lines.map((line) =>
      line.input.notify === undefined ? { ...line, input: { ...line.input, notify } } : line,
    );
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
