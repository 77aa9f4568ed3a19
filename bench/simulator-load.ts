/**
 * GET throughput of the simulator: starts `src/simulator/main.ts` in a child process (so the load
 * generator and the server each have an event loop of their own), creates one agent job, runs
 * autocannon against get-job with a valid key, prints req/s and latency percentiles, and stops.
 *
 *   npx tsx bench/simulator-load.ts [--duration 10] [--connections 50]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const KEY = 'bench-key';
const PROJECT = 'bench-project';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '10' },
      connections: { type: 'string', default: '50' },
    },
  });
  const duration = Number(values.duration);
  const connections = Number(values.connections);
  if (!Number.isInteger(duration) || duration < 1 || !Number.isInteger(connections) || connections < 1) {
    throw new Error('usage: npx tsx bench/simulator-load.ts [--duration SECONDS] [--connections N]');
  }

  // --quiet: a log line per request would measure stdout, not the simulator. A long duration keeps
  // the job's status fixed for the whole run.
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/simulator/main.ts', '--port', '0', '--quiet', '--key', KEY, '--duration', '1h'],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = once(child, 'exit');
  try {
    const url = await listeningUrl(child.stdout);
    const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
    const created = await fetch(`${url}/v2/agent/${PROJECT}/job`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ prompt: 'Benchmark' }),
    });
    if (created.status !== 201) throw new Error(`create answered ${created.status}: ${await created.text()}`);
    const { id } = (await created.json()) as { id: string };

    const result = await autocannon({
      url: `${url}/v2/agent/${PROJECT}/job/${id}`,
      method: 'GET',
      headers: { authorization: headers.authorization },
      connections,
      duration,
    });
    const summary = {
      target: 'GET /v2/agent/{projectId}/job/{id}',
      connections,
      durationSeconds: duration,
      requestsPerSecond: { average: result.requests.average, p50: result.requests.p50 },
      latencyMs: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
      total: result.requests.total,
      non2xx: result.non2xx,
      errors: result.errors,
      timeouts: result.timeouts,
    };
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    process.stdout.write(
      `simulator GET: ${Math.round(result.requests.average)} req/s, p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms ` +
        `(${connections} connections, ${duration} s, ${result.non2xx} non-2xx, ${result.errors} errors)\n`,
    );
    if (result.non2xx > 0 || result.errors > 0) process.exitCode = 1;
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

/**
 * Resolves with the URL the child prints. The stream keeps being drained afterwards, so the child
 * never writes into a full or closed pipe.
 */
function listeningUrl(stdout: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (chunk: Buffer | string) => {
      seen += String(chunk);
      const url = /listening on (http:\/\/\S+)/.exec(seen)?.[1];
      if (url !== undefined) resolve(url);
    };
    stdout.on('data', onData);
    stdout.once('end', () => reject(new Error(`the simulator exited before listening: ${seen.trim()}`)));
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`simulator-load: ${(err as Error).message}\n`);
  process.exitCode = 1;
});
