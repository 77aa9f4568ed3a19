/**
 * How to reach Temporal, for every process that does: the worker, the starter, the Action.
 *
 * The connection itself is read by @temporalio/envconfig (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
 * TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE, TEMPORAL_CONFIG_FILE), so a local server, a
 * self-hosted cluster and Temporal Cloud are configured the standard way. Two settings are this
 * project's own: TEMPORAL_API_KEY_FILE, a key file re-read when it changes, and
 * TEMPORAL_PAYLOAD_KEYS_FILE, the payload codec's key ring (src/payload-codec/).
 */
import { loadClientConnectConfig, type ClientConnectConfig } from '@temporalio/envconfig';
import * as z from 'zod/mini';
import { DEFAULT_TASK_QUEUE } from '../contract.js';
import { FileKeyRing } from '../payload-codec/index.js';
import { ConfigError, fileSetting, httpUrl, keyFile, notBoth, readSettings, type Env } from './settings.js';

/**
 * TEMPORAL_PAYLOAD_KEYS_FILE, which must hold a usable ring now, so that a process meant to seal
 * never starts writing plain text. Its error names the file and why, never a key.
 */
export const payloadKeysFile = fileSetting((path) => {
  new FileKeyRing(path);
  return path;
});

/** The Temporal settings that are this project's own, beside envconfig's. */
export const TemporalEnv = z.object({
  TEMPORAL_TASK_QUEUE: z._default(z.string(), DEFAULT_TASK_QUEUE),
  TEMPORAL_UI_URL: z.optional(httpUrl),
  TEMPORAL_API_KEY_FILE: z.optional(keyFile),
  TEMPORAL_PAYLOAD_KEYS_FILE: z.optional(payloadKeysFile),
});

/** How to reach Temporal, from envconfig, plus the task queue. */
export type TemporalSettings = ReturnType<typeof loadTemporalSettings>;

/**
 * Loads the Temporal connection settings. A key file's key goes to envconfig as TEMPORAL_API_KEY
 * would, so it replaces a profile's `api_key` and turns TLS on alike.
 */
export function loadTemporalSettings(env: Env = process.env) {
  notBoth(env, 'TEMPORAL_API_KEY', 'TEMPORAL_API_KEY_FILE');
  const settings = readSettings(TemporalEnv, env);
  const file = settings.TEMPORAL_API_KEY_FILE;
  const overrideEnvVars = Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
  if (file !== undefined) overrideEnvVars.TEMPORAL_API_KEY = file.key;
  let connect: ClientConnectConfig;
  try {
    connect = loadClientConnectConfig({ overrideEnvVars });
  } catch (err) {
    const why = `cannot load the Temporal connection settings: ${(err as Error).message}`;
    throw new ConfigError('TEMPORAL_*', why);
  }
  const address = connect.connectionOptions.address ?? 'localhost:7233';
  connect.connectionOptions.address = address;
  const namespace = connect.namespace ?? 'default';
  return {
    connect: { ...connect, namespace },
    namespace,
    /** Address without secrets, for logs and UI links. */
    address,
    taskQueue: settings.TEMPORAL_TASK_QUEUE,
    /** Base URL of the Temporal UI, for links printed by the starter. */
    uiUrl: settings.TEMPORAL_UI_URL ?? defaultUiUrl(address),
    /**
     * TEMPORAL_API_KEY_FILE: the key in `connect` is the file's at start, and the entry points keep
     * their connections on the file's current key (src/temporal-api-key.ts). Null without one.
     */
    apiKeyFile: file?.path ?? null,
    /**
     * TEMPORAL_PAYLOAD_KEYS_FILE: the payload codec's key ring, checked at load and re-read by the
     * codec when it changes. Null: the codec is off and payloads are stored in plain text.
     */
    payloadKeysFile: settings.TEMPORAL_PAYLOAD_KEYS_FILE ?? null,
  };
}

/** The dev server serves its UI on the gRPC port + 1000; other servers need TEMPORAL_UI_URL. */
function defaultUiUrl(address: string): string | null {
  const match = /^(localhost|127\.0\.0\.1):(\d+)$/.exec(address);
  return match ? `http://${match[1]}:${Number(match[2]) + 1000}` : null;
}
