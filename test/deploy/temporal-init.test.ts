/**
 * Runs deploy/compose/temporal-init.sh, the one-shot service of docker-compose.yml, with the
 * arguments docker-compose.yml gives it, against a real Temporal server (the suite's, or a dev
 * server started here) and the Temporal CLI that the admin-tools image also ships. It must create
 * the namespace, register the contract's search attributes, and succeed again on a second run.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes.js';
import { parse } from 'yaml';
import { startDevServer, type DevServer } from '../../dev/dev-server.js';
import { resolveTemporalCli } from '../../dev/temporal-cli.js';
import { ALL_SEARCH_ATTRIBUTES } from '../../src/contract.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = join(ROOT, 'deploy/compose/temporal-init.sh');
const namespace = `deploy-init-${randomUUID().slice(0, 8)}`;

let server: DevServer | null = null;
let address = process.env.TEMPORAL_ADDRESS ?? '';
let cliDir = '';

before(async () => {
  const log = (line: string) => process.stderr.write(`[temporal-init test] ${line}\n`);
  // The script needs the Temporal CLI binary, as the admin-tools image has it.
  const cli = await resolveTemporalCli(process.env, log);
  cliDir = dirname(cli.path);
  if (!address) {
    server = await startDevServer({ log });
    address = server.address;
  }
});

after(async () => {
  await server?.stop();
});

/** The arguments docker-compose.yml passes to the script. */
function composeArguments(): string[] {
  const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, { command?: string[] }>;
  };
  const command = compose.services['temporal-init']?.command;
  assert.ok(command, 'docker-compose.yml has no temporal-init command');
  return command;
}

function runScript(args: string[]): { status: number | null; output: string } {
  const result = spawnSync('sh', [SCRIPT, ...args], {
    encoding: 'utf8',
    timeout: 120_000,
    env: {
      PATH: `${cliDir}${delimiter}${process.env.PATH ?? ''}`,
      HOME: process.env.HOME ?? '',
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: namespace,
    },
  });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

/** The namespace's custom search attributes, as the server reports them (name to indexed type). */
async function customAttributes(): Promise<Record<string, number>> {
  const connection = await Connection.connect({ address });
  try {
    const response = await connection.operatorService.listSearchAttributes({ namespace });
    return Object.fromEntries(
      Object.entries(response.customAttributes ?? {}).map(([name, type]) => [name, Number(type)]),
    );
  } finally {
    await connection.close();
  }
}

test('creates the namespace and registers the contract search attributes, twice without error', async () => {
  const expected = Object.fromEntries(
    ALL_SEARCH_ATTRIBUTES.map((key) => [key.name, Number(encodeSearchAttributeIndexedValueType(key.type))]),
  );

  const first = runScript(composeArguments());
  assert.equal(first.status, 0, `first run failed:\n${first.output}`);
  assert.deepEqual(await customAttributes(), expected);

  const second = runScript(composeArguments());
  assert.equal(second.status, 0, `second run (existing namespace and attributes) failed:\n${second.output}`);
  assert.match(second.output, new RegExp(`namespace ${namespace} exists`));
  assert.deepEqual(await customAttributes(), expected);
});

// Runs after the test above, which registered the contract's attributes in this namespace.
test('fails at once when a name is registered with another type', () => {
  const [first] = composeArguments();
  const name = (first ?? '').split('=')[0];
  const started = Date.now();
  const result = runScript([`${name}=Int`]);
  assert.equal(result.status, 1, result.output);
  assert.match(result.output, /different type/);
  assert.ok(Date.now() - started < 30_000, 'a type conflict must not be retried');
});

test('refuses to run without attributes to register', () => {
  const result = runScript([]);
  assert.equal(result.status, 2);
  assert.match(result.output, /usage: temporal-init\.sh NAME=TYPE/);
});
