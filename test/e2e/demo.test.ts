/**
 * `npm run demo`, exactly as a newcomer runs it: it starts its own Temporal server with the UI,
 * the simulator and a worker, runs one agent job, prints the final record with its prLink and the
 * UI link, and stops everything it started. Here on the build from source of the pinned release,
 * CI's path (test/demo-run.ts); the other ways to a server are test/e2e/demo-temporal.test.ts's.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { test } from 'node:test';
import proto from '@temporalio/proto';
import { TEMPORAL_SERVER_VERSION, TEMPORAL_UI_VERSION } from '../../dev/temporal-versions.js';
import { demoEnv, pinnedBuildsCache, runDemo } from '../demo-run.js';
import { ROOT, waitFor } from '../harness.js';
import { holdsText } from '../json-strings.js';

const env = demoEnv({ XDG_CACHE_HOME: await pinnedBuildsCache() });

test('npm run demo prints a final record with a prLink and stops what it started', async () => {
  const { code, out } = await runDemo([], { env });
  assert.equal(code, 0, out);
  // The releases the compose file deploys, and the Node the Dockerfile runs.
  const server = TEMPORAL_SERVER_VERSION.replaceAll('.', '\\.');
  const ui = TEMPORAL_UI_VERSION.replaceAll('.', '\\.');
  assert.match(
    out,
    new RegExp(
      `started Temporal Server ${server} pid \\d+ on 127\\.0\\.0\\.1:\\d+ with Temporal UI ${ui} on http://127`,
    ),
  );
  assert.match(
    out,
    new RegExp(
      `versions: Temporal Server ${server}, Temporal UI ${ui}, TypeScript SDK \\d+\\.\\d+\\.\\d+, Node v24\\.`,
    ),
  );
  assert.match(out, /"status": "completed"/);
  assert.match(out, /prLink: https:\/\/github\.com\/[^/]+\/[^/]+\/pull\/\d+/);
  assert.match(out, /workflow in the UI: http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\//);
  assert.match(out, /stopped Temporal Server pid \d+/);
});

test('npm run demo -- --jobs 4 --budget 2/10s shows jobs queued for the project quota, and no 429', async () => {
  const { code, out } = await runDemo(['--jobs', '4', '--budget', '2/10s'], { env });
  assert.equal(code, 0, out);
  assert.match(out, /job \d: queued for the project's API budget: position \d of \d, earliest start \d{4}-/);
  assert.equal(out.match(/job \d: prLink: https:\/\/github\.com\//g)?.length, 4, out);
  assert.match(out, /the simulator saw 4 creates and 0 refused \(429\) for a budget of 2\/10s/);
  assert.match(out, /stopped Temporal Server pid \d+/);
});

test('npm run demo -- --codec --keep: the UI server is given the codec server, which opens the sealed input for the UI origin only; Ctrl-C stops it all', async () => {
  const marker = `demo-marker-${randomUUID()}`;
  // Its own process group, as a terminal runs it, so that the test's Ctrl-C reaches what it reaches.
  const demo = spawn(
    'npm',
    ['run', '--silent', 'demo', '--', '--codec', '--keep', '--prompt', `Document ${marker}`],
    {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  let out = '';
  demo.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  demo.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = once(demo, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  try {
    await waitFor(() => out.includes('--keep:') || demo.exitCode !== null, {
      what: 'the demo to finish its job and keep running',
      timeoutMs: 120_000,
      intervalMs: 200,
    });
    assert.match(out, /--keep:/, out);
    // The endpoint ends with the codec server's local token: the allowance for callers on this machine.
    const endpoint = /codec server on (http:\/\/127\.0\.0\.1:\d+\/[0-9a-f]+), the UI decodes through it/.exec(
      out,
    )?.[1];
    assert.ok(endpoint, out);
    assert.match(out, /key ring \S+ \(a throwaway one\)/);
    assert.match(
      out,
      new RegExp(
        `Temporal UI server pid \\d+ on http://127\\.0\\.0\\.1:\\d+ with its codec endpoint at ${endpoint}`,
      ),
    );
    const page =
      /workflow in the UI: (http:\/\/127\.0\.0\.1:\d+)\/namespaces\/default\/workflows\/(\S+)/.exec(out);
    assert.ok(page, out);
    const [, ui, workflowId] = page as unknown as [string, string, string];
    assert.ok(!out.includes(marker), 'no line the demo prints holds the prompt');

    const settings = (await (await fetch(`${ui}/api/v1/settings`)).json()) as { Codec: { Endpoint: string } };
    assert.equal(settings.Codec.Endpoint, endpoint, "the UI's codec endpoint");
    // What the UI's page gets from its server: the input sealed.
    const history = (await (
      await fetch(`${ui}/api/v1/namespaces/default/workflows/${workflowId}/history?maximumPageSize=1`)
    ).json()) as { history: { events: { workflowExecutionStartedEventAttributes: { input: unknown } }[] } };
    const input = history.history.events[0]!.workflowExecutionStartedEventAttributes.input;
    const inputJson = JSON.stringify(input);
    const sealed = proto.temporal.api.common.v1.Payloads.fromObject(
      input as Record<string, unknown>,
    ).payloads;
    assert.ok(sealed.length > 0, inputJson);
    for (const payload of sealed) {
      assert.equal(Buffer.from(payload.metadata!.encoding!).toString(), 'binary/encrypted', inputJson);
    }
    assert.ok(!holdsText(input, marker), 'the input holds the prompt in no value, as text or as bytes');
    // What the page's browser asks the codec server, from the UI's origin: the input opened.
    const decode = (origin: string) =>
      fetch(`${endpoint}/decode?preserveStorageRefs=true`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-namespace': 'default', origin },
        body: inputJson,
      });
    const opened = await decode(ui);
    assert.equal(opened.status, 200);
    assert.equal(opened.headers.get('access-control-allow-origin'), ui);
    const payload = ((await opened.json()) as { payloads: { data: string }[] }).payloads[0]!;
    assert.match(Buffer.from(payload.data, 'base64').toString('utf8'), new RegExp(marker));
    assert.equal((await decode('http://127.0.0.1:1')).status, 403, 'another origin is refused');
  } finally {
    if (demo.exitCode === null) process.kill(-demo.pid!, 'SIGINT');
  }
  // npm itself ends on the Ctrl-C; the demo goes on to stop what it started.
  const [code, signal] = await exited;
  assert.ok(code === 0 || signal === 'SIGINT', `npm exited with ${code ?? signal}`);
  const groupGone = () => {
    try {
      process.kill(-demo.pid!, 0);
      return false;
    } catch {
      return true;
    }
  };
  await waitFor(groupGone, { what: 'every process the demo started to exit', timeoutMs: 30_000 });
  assert.match(out, /stopped Temporal Server pid \d+/);
});
