/**
 * The Temporal API key from a file (`TEMPORAL_API_KEY_FILE`), kept current on open connections so
 * that a rotated key needs no restart. The file is read by the same {@link FileApiKey} as the
 * agent API key's (a `stat` at most once a second on use, a read when it changed, the symlink swap
 * of a Kubernetes Secret seen as another file, the last good key kept while the file is unusable).
 *
 * The two connections take a new key differently:
 * - a client `Connection` (the starter) calls its `apiKey` function on every request, so it is
 *   given `() => source.current()` and needs nothing else ({@link clientConnectionOptions});
 * - the worker's `NativeConnection` holds a key inside the SDK's core and takes a new one only
 *   through `setApiKey`, so {@link followApiKey} checks the source every few seconds and calls it
 *   when the key changed.
 *
 * No key ever appears in a message, an event or a log line of this module.
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
 * The key file (TEMPORAL_API_KEY_FILE) as a source re-read when it changes, or null without one:
 * the key (if any) is fixed (`TEMPORAL_API_KEY`, a profile's `api_key`). `onEvent` hears of a new
 * key and of a file that became unusable, never the key itself.
 * @throws ApiKeyFileError (src/agent-api/api-key.ts) when the file has no usable key now; its message
 *   names the file, not the key
 */
export function temporalApiKeySource(
  apiKeyFile: string | null,
  onEvent?: (event: ApiKeyFileEvent) => void,
): FileApiKey | null {
  return apiKeyFile === null ? null : new FileApiKey(apiKeyFile, { onEvent });
}

/**
 * The options of a client `Connection`: with a key file, the key is read from `source` on every
 * request (the SDK calls an `apiKey` function per call), so a rotation reaches the next request.
 */
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
  /**
   * Gives the connection the source's key when it differs from the last one given; true when it
   * did. Checks already under way are joined, not repeated.
   */
  check(): Promise<boolean>;
  /** Stops the periodic checks; the worker calls it at shutdown. */
  stop(): void;
}

/** Options of {@link followApiKey}. */
export interface FollowApiKeyOptions {
  /** Time between two checks. Default {@link TEMPORAL_KEY_CHECK_INTERVAL_MS}. */
  intervalMs?: number;
  /**
   * A periodic check whose `setApiKey` failed. The new key is given again at the next check, so
   * a passing failure costs one interval.
   */
  onError: (err: unknown) => void;
}

/**
 * Keeps `connection`'s API key equal to `source`'s: checks every `intervalMs` on a timer that does
 * not keep the process alive, and calls `setApiKey` only when the key changed. `connectedWith` is
 * the key the connection was opened with.
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
