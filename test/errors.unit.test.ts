import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentApiError, ApiKeyFileError, InvalidAgentJobRecordError } from '../src/agent-api/index.js';
import { FailureKind } from '../src/failure-policy/kinds.js';
import { BatchFileError } from '../src/client/batch.js';
import { ConfigError } from '../src/config/settings.js';
import { InvalidInputError } from '../src/contract.js';
import { AgentJobError, ErrorName, UpgradeRefusedError, UsageError } from '../src/errors.js';
import {
  PayloadKeyFileError,
  PayloadUnopenedError,
  SealedPayloadError,
  UnknownPayloadKeyError,
} from '../src/payload-codec/index.js';
import { NotifyTargetsError } from '../src/notify/targets.js';

test("every error the project throws has the base and its own name from the one map, whatever the bundler's class names", () => {
  const made: Error[] = [
    new AgentApiError({
      kind: FailureKind.NotFound,
      operation: 'getJob',
      status: 404,
      retryAfterMs: null,
      message: 'm',
    }),
    new ApiKeyFileError('/run/key', 'it is empty'),
    new InvalidAgentJobRecordError('id: required'),
    new BatchFileError([{ line: 1, message: 'not JSON' }]),
    new ConfigError('AGENT_API_BASE_URL', 'is required'),
    new InvalidInputError('projectId', 'is required'),
    new UsageError('--prompt is required'),
    new PayloadKeyFileError('/run/payload-keys', 'it holds no key'),
    new UnknownPayloadKeyError('2026-10'),
    new PayloadUnopenedError('wf-1', 'SealedPayloadError', 'k1'),
    new SealedPayloadError('malformed', null, 'a sealed payload has no usable encryption-key-id'),
    new NotifyTargetsError('/run/notify/targets.json', 'is not JSON'),
    new UpgradeRefusedError('upgrade refused: 1 open workflow(s) this build cannot take over'),
  ];
  const names = made.map((err) => err.name);
  for (const err of made) assert.ok(err instanceof AgentJobError, `${err.name} has the base`);
  // Each a different name, every one from the map, and every name in the map used.
  assert.equal(new Set(names).size, made.length);
  const known = new Set<string>(Object.values(ErrorName));
  for (const name of names) assert.ok(known.has(name), `${name} is in ErrorName`);
  assert.deepEqual(
    [...known].filter((name) => !names.includes(name)),
    [],
  );
});
