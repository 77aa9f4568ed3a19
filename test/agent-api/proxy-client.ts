/**
 * The API client as a worker runs it, for test/agent-api/proxy.test.ts: in a process of its own, so
 * that the proxy variables and NODE_EXTRA_CA_CERTS are the process's environment, read by the
 * process-wide dispatcher (`getDispatcher`). Creates an agent job in `PROJECT_ID` at
 * `AGENT_API_BASE_URL`, reads it back on the same connection, and prints one JSON line: `{ created, read }`, or
 * `{ error: { name, type, message, inspected } }` (exit code 1).
 */
import { setImmediate } from 'node:timers/promises';
import { inspect } from 'node:util';
import { AgentApiClient, AgentApiError, closeDispatcher } from '../../src/agent-api/index.js';

const { AGENT_API_BASE_URL: baseUrl, AGENT_API_KEY: apiKey, PROJECT_ID: projectId } = process.env;
if (!baseUrl || !apiKey || !projectId)
  throw new Error('AGENT_API_BASE_URL, AGENT_API_KEY and PROJECT_ID are required');

const client = new AgentApiClient({ baseUrl, apiKey });
try {
  const created = await client.createJob(projectId, 'Through the proxy', {
    idempotencyKey: `proxy-${projectId}`,
  });
  // A worker's calls are never back to back; without this turn, undici's pool, which marks a
  // connection idle just after its response ends, would open a second one for the read.
  await setImmediate();
  const read = await client.getJob(projectId, created.id);
  process.stdout.write(`${JSON.stringify({ created, read })}\n`);
} catch (err) {
  const error = err instanceof Error ? err : new Error(String(err));
  process.stdout.write(
    `${JSON.stringify({
      error: {
        name: error.name,
        type: err instanceof AgentApiError ? err.type : null,
        message: error.message,
        inspected: inspect(err, { depth: 10 }),
      },
    })}\n`,
  );
  process.exitCode = 1;
} finally {
  await closeDispatcher();
}
