/**
 * The codec server process (`npm run codec-server`, or `node lib/codec-server.js` in the image):
 * reads its configuration, serves Temporal's `/encode` and `/decode` over the payload codec with
 * the worker's key ring (re-read when it changes), and runs until SIGTERM or SIGINT. The HTTP
 * logic is in src/payload-codec/codec-server.ts; docs/payload-codec.md says how to deploy it.
 */
import { loadCodecServerConfig, type CodecServerConfig } from './config/codec-server.js';
import { createJsonLogger, logKeyFileEvents } from './observability/logger.js';
import { AesGcmPayloadCodec, FileKeyRing, startCodecServer } from './payload-codec/index.js';
import { runProcess } from './worker/process-entry.js';

async function run(config: CodecServerConfig): Promise<void> {
  const logger = createJsonLogger(config.logLevel);
  const ring = new FileKeyRing(config.payloadKeysFile, {
    onEvent: logKeyFileEvents(logger, 'TEMPORAL_PAYLOAD_KEYS_FILE', 'payload key ring'),
  });
  const server = await startCodecServer(new AesGcmPayloadCodec(ring), config.server, logger);
  const { accessToken, localToken } = config.server;
  logger.info('codec server running', {
    endpoint: server.url,
    // Not named "authorization": the logger masks fields of that name.
    callers: accessToken === null ? 'local only (loopback, with the local token)' : 'oidc access token',
    issuer: accessToken?.issuer,
    audience: accessToken?.audience,
    requiredClaim: accessToken?.requiredClaim ? accessToken.requiredClaim.name : undefined,
    allowedOrigins: config.server.allowedOrigins,
    allowCredentials: config.server.allowCredentials,
    payloadKeysFile: config.payloadKeysFile,
  });
  // To the terminal that started it, never to the log: a log may be collected where others read it.
  if (localToken !== null && process.stderr.isTTY)
    process.stderr.write(
      `codec endpoint for the UI and the CLI (keep it to yourself): ${server.url}/${localToken}\n`,
    );
  const signal = await new Promise<string>((resolve) => {
    // Handlers that stay: a second signal during the close must not end the process half way.
    for (const name of ['SIGTERM', 'SIGINT'] as const) process.on(name, () => resolve(name));
  });
  await server.close();
  logger.info('codec server stopped', { signal });
}

runProcess('codec server', loadCodecServerConfig, run);
