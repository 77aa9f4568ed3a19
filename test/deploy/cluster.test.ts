/**
 * `npm run test:cluster` builds Temporal Server from source in place of the compose images: it
 * must build the release those images run, or it proves the compose files against another server.
 * Both, and the UI image, take their versions from dev/temporal-versions.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { TEMPORAL_SERVER_VERSION, TEMPORAL_UI_VERSION } from '../../dev/temporal-versions.js';
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

test('the compose UI image is the UI release dev/temporal-versions.ts names', () => {
  const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, { image?: string }>;
  };
  assert.equal(compose.services['temporal-ui']?.image, `temporalio/ui:${TEMPORAL_UI_VERSION}`);
});
