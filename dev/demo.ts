/**
 * `npm run demo`: one agent job end to end on embedded defaults. Finds or starts a Temporal server
 * with the UI (dev/demo-temporal.ts: TEMPORAL_ADDRESS, a CLI on PATH, the SDK's download of one, or
 * the build from source), the API simulator (unless AGENT_API_BASE_URL is set) and
 * a worker process, starts one workflow through the client library, shows its progress, prints
 * the final record with its prLink and the UI link, and stops what it started (unless --keep).
 *
 *   npm run demo -- [--prompt "<text>"] [--project <id>] [--jobs <n>] [--budget <uses>/<window>] [--codec] [--keep]
 *
 * With TEMPORAL_PAYLOAD_KEYS_FILE set, or `--codec` (a throwaway key ring in a temporary
 * directory), payloads are sealed (docs/payload-codec.md): the demo also starts the codec server
 * on loopback and gives its URL to the UI as the codec endpoint, so the UI shows them decoded.
 *
 * `--jobs 6 --budget 2/10s` shows the project quota: the simulator allows 2 uses per 10 s and
 * answers a 429 without Retry-After past that, as the live API does; the worker's quota is set to
 * the same budget, so the jobs queue (their place is printed) and none is refused.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { followAgentJob, startAgentJob, workflowUiUrl } from '../src/client/index.js';
import { loadTemporalSettings } from '../src/config/temporal.js';
import { payloadDataConverter } from '../src/payload-codec/index.js';
import { jsonText, terminalText } from '../src/escape.js';
import { quotaLimit, type QuotaLimit } from '../src/quota/settings.js';
import { startSimulator, type RunningSimulator } from '../src/simulator/index.js';
import { startDemoTemporal } from './demo-temporal.js';
import { freePorts, sdkVersion } from './dev-server.js';

const DEFAULT_PROMPT = 'Add a "Quickstart" page that shows how to install the CLI and run a first command.';
const DEMO_KEY = 'demo-local-key';

const say = (line: string) => process.stdout.write(`[demo] ${line}\n`);

const { values } = parseArgs({
  options: {
    prompt: { type: 'string', default: DEFAULT_PROMPT },
    project: { type: 'string', default: 'demo-docs' },
    jobs: { type: 'string', default: '1' },
    budget: { type: 'string' },
    codec: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
  strict: true,
});

/** The options as numbers and limits, or a message a person can act on. */
function demoOptions(): { jobs: number; budget: QuotaLimit | null } {
  const jobs = Number(values.jobs);
  if (!Number.isInteger(jobs) || jobs < 1 || jobs > 100) {
    throw new Error(`--jobs must be a whole number from 1 to 100, not "${values.jobs}"`);
  }
  const parsed = quotaLimit.safeParse(values.budget ?? 'off');
  if (!parsed.success) throw new Error(`--budget ${parsed.error.issues[0]?.message}`);
  const budget = parsed.data;
  if (budget !== null && budget.windowMs % 1000 !== 0) {
    throw new Error(
      `--budget's window must be whole seconds (the simulator counts in seconds), not "${values.budget}"`,
    );
  }
  return { jobs, budget };
}

const cleanups: Array<() => Promise<void>> = [];

/**
 * Starts one of the project's entry points (`src/worker.ts`, `src/codec-server.ts`) and waits for
 * the log line `ready` that says it serves.
 */
async function startEntry(
  script: string,
  env: NodeJS.ProcessEnv,
  ready: string,
  name: string,
): Promise<ChildProcess> {
  const entry = fileURLToPath(new URL(script, import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let buffered = '';
  const started = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (line.includes(ready)) resolve();
        if (process.env.DEMO_VERBOSE) process.stdout.write(`[${name}] ${line}\n`);
      }
    });
    child.once('exit', (code) =>
      reject(new Error(`the ${name} exited with code ${code} before it was ready`)),
    );
  });
  await started;
  return child;
}

/**
 * The payload key ring: TEMPORAL_PAYLOAD_KEYS_FILE's, or with `--codec` a throwaway one (a fresh
 * random key in a temporary directory, removed at the end); null when the codec is off.
 */
