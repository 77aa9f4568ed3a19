/**
 * JSON log lines for the worker, the starter and the SDK (through `Runtime.install`). One object
 * per line, so log pipelines parse them without rules. Metadata fields that name a secret are
 * replaced before anything is written: the API key must never reach a log line.
 */
import { DefaultLogger, type LogEntry } from '@temporalio/worker';
import type { LogLevel, LogMetadata } from '@temporalio/common';

const SECRET_FIELD = /^(api[-_]?key|authorization|token|password|secret|tlsKey|clientKey)$/i;

/** Copies `meta` with secret-named fields masked; values that are errors keep message and type only. */
export function redact(meta: LogMetadata | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(meta ?? {})) {
    if (SECRET_FIELD.test(key)) out[key] = '[redacted]';
    else if (value instanceof Error) out[key] = { name: value.name, message: value.message };
    else out[key] = value;
  }
  return out;
}

/** Formats one entry as a JSON line. */
export function formatLogLine(entry: Pick<LogEntry, 'level' | 'message' | 'meta'>, time: Date): string {
  return JSON.stringify({
    time: time.toISOString(),
    level: entry.level,
    msg: entry.message,
    ...redact(entry.meta),
  });
}

/** A Temporal logger that writes JSON lines to `stream` (stdout by default). */
export function createJsonLogger(
  level: LogLevel,
  stream: NodeJS.WritableStream = process.stdout,
): DefaultLogger {
  return new DefaultLogger(level, (entry) => {
    stream.write(`${formatLogLine(entry, new Date(Number(entry.timestampNanos / 1_000_000n)))}\n`);
  });
}
