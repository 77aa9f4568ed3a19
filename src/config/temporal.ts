/**
 * How to reach Temporal, for the worker, the starter and the Action: the connection as
 * @temporalio/envconfig reads it (the standard TEMPORAL_* settings and profiles), and this
 * project's own settings beside it (docs/configuration.md).
 */
import { loadClientConnectConfig, type ClientConnectConfig } from '@temporalio/envconfig';
import * as z from 'zod/mini';
import { DEFAULT_TASK_QUEUE } from '../contract.js';
import { FileKeyRing } from '../payload-codec/index.js';
import { ConfigError, fileSetting, httpUrl, keyFile, notBoth, readSettings, type Env } from './settings.js';

/** TEMPORAL_PAYLOAD_KEYS_FILE: a usable ring now, so that a process meant to seal never writes plain text. */
export const payloadKeysFile = fileSetting((path) => {
  new FileKeyRing(path);
  return path;
});

/** This project's own Temporal settings. */
export const TemporalEnv = z.object({
  TEMPORAL_TASK_QUEUE: z._default(z.string(), DEFAULT_TASK_QUEUE),
  TEMPORAL_UI_URL: z.optional(httpUrl),
  TEMPORAL_API_KEY_FILE: z.optional(keyFile),
  TEMPORAL_PAYLOAD_KEYS_FILE: z.optional(payloadKeysFile),
});

/** How to reach Temporal, from envconfig, plus the task queue. */
export type TemporalSettings = ReturnType<typeof loadTemporalSettings>;

/** Loads the Temporal settings; a key file's key goes to envconfig as TEMPORAL_API_KEY would (TLS alike). */
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
    /** TEMPORAL_API_KEY_FILE, whose current key the connections follow (src/temporal-api-key.ts). */
    apiKeyFile: file?.path ?? null,
    /** The payload codec's key ring, re-read when it changes; null: payloads are stored in plain text. */
    payloadKeysFile: settings.TEMPORAL_PAYLOAD_KEYS_FILE ?? null,
  };
}

/** The dev server serves its UI on the gRPC port + 1000; other servers need TEMPORAL_UI_URL. */
function defaultUiUrl(address: string): string | null {
  const match = /^(localhost|127\.0\.0\.1):(\d+)$/.exec(address);
  return match ? `http://${match[1]}:${Number(match[2]) + 1000}` : null;
}
