/**
 * JSON log lines, one object per line, for the worker, the starter and the SDK. Metadata fields that
 * name a secret are replaced before anything is written.
 */
import { DefaultLogger, type LogEntry } from '@temporalio/worker';
import type { Logger, LogLevel, LogMetadata } from '@temporalio/common';
import type { WatchedFileEvent } from '../agent-api/watched-file.js';
import { jsonText } from '../escape.js';

const SECRET_FIELD = /^(api[-_]?key|authorization|token|password|secret|tlsKey|clientKey)$/i;

/** How deep `redact` looks into nested metadata; deeper values are replaced, never written unread. */
const MAX_DEPTH = 8;

/** `errorText: false` (the codec is on: decision 0021) leaves errors' messages out; name and failure type stay. */
export interface LogTextOptions {
  errorText: boolean;
}

/**
 * Copies `meta` with secret-named fields masked at any depth; errors keep name and message only, a
 * cycle reads `[circular]` and anything deeper than {@link MAX_DEPTH} `[too deep]`, so no path lets a
 * secret through unread.
 */
export function redact(
  meta: LogMetadata | undefined,
  options: LogTextOptions = { errorText: true },
): Record<string, unknown> {
  const seen = new Set<object>();
  const copy = (value: unknown, depth: number): unknown => {
    if (value instanceof Error) return errorFields(value, options);
    if (typeof value !== 'object' || value === null) return value;
    if (seen.has(value)) return '[circular]';
    if (depth > MAX_DEPTH) return '[too deep]';
    seen.add(value);
    try {
      if (Array.isArray(value)) return value.map((item) => copy(item, depth + 1));
      // Dates, URLs and the like write themselves as JSON: keep what they write, not their fields.
      const json = (value as { toJSON?: unknown }).toJSON;
      if (typeof json === 'function') return copy(json.call(value), depth);
      return Object.fromEntries(
        Object.entries(value).map(([key, field]) => [
          key,
          SECRET_FIELD.test(key) ? '[redacted]' : copy(field, depth + 1),
        ]),
      );
    } finally {
      seen.delete(value);
    }
  };
  return copy(meta ?? {}, 0) as Record<string, unknown>;
}

/** An error as a log line shows it. */
function errorFields(err: Error, options: LogTextOptions): Record<string, unknown> {
  if (options.errorText) return { name: err.name, message: err.message };
  const type = (err as { type?: unknown }).type;
  return typeof type === 'string' ? { name: err.name, type } : { name: err.name };
}

/**
 * Formats one entry as a JSON line, every control and format character escaped (jsonText), so a
 * value the API sent cannot act on the terminal that shows the log.
 */
export function formatLogLine(
  entry: Pick<LogEntry, 'level' | 'message' | 'meta'>,
  time: Date,
  options: LogTextOptions = { errorText: true },
): string {
  return jsonText({
    time: time.toISOString(),
    level: entry.level,
    msg: entry.message,
    ...redact(entry.meta, options),
  });
}

/** A Temporal logger that writes JSON lines to `stream` (stdout by default). */
export function createJsonLogger(
  level: LogLevel,
  stream: NodeJS.WritableStream = process.stdout,
  options: LogTextOptions = { errorText: true },
): DefaultLogger {
  return new DefaultLogger(level, (entry) => {
    stream.write(`${formatLogLine(entry, new Date(Number(entry.timestampNanos / 1_000_000n)), options)}\n`);
  });
}

/** The log lines of a key file's events, one per change of state, with the path and never the key. */
export function logKeyFileEvents(
  logger: Pick<Logger, 'info' | 'warn'>,
  variable: string,
  what: string,
): (event: WatchedFileEvent) => void {
  return (event) => {
    if (event.kind === 'reloaded') {
      logger.info(`${what} reloaded from ${variable}`, { path: event.path });
    } else if (event.kind === 'recovered') {
      logger.info(`${variable} usable again; the key is unchanged`, { path: event.path });
    } else {
      logger.warn(`${variable} not usable; keeping the current key`, {
        path: event.path,
        reason: event.reason,
      });
    }
  };
}
