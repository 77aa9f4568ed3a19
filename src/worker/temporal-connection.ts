/** The worker's connection to Temporal, kept on the current key of TEMPORAL_API_KEY_FILE. */
import type { Logger } from '@temporalio/common';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import type { ApiKeySource } from '../agent-api/api-key.js';
import { followApiKey, type ApiKeyFollower } from '../temporal-api-key.js';

/**
 * Connects to Temporal. With a key file (`source`, from `temporalApiKeySource`) the connection is
 * opened with the file's key and follows the file: `NativeConnection` takes a new key only through
 * `setApiKey`, which the follower calls when the key changed; stop it before the connection closes.
 */
export async function connectTemporal(
  options: NativeConnectionOptions,
  source: ApiKeySource | null,
  logger: Pick<Logger, 'warn'>,
): Promise<{ connection: NativeConnection; follower: ApiKeyFollower | null }> {
  if (source === null) return { connection: await NativeConnection.connect(options), follower: null };
  const key = source.current();
  const connection = await NativeConnection.connect({ ...options, apiKey: key });
  const follower = followApiKey(source, connection, key, {
    onError: (err) => {
      logger.warn('could not give the Temporal connection the new key; trying again at the next check', {
        error: err instanceof Error ? err.message : String(err),
      });
    },
  });
  return { connection, follower };
}
