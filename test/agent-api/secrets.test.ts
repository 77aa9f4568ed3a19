/**
 * The API key never leaves the Authorization header: not through an error's message, its JSON, its
 * inspection (cause included), its stack, nor through the client object itself.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inspect } from 'node:util';
import { AgentApiClient, AgentApiError, createDispatcher } from '../../src/agent-api/index.js';
import type { RunningSimulator } from '../../src/simulator/index.js';
import { onCleanup, startTestSimulator, uniqueId } from '../harness.js';

const API_KEY = `mint_${uniqueId('very-secret')}`;
const dispatcher = createDispatcher({ headersTimeoutMs: 300, bodyTimeoutMs: 300 });
onCleanup(() => dispatcher.close());
const sim = await startTestSimulator({ apiKeys: [API_KEY] });
const client = new AgentApiClient({ baseUrl: sim.url, apiKey: API_KEY, dispatcher });

/** Every way an error gets turned into text by a logger, a test runner or Temporal. */
function renderings(err: unknown): string[] {
  const error = err as Error;
  return [
    error.message,
    String(error),
    error.stack ?? '',
    JSON.stringify(error),
    JSON.stringify(error, Object.getOwnPropertyNames(error)),
    inspect(error, { depth: 10, showHidden: true }),
    inspect(error.cause, { depth: 10, showHidden: true }),
  ];
}

function assertNoKey(err: unknown, key = API_KEY): void {
  assert.ok(err instanceof AgentApiError, `expected an AgentApiError, got ${String(err)}`);
  for (const text of renderings(err)) {
    assert.ok(!text.includes(key), `the key leaked into: ${text.slice(0, 300)}`);
    assert.ok(!/Bearer mint_/.test(text), 'no Authorization header value');
  }
}

async function failureOf(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => assert.fail('the call succeeded'),
    (err: unknown) => err,
  );
}

function faulty(rule: Parameters<RunningSimulator['setScenario']>[1]): string {
  const projectId = uniqueId('proj');
  sim.setScenario(projectId, rule);
  return projectId;
}

test('an HTTP error whose body echoes the key: the key is redacted', async () => {
  const projectId = faulty({
    faults: {
      rules: [
        { endpoint: 'get', first: 1, kind: 'status', status: 500, message: `bad header: Bearer ${API_KEY}` },
      ],
    },
  });
  const err = await failureOf(client.getJob(projectId, 'job-1'));
  assertNoKey(err);
  assert.match((err as Error).message, /\[redacted\]/);
});

test('a 401 with a wrong key does not show that key either', async () => {
  const wrongKey = `mint_${uniqueId('wrong')}`;
  const wrong = new AgentApiClient({ baseUrl: sim.url, apiKey: wrongKey, dispatcher });
  assertNoKey(await failureOf(wrong.getJob(uniqueId('proj'), 'job-1')), wrongKey);
});

test('a network error with an undici cause', async () => {
  const projectId = faulty({ faults: { rules: [{ endpoint: 'create', first: 1, kind: 'drop' }] } });
  const err = await failureOf(client.createJob(projectId, 'p', { idempotencyKey: uniqueId('key') }));
  assert.ok((err as Error).cause !== undefined, 'the cause is kept');
  assertNoKey(err);
});

test('a timeout with an undici cause', async () => {
  const projectId = faulty({ faults: { rules: [{ endpoint: 'get', first: 1, kind: 'hang' }] } });
  assertNoKey(await failureOf(client.getJob(projectId, 'job-1')));
});

test('an unexpected body with a JSON parse error as cause, the body echoing the key', async () => {
  const projectId = faulty({
    faults: { rules: [{ endpoint: 'get', first: 1, kind: 'status', status: 200, message: API_KEY }] },
  });
  assertNoKey(await failureOf(client.getJob(projectId, 'job-1')));
  const htmlProject = faulty({
    faults: { rules: [{ endpoint: 'get', first: 1, kind: 'html', status: 200 }] },
  });
  assertNoKey(await failureOf(client.getJob(htmlProject, 'job-1')));
});

test('the client object does not show the key', () => {
  for (const text of [inspect(client, { depth: 10, showHidden: true }), JSON.stringify(client)]) {
    assert.ok(!text.includes(API_KEY), text);
  }
});

test('a malformed key is refused without echoing it', () => {
  const badKey = `mint_${uniqueId('bad')}\n`;
  assert.throws(
    () => new AgentApiClient({ baseUrl: sim.url, apiKey: badKey }),
    (err: unknown) => err instanceof TypeError && !err.message.includes(badKey.trim()),
  );
  assert.throws(() => new AgentApiClient({ baseUrl: sim.url, apiKey: '' }), TypeError);
});
