/**
 * The Temporal API key from `TEMPORAL_API_KEY_FILE`, kept current on open connections so a rotated
 * key needs no restart: a client `Connection` reads it per request, the worker's `NativeConnection`
 * is given it by {@link followApiKey}. No key appears in a message or a log line.
 */
import type { ConnectionOptions } from '@temporalio/client';
import { FileApiKey, type ApiKeySource } from './agent-api/api-key.js';
import type { WatchedFileEvent } from './agent-api/watched-file.js';

/**
 * How often the worker checks the key file for its connection. A check is one `stat`; a Secret's
 * update takes the kubelet a minute or more to show, so a shorter wait gains nothing, and a much
 * longer one leaves the worker on a revoked key for longer than needed.
 */
export const TEMPORAL_KEY_CHECK_INTERVAL_MS = 5_000;

/**
 * The key file as a source re-read when it changes, or null without one.
 * @throws ApiKeyFileError when the file has no usable key now
 */
export function temporalApiKeySource(
  apiKeyFile: string | null,
  onEvent?: (event: WatchedFileEvent) => void,
): FileApiKey | null {
  return apiKeyFile === null ? null : new FileApiKey(apiKeyFile, { onEvent });
}

/** The options of a client `Connection`: with a key file, its key is read on every request. */
export function clientConnectionOptions(
  options: ConnectionOptions,
  source: ApiKeySource | null,
): ConnectionOptions {
  return source === null ? options : { ...options, apiKey: () => source.current() };
}

/** A running {@link followApiKey}: `stop()` at shutdown. */
export type ApiKeyFollower = ReturnType<typeof followApiKey>;

/**
 * Keeps `connection`'s API key equal to `source`'s (`connectedWith`: the key it opened with),
 * checking on an unref'd timer; a check whose `setApiKey` failed goes to `onError`, and the next
 * one gives the key again. `check()` gives the key now when it changed (true), joining one under way.
 */
export function followApiKey(
  source: ApiKeySource,
  connection: { setApiKey(key: string): Promise<void> },
  connectedWith: string,
  options: { intervalMs?: number; onError: (err: unknown) => void },
) {
  let given = connectedWith;
  let underway: Promise<boolean> | null = null;
  const apply = async (): Promise<boolean> => {
    const key = source.current();
    if (key === given) return false;
    await connection.setApiKey(key);
    given = key;
    return true;
  };
  const check = (): Promise<boolean> => {
    underway ??= apply().finally(() => {
      underway = null;
    });
    return underway;
  };
  const timer = setInterval(() => {
    check().catch(options.onError);
  }, options.intervalMs ?? TEMPORAL_KEY_CHECK_INTERVAL_MS);
  timer.unref();
  return { check, stop: () => clearInterval(timer) };
}
