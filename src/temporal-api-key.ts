/**
 * The Temporal API key from a file (`TEMPORAL_API_KEY_FILE`), read by the agent API key's
 * {@link FileApiKey} and kept current on open connections, so a rotated key needs no restart: a
 * client `Connection` calls its `apiKey` function per request ({@link clientConnectionOptions});
 * the worker's `NativeConnection` takes a new key only through `setApiKey`, which
 * {@link followApiKey} calls when the file's key changed. No key appears in a message or a log line.
 */
import type { ConnectionOptions } from '@temporalio/client';
import { FileApiKey, type ApiKeyFileEvent, type ApiKeySource } from './agent-api/api-key.js';

/**
 * How often the worker checks the key file for its connection: 5 s. A check is one `stat`; a
 * Secret's update takes the kubelet up to a minute or more to show, so a shorter wait gains
 * nothing, and a much longer one would leave the worker on a revoked key (its polls failing and
 * retried by the SDK) for longer than needed.
 */
export const TEMPORAL_KEY_CHECK_INTERVAL_MS = 5_000;

/**
 * The key file as a source re-read when it changes, or null without one (a fixed key, if any).
 * `onEvent` hears of a new key and of a file that became unusable, never the key itself.
 * @throws ApiKeyFileError when the file has no usable key now; its message names the file
 */
export function temporalApiKeySource(
  apiKeyFile: string | null,
  onEvent?: (event: ApiKeyFileEvent) => void,
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

/** What {@link followApiKey} needs of a connection: the worker's `NativeConnection` has it. */
export interface ApiKeyConnection {
  setApiKey(key: string): Promise<void>;
}

/** A running {@link followApiKey}. */
export interface ApiKeyFollower {
  /** Gives the connection the source's key when it changed (true); a check under way is joined. */
  check(): Promise<boolean>;
  /** Stops the periodic checks; the worker calls it at shutdown. */
  stop(): void;
}

/** Options of {@link followApiKey}. */
export interface FollowApiKeyOptions {
  /** Time between two checks. Default {@link TEMPORAL_KEY_CHECK_INTERVAL_MS}. */
  intervalMs?: number;
  /** A periodic check whose `setApiKey` failed: the next check gives the key again. */
  onError: (err: unknown) => void;
}

/**
 * Keeps `connection`'s API key equal to `source`'s (`connectedWith`: the key it opened with),
 * checking every `intervalMs` on a timer that does not keep the process alive.
 */
export function followApiKey(
  source: ApiKeySource,
  connection: ApiKeyConnection,
  connectedWith: string,
  options: FollowApiKeyOptions,
): ApiKeyFollower {
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
