/**
 * Structural checks of the Dockerfile and .dockerignore, for a machine without a Docker engine:
 * what the image is built from, what it copies, how it starts, and how it is health-checked.
 * Building and running the image is not done here (see docs/deploy.md).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadWorkerConfig } from '../../src/config/worker.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** One instruction: keyword upper-cased, arguments with line continuations joined. */
interface Instruction {
  keyword: string;
  args: string;
}

/** A build stage: its FROM argument, its name, and its instructions. */
interface Stage {
  from: string;
  name: string | null;
  instructions: Instruction[];
}

interface Dockerfile {
  /** ARG defaults declared before the first FROM (the only ones FROM can use). */
  globalArgs: Map<string, string>;
  stages: Stage[];
}

function parseDockerfile(text: string): Dockerfile {
  const logical: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    logical.push(pending + line);
    pending = '';
  }
  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of logical) {
    const match = /^(\S+)\s*(.*)$/.exec(line);
    if (!match) continue;
    const keyword = (match[1] ?? '').toUpperCase();
    const args = match[2] ?? '';
    if (keyword === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      assert.ok(from, `cannot read FROM ${args}`);
      stages.push({ from: from[1] ?? '', name: from[2] ?? null, instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (stage) {
      stage.instructions.push({ keyword, args });
    } else if (keyword === 'ARG') {
      const [name, value = ''] = args.split('=', 2);
      globalArgs.set(name ?? '', value);
    }
  }
  return { globalArgs, stages };
}

const dockerfile = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
const stageNames = new Set(dockerfile.stages.map((s) => s.name));

function stage(name: string): Stage {
  const found = dockerfile.stages.find((s) => s.name === name);
  assert.ok(found, `the Dockerfile has no stage named ${name}`);
  return found;
}

/** The stage and every stage it is built FROM, nearest last (the order instructions apply in). */
function lineage(target: Stage): Stage[] {
  const chain = [target];
  let current = target;
  while (stageNames.has(current.from)) {
    current = stage(current.from);
    chain.unshift(current);
  }
  return chain;
}

/** The last value of an instruction along a stage's lineage (USER, CMD, ... are inherited). */
function effective(target: Stage, keyword: string): string | undefined {
  const all = lineage(target).flatMap((s) => s.instructions.filter((i) => i.keyword === keyword));
  return all.at(-1)?.args;
}

function runs(target: Stage): string[] {
  return target.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args);
}

/** Exec form (a JSON array) or fail: shell form would put /bin/sh in front of node as PID 1. */
function execForm(value: string | undefined, what: string): string[] {
  assert.ok(value, `${what} is missing`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (err) {
    assert.fail(`${what} must be exec form (a JSON array), not shell form: ${value} (${String(err)})`);
  }
  assert.ok(
    Array.isArray(parsed) && parsed.every((p) => typeof p === 'string'),
    `${what} must be a JSON array of strings`,
  );
  return parsed;
}

/** Defaults of the worker's configuration loader: the ports and grace the image must agree with. */
function workerDefaults() {
  return loadWorkerConfig({ AGENT_API_BASE_URL: 'https://simulator.invalid', AGENT_API_KEY: 'placeholder' });
}

function port(address: string): number {
  return Number(/:(\d+)$/.exec(address)?.[1]);
}

/** .dockerignore patterns in the subset this repository uses: names, `*` and `**` globs. */
function ignoredBy(path: string, patterns: string[]): string | undefined {
  const parts = path.replace(/\/+$/, '').split('/');
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
  return patterns.find((pattern) => {
    const source = pattern
      .replace(/^\/+/, '')
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*\*\//g, '(?:.*/)?')
      .replace(/\*/g, '[^/]*')
      .replace(/\?/g, '[^/]');
    const regex = new RegExp(`^${source}$`);
    return prefixes.some((prefix) => regex.test(prefix));
  });
}

const dockerignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line !== '' && !line.startsWith('#'));

describe('Dockerfile', () => {
  test('has the stages that docker-compose.yml and docs/deploy.md name, with the worker as the default', () => {
    assert.deepEqual(
      dockerfile.stages.map((s) => s.name),
      ['build', 'runtime', 'simulator', 'worker'],
    );
  });

  test('builds on a pinned Node 24 Debian slim image, never Alpine (core-bridge needs glibc)', () => {
    for (const s of dockerfile.stages) {
      if (stageNames.has(s.from)) continue;
      const image = s.from.replace(
        /^\$\{(\w+)\}$/,
        (_, name: string) => dockerfile.globalArgs.get(name) ?? '',
      );
      assert.match(
        image,
        /^node:24\.\d+\.\d+-(?:[a-z]+-)?slim$/,
        `stage ${s.name} is FROM ${s.from} = ${image}`,
      );
      assert.doesNotMatch(image, /alpine/);
    }
  });

  test('the tests run on the Node release the image runs (the `node` devDependency)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      devDependencies: Record<string, string>;
    };
    const image = dockerfile.globalArgs.get('NODE_IMAGE') ?? '';
    assert.equal(image, `node:${pkg.devDependencies.node}-slim`);
    assert.equal(process.version, `v${pkg.devDependencies.node}`, 'npm test runs on node_modules/.bin/node');
  });

  test('the build stage installs every dependency and runs the build script', () => {
    const build = stage('build');
    assert.ok(
      runs(build).some((r) => /\bnpm ci\b/.test(r) && !r.includes('--omit=dev')),
      'build stage must run a full `npm ci`',
    );
    assert.ok(
      runs(build).some((r) => /\bnpm run build\b/.test(r)),
      'build stage must run `npm run build`',
    );
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    assert.match(
      pkg.scripts.build ?? '',
      /dev\/bundle-workflows\.ts/,
      'the build script prebuilds the workflow bundle',
    );
  });

  test('the runtime has production dependencies only and the build output, including the workflow bundle', () => {
    const runtime = stage('runtime');
    assert.ok(
      runs(runtime).some((r) => /\bnpm ci\b.*--omit=dev/.test(r)),
      'runtime must run `npm ci --omit=dev`',
    );
    const copies = runtime.instructions.filter(
      (i) => i.keyword === 'COPY' && i.args.startsWith('--from=build'),
    );
    assert.ok(
      copies.some((c) => /\/app\/lib\s+\.\/lib$/.test(c.args)),
      'runtime must copy lib/ (with lib/workflow-bundle.js) from the build stage',
    );
  });

  test('every file it COPYs from the context exists and is not excluded by .dockerignore', () => {
    for (const s of dockerfile.stages) {
      for (const copy of s.instructions.filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))) {
        const words = copy.args.split(/\s+/).filter((w) => !w.startsWith('--'));
        for (const source of words.slice(0, -1)) {
          assert.ok(existsSync(join(ROOT, source)), `COPY ${source} in stage ${s.name}: no such file`);
          const pattern = ignoredBy(source, dockerignore);
          assert.equal(
            pattern,
            undefined,
            `COPY ${source} in stage ${s.name} is excluded by .dockerignore (${pattern})`,
          );
        }
      }
    }
  });

  test('.dockerignore keeps host node_modules, build output and git metadata out of the context', () => {
    for (const path of ['node_modules', 'node_modules/@temporalio/core-bridge', 'lib', '.git', '.env']) {
      assert.ok(ignoredBy(path, dockerignore), `${path} must be ignored`);
    }
  });

  for (const [target, entry] of [
    ['worker', 'lib/worker.js'],
    ['simulator', 'lib/simulator/main.js'],
  ] as const) {
    test(`the ${target} image starts node itself (PID 1, exec form, not npm) on ${entry}`, () => {
      const cmd = execForm(effective(stage(target), 'CMD'), `CMD of ${target}`);
      assert.deepEqual(cmd, ['node', entry]);
      assert.equal(effective(stage(target), 'ENTRYPOINT'), undefined, 'no ENTRYPOINT may wrap node');
      const source = entry.replace(/^lib\//, 'src/').replace(/\.js$/, '.ts');
      assert.ok(existsSync(join(ROOT, source)), `${entry} is compiled from ${source}, which is missing`);
    });

    test(`the ${target} image runs as a non-root user and stops with SIGTERM`, () => {
      const user = effective(stage(target), 'USER');
      assert.ok(user, `${target} must set USER`);
      const name = user.split(':')[0];
      assert.ok(name !== 'root' && name !== '0', `${target} runs as ${user}`);
      assert.equal(effective(stage(target), 'STOPSIGNAL'), 'SIGTERM');
    });
  }

  test('the worker health check asks /readyz on the health port with node (no curl in slim images)', () => {
    const healthcheck = effective(stage('worker'), 'HEALTHCHECK');
    assert.ok(healthcheck, 'worker must have a HEALTHCHECK');
    const cmd = execForm(/CMD\s+(\[.*\])$/.exec(healthcheck)?.[1], 'HEALTHCHECK CMD');
    assert.equal(cmd[0], 'node');
    const url = /https?:\/\/[^'"\s)]+/.exec(cmd.join(' '))?.[0];
    assert.ok(url, 'the health check must request a URL');
    const defaults = workerDefaults();
    assert.equal(new URL(url).port, String(defaults.HEALTH_ADDRESS.port));
    assert.equal(new URL(url).pathname, '/readyz');
  });

  test('the worker exposes the health and metrics ports of the configuration defaults', () => {
    const defaults = workerDefaults();
    const exposed = stage('worker')
      .instructions.filter((i) => i.keyword === 'EXPOSE')
      .flatMap((i) => i.args.split(/\s+/))
      .map(Number);
    assert.ok(defaults.METRICS_ADDRESS, 'metrics are on by default');
    assert.deepEqual(exposed.sort(), [defaults.HEALTH_ADDRESS.port, port(defaults.METRICS_ADDRESS)].sort());
  });
});