function payloadKeyRing(): { path: string; throwaway: boolean } | null {
  const configured = process.env.TEMPORAL_PAYLOAD_KEYS_FILE?.trim();
  if (configured) return { path: configured, throwaway: false };
  if (!values.codec) return null;
  const dir = mkdtempSync(join(tmpdir(), 'agent-job-demo-keys-'));
  cleanups.push(() => Promise.resolve(rmSync(dir, { recursive: true, force: true })));
  const path = join(dir, 'payload-keys');
  writeFileSync(path, `demo-1 ${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
  return { path, throwaway: true };
}

/**
 * Starts the codec server on loopback (its local-only allowance: the local token in the endpoint's
 * path, which is what the dev UI can send) for pages of `uiUrl`, over the ring in `env`.
 */
async function startCodecServer(
  env: NodeJS.ProcessEnv,
  port: number,
  uiUrl: string | null,
  localToken: string,
): Promise<ChildProcess> {
  const origins = uiUrl === null ? [] : [uiUrl, uiUrl.replace('//127.0.0.1:', '//localhost:')];
  const codecEnv: NodeJS.ProcessEnv = {
    ...env,
    CODEC_SERVER_LOCAL_TOKEN: localToken,
    CODEC_SERVER_ADDRESS: `127.0.0.1:${port}`,
    CODEC_SERVER_ALLOWED_ORIGINS: origins.join(','),
  };
  for (const name of Object.keys(codecEnv)) if (name.startsWith('CODEC_SERVER_OIDC_')) delete codecEnv[name];
  return startEntry('../src/codec-server.ts', codecEnv, '"codec server running"', 'codec server');
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
}

async function main(): Promise<number> {
  const options = demoOptions();
  const ring = payloadKeyRing();
  // Known before the UI starts, which takes it as its codec endpoint.
  const codecPort = ring === null ? null : (await freePorts(1))[0]!;
  const localToken = randomBytes(16).toString('hex');
  const codecEndpoint = codecPort === null ? undefined : `http://127.0.0.1:${codecPort}/${localToken}`;
  const temporal = await startDemoTemporal({ codecEndpoint, log: say });
  cleanups.push(() => temporal.stop());
  const temporalAddress = temporal.address;
  const uiUrl = temporal.uiUrl;
  if (temporal.described !== null) {
    say(`versions: ${temporal.described}, TypeScript SDK ${sdkVersion()}, Node ${process.version}`);
  }

  let simulator: RunningSimulator | null = null;
  let apiBaseUrl = process.env.AGENT_API_BASE_URL;
  if (!apiBaseUrl) {
    simulator = await startSimulator({
      apiKeys: [DEMO_KEY],
      defaultScenario: { durationMs: 8_000, outcome: 'pr' },
      log: false,
      ...(options.budget && {
        budget: { uses: options.budget.uses, windowSeconds: options.budget.windowMs / 1000 },
        retryAfter: false,
      }),
    });
    cleanups.push(() => simulator!.stop());
    apiBaseUrl = simulator.url;
    say(
      `started the agent job API simulator on ${apiBaseUrl} (set AGENT_API_BASE_URL and AGENT_API_KEY for the live API)`,
    );
  } else {
    say(`using the agent job API at ${apiBaseUrl}`);
  }

  const [healthPort, metricsPort] = await freePorts(2);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TEMPORAL_ADDRESS: temporalAddress,
    AGENT_API_BASE_URL: apiBaseUrl,
    HEALTH_ADDRESS: `127.0.0.1:${healthPort}`,
    METRICS_ADDRESS: `127.0.0.1:${metricsPort}`,
  };
  if (simulator) {
    env.AGENT_API_KEY = DEMO_KEY;
    delete env.AGENT_API_KEY_FILE;
  }
  if (uiUrl) env.TEMPORAL_UI_URL = uiUrl;
  if (options.budget) env.AGENT_API_PROJECT_QUOTA = values.budget;
  if (ring !== null && codecPort !== null) {
    env.TEMPORAL_PAYLOAD_KEYS_FILE = ring.path;
    const codecServer = await startCodecServer(env, codecPort, uiUrl, localToken);
    cleanups.push(() => stopProcess(codecServer));
    say(
      `payload codec on, key ring ${ring.throwaway ? `${ring.path} (a throwaway one)` : ring.path}: ` +
        `codec server on ${codecEndpoint}` +
        (temporal.described !== null ? ', the UI decodes through it' : '') +
        `; temporal workflow show --codec-endpoint ${codecEndpoint} ...`,
    );
  }
  say('starting a worker');
  const worker = await startEntry('../src/worker.ts', env, '"worker running"', 'worker');
  cleanups.push(() => stopProcess(worker));
  say(
    `worker ready (health http://${env.HEALTH_ADDRESS}/readyz, metrics http://${env.METRICS_ADDRESS}/metrics)`,
  );

  const settings = loadTemporalSettings(env);
  const connection = await Connection.connect(settings.connect.connectionOptions);
  cleanups.push(() => connection.close());
  // The worker inherits TEMPORAL_PAYLOAD_KEYS_FILE from this environment: with it set, the demo's
  // client seals and opens with the same ring, or it could not read the results.
  const client = new Client({
    connection,
    namespace: settings.namespace,
    dataConverter: payloadDataConverter(settings.payloadKeysFile),
  });
  const handles = [];
  for (let i = 1; i <= options.jobs; i++) {
    const prompt = options.jobs === 1 ? values.prompt : `${values.prompt} (job ${i} of ${options.jobs})`;
    const handle = await startAgentJob(
      client,
      { projectId: values.project, prompt },
      { taskQueue: settings.taskQueue },
    );
    const ui = workflowUiUrl(uiUrl, settings.namespace, handle.workflowId);
    say(`started workflow ${handle.workflowId}`);
    if (ui && i === 1) say(`watch it in the Temporal UI: ${ui}`);
    handles.push(handle);
  }
  const name = (i: number) => (options.jobs === 1 ? '' : `job ${i + 1}: `);
  const outcomes = await Promise.all(
    handles.map(async (handle, i) => {
      try {
        // With the live API (AGENT_API_BASE_URL), what it sends reaches the terminal escaped.
        const result = await followAgentJob(handle, (p) =>
          say(
            p.phase === 'queued' && p.queue
              ? `${name(i)}queued for the project's API budget: position ${p.queue.position} of ` +
                  `${p.queue.queueLength}, earliest start ${p.queue.earliestStartAt}`
              : `${name(i)}${p.phase}: agent job ${terminalText(p.jobId ?? '(creating)')} ` +
                  `${terminalText(p.lastRecord?.status ?? '')} after ${p.polls} polls`,
          ),
        );
        if (options.jobs === 1) say(`final record:\n${jsonText(result.job, 2)}`);
        say(`${name(i)}prLink: ${terminalText(result.prLink ?? '(none: the agent changed no files)')}`);
        if (result.resent > 0) {
          say(
            `${name(i)}warning: ${result.resent} calls sent again after an unknown outcome: a duplicate job is possible`,
          );
        }
        return true;
      } catch (err) {
        if (!(err instanceof WorkflowFailedError)) throw err;
        say(`${name(i)}the workflow failed: ${terminalText(err.cause?.message ?? err.message)}`);
        return false;
      }
    }),
  );
  if (simulator && options.budget) {
    const stats = simulator.stats();
    say(
      `the simulator saw ${stats.requestsPerEndpoint.create ?? 0} creates and ` +
        `${stats.requestsPerStatus['429'] ?? 0} refused (429) for a budget of ${values.budget}`,
    );
  }
  const ui = workflowUiUrl(uiUrl, settings.namespace, handles[0]!.workflowId);
  if (ui) say(`workflow in the UI: ${ui}`);
  return outcomes.every(Boolean) ? 0 : 1;
}

async function cleanup(): Promise<void> {
  for (const stop of cleanups.reverse()) await stop();
}

async function keepRunning(): Promise<void> {
  say('--keep: the server, simulator and worker keep running; press Ctrl-C to stop them');
  // Handlers that stay: a Ctrl-C reaches tsx too, which passes it on, so a second SIGINT arrives
  // while the cleanup runs, and without a handler it would end the demo before it has stopped all.
  await new Promise<void>((resolve) => {
    process.on('SIGINT', () => resolve());
    process.on('SIGTERM', () => resolve());
  });
}

main()
  .then(async (code) => {
    if (values.keep) await keepRunning();
    await cleanup();
    process.exit(code);
  })
  .catch(async (err: unknown) => {
    process.stderr.write(`[demo] failed: ${err instanceof Error ? err.message : String(err)}\n`);
    await cleanup();
    process.exit(1);
  });
