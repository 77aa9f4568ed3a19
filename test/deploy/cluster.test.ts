/**
 * `npm run test:cluster` builds Temporal Server from source in place of the compose images: it
 * must build the release those images run, or it proves the compose files against another server.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { TEMPORAL_SERVER_VERSION } from '../../dev/temporal-cluster.js';
import { ROOT } from '../harness.js';

test('the server built for test:cluster is the release of the compose server and admin-tools images', () => {
  const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, { image?: string }>;
  };
  assert.equal(compose.services.temporal?.image, `temporalio/server:${TEMPORAL_SERVER_VERSION}`);
  for (const name of ['temporal-schema', 'temporal-init']) {
    assert.equal(compose.services[name]?.image, `temporalio/admin-tools:${TEMPORAL_SERVER_VERSION}`, name);
  }
});
