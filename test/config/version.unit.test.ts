/**
 * The worker's Worker Deployment Version: the build ID derived from a bundle, the versioning
 * settings and the SDK options made from them. No server; test/cluster/rollout.ts runs a rollout.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, readSettings } from '../../src/config/settings.js';
import {
  buildIdOf,
  DEFAULT_DEPLOYMENT_NAME,
  VersioningEnv,
  workerDeploymentOptions,
  type VersioningSettings,
} from '../../src/config/version.js';

/** The tail the SDK's bundler appends: the source map, naming each source by its absolute path. */
function sourceMap(root: string): string {
  const map = { version: 3, sources: [`${root}/src/workflows/index.ts`], mappings: 'AAAA' };
  return `\n//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}`;
}

test('the build ID is a hash of the bundle code: the same code built in two places, the same ID', () => {
  const code = 'var __TEMPORAL__;\n(() => { /* ./src/workflows/index.ts */ })();';
  const inApp = buildIdOf(code + sourceMap('/app'));
  assert.match(inApp, /^[0-9a-f]{12}$/);
  assert.equal(buildIdOf(code + sourceMap('/home/dev/agent-job-orchestrator')), inApp);
  assert.equal(buildIdOf(code), inApp);
});

test('any change to the code is a new build ID', () => {
  const code = 'var __TEMPORAL__;\n(() => { return 1; })();';
  assert.notEqual(buildIdOf(code.replace('1', '2') + sourceMap('/app')), buildIdOf(code + sourceMap('/app')));
  assert.notEqual(buildIdOf(`${code}\n`), buildIdOf(code));
});

test('versioning is off by default, with the default deployment name and the bundle build ID', () => {
  const settings = readSettings(VersioningEnv, {});
  assert.deepEqual(settings, {
    TEMPORAL_WORKER_VERSIONING: false,
    TEMPORAL_DEPLOYMENT_NAME: DEFAULT_DEPLOYMENT_NAME,
    TEMPORAL_WORKER_BUILD_ID: undefined,
    WORKER_UPGRADE_CHECK: true,
  });
  assert.equal(DEFAULT_DEPLOYMENT_NAME, 'agent-job-orchestrator');
  // Declared all the same, so the server records which build completed each workflow task.
  assert.deepEqual(workerDeploymentOptions(settings, '5d0e0fa777d1'), {
    version: { deploymentName: 'agent-job-orchestrator', buildId: '5d0e0fa777d1' },
    useWorkerVersioning: false,
  });
});

test('TEMPORAL_WORKER_VERSIONING=on pins every workflow to the build that started it', () => {
  const settings = readSettings(VersioningEnv, {
    TEMPORAL_WORKER_VERSIONING: 'ON',
    TEMPORAL_DEPLOYMENT_NAME: 'docs-agents',
  });
  assert.deepEqual(workerDeploymentOptions(settings, 'abc123def456'), {
    version: { deploymentName: 'docs-agents', buildId: 'abc123def456' },
    useWorkerVersioning: true,
    defaultVersioningBehavior: 'PINNED',
  });
});

test('TEMPORAL_WORKER_BUILD_ID replaces the bundle build ID', () => {
  const settings: VersioningSettings = readSettings(VersioningEnv, {
    TEMPORAL_WORKER_VERSIONING: 'on',
    TEMPORAL_WORKER_BUILD_ID: ' release-42 ',
  });
  assert.equal(settings.TEMPORAL_WORKER_BUILD_ID, 'release-42');
  assert.equal(readSettings(VersioningEnv, { WORKER_UPGRADE_CHECK: 'off' }).WORKER_UPGRADE_CHECK, false);
  assert.equal(workerDeploymentOptions(settings, 'abc123def456').version.buildId, 'release-42');
});

test('bad versioning settings are ConfigErrors naming the setting', () => {
  const cases: [Record<string, string>, string, RegExp][] = [
    [{ TEMPORAL_WORKER_VERSIONING: 'yes' }, 'TEMPORAL_WORKER_VERSIONING', /"on" or "off"/],
    [{ WORKER_UPGRADE_CHECK: 'no' }, 'WORKER_UPGRADE_CHECK', /"on" or "off"/],
    [{ TEMPORAL_DEPLOYMENT_NAME: 'agents.v2' }, 'TEMPORAL_DEPLOYMENT_NAME', /"\." or ":"/],
    [{ TEMPORAL_DEPLOYMENT_NAME: 'agents:v2' }, 'TEMPORAL_DEPLOYMENT_NAME', /"\." or ":"/],
    [{ TEMPORAL_DEPLOYMENT_NAME: '__agents' }, 'TEMPORAL_DEPLOYMENT_NAME', /"__"/],
    [{ TEMPORAL_WORKER_BUILD_ID: '__unversioned__' }, 'TEMPORAL_WORKER_BUILD_ID', /"__"/],
    [{ TEMPORAL_WORKER_BUILD_ID: 'a b' }, 'TEMPORAL_WORKER_BUILD_ID', /white space/],
    [{ TEMPORAL_WORKER_BUILD_ID: 'x'.repeat(109) }, 'TEMPORAL_WORKER_BUILD_ID', /at most 108/],
  ];
  for (const [env, setting, message] of cases) {
    assert.throws(
      () => readSettings(VersioningEnv, env),
      (err: unknown) => err instanceof ConfigError && err.setting === setting && message.test(err.message),
      JSON.stringify(env),
    );
  }
});
