/**
 * Builds the GitHub Action: its bundle, dist/action/index.js (src/action/main.ts and everything it
 * imports, node_modules included, in one file, since a JavaScript action runs from the repository
 * as it is checked out, with no `npm ci`), and action.yml, written from the inputs and outputs
 * tables of src/action/inputs.ts. Both are committed; `--check` (run by `npm run lint`) builds them
 * in memory and fails when the committed files differ, so neither goes stale.
 *
 *   npm run build:action            write both
 *   tsx dev/build-action.ts --check compare, exit 1 when either differs
 */
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import prettier from 'prettier';
import { stringify } from 'yaml';
import { ACTION_INPUTS, ACTION_OUTPUTS, type ActionInput } from '../src/action/inputs.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUNDLE = 'dist/action/index.js';
const ACTION_YML = 'action.yml';

/**
 * @actions/core imports @actions/http-client, and through it undici 6 (0.4 MB of the minified
 * bundle, beside the undici 7 that src/config.ts brings), only for `getIDToken`, which the action
 * never calls. The package is marked free of side effects, so esbuild drops it with that function;
 * the mark only lets it drop what nothing uses, so a call to `getIDToken` would bundle it again.
 */
const httpClientUnused: Plugin = {
  name: 'actions-http-client-unused',
  setup(plugin) {
    plugin.onResolve({ filter: /^@actions\/http-client(\/|$)/ }, async (args) => {
      // The resolve below comes back through this callback: let esbuild resolve it.
      if (args.pluginData === httpClientUnused) return undefined;
      const { path, errors } = await plugin.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: httpClientUnused,
      });
      return { path, errors, sideEffects: false };
    });
  },
};

/**
 * The bundle: ESM (the package is `"type": "module"`), for the runner's Node 24, minified (2 MB
 * instead of 4.6), the dependencies' licence comments kept at its end. The SDK's CommonJS
 * dependencies call `require`, which an ES module lacks: the banner makes one.
 */
async function bundle(): Promise<string> {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ['src/action/main.ts'],
    outfile: BUNDLE,
    bundle: true,
    platform: 'node',
    target: 'node24',
    format: 'esm',
    minify: true,
    legalComments: 'eof',
    write: false,
    logLevel: 'warning',
    plugins: [httpClientUnused],
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    },
  });
  const [output] = result.outputFiles;
  if (output === undefined) throw new Error('esbuild wrote no bundle');
  return output.text;
}

/** action.yml from the tables, formatted as prettier formats the repository's YAML. */
async function actionYml(): Promise<string> {
  const inputs = Object.fromEntries(
    Object.entries(ACTION_INPUTS as Record<string, ActionInput>).map(([name, spec]) => [
      name,
      {
        description: spec.description,
        required: spec.required ?? false,
        ...(spec.default === undefined ? {} : { default: spec.default }),
      },
    ]),
  );
  const action = {
    name: 'Agent job orchestrator',
    description:
      'Start a background agent job through the agent-job workflow (attached to, not made again, on a re-run), and report its pull request.',
    branding: { icon: 'book-open', color: 'blue' },
    inputs,
    outputs: ACTION_OUTPUTS,
    runs: { using: 'node24', main: BUNDLE },
  };
  const header =
    '# Written by dev/build-action.ts from src/action/inputs.ts: change the tables there, then run\n' +
    '# `npm run build:action`. `npm run lint` fails when this file or the bundle is stale.\n';
  const text = header + stringify(action, { lineWidth: 0 });
  const options = await prettier.resolveConfig(join(ROOT, ACTION_YML));
  return prettier.format(text, { ...options, parser: 'yaml' });
}

/** The committed text of `path`, or null when it is missing. */
function committed(path: string): string | null {
  try {
    return readFileSync(join(ROOT, path), 'utf8');
  } catch {
    return null;
  }
}

const files: Array<[string, string]> = [
  [BUNDLE, await bundle()],
  [ACTION_YML, await actionYml()],
];

if (process.argv.includes('--check')) {
  const stale = files.filter(([path, text]) => committed(path) !== text).map(([path]) => path);
  if (stale.length > 0) {
    process.stderr.write(
      `${stale.join(' and ')} differ from what src/action/ builds: run \`npm run build:action\` and commit the result\n`,
    );
    process.exit(1);
  }
  process.stdout.write(`action: ${files.map(([path]) => path).join(' and ')} match src/action/\n`);
} else {
  for (const [path, text] of files) {
    mkdirSync(dirname(join(ROOT, path)), { recursive: true });
    writeFileSync(join(ROOT, path), text);
    process.stdout.write(`wrote ${path} (${Buffer.byteLength(text)} bytes)\n`);
  }
}
