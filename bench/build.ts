/**
 * Builds what the measured processes run: the sources emitted as plain JavaScript into a scratch
 * directory (what `npm run build` puts in lib/, without touching lib/), the worker's workflow bundle
 * beside it (so the worker loads it as a prebuilt bundle, as the image does), and the bundle of the
 * benchmark's own workflows (bench/baselines/). Every measured process then runs under plain `node`, with no
 * TypeScript loader in it.
 */
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, DefaultLogger } from '@temporalio/worker';
import ts from 'typescript';
import { workflowBundleOptions } from '../src/worker/bundle-options.js';

/** Repository root. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * The worker's entry point, from src/ (and from lib/ once built), without its extension: the one
 * place the benchmark names it.
 */
export const WORKER_ENTRY = 'worker';

/** The directories emitted: the worker's sources and the baselines it is compared with. */
const EMITTED = ['src', 'bench/baselines'];

/** A scratch build; `remove()` deletes it. */
export type Build = Awaited<ReturnType<typeof buildForBench>>;

/** Emits the sources and bundles both workflow sets into a fresh scratch directory. */
export async function buildForBench() {
  const dir = mkdtempSync(join(tmpdir(), 'agent-job-bench-'));
  try {
    const started = Date.now();
    for (const folder of EMITTED) emitTree(join(ROOT, folder), join(dir, folder));
    // Bare imports resolve by walking up from the file: give the scratch tree the project's
    // node_modules, and its package.json so the emitted files load as ES modules.
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const emitMs = Date.now() - started;

    const bundleStarted = Date.now();
    const logger = new DefaultLogger('WARN');
    const bundle = async (entry: string, out: string) => {
      const { code } = await bundleWorkflowCode({ ...workflowBundleOptions(join(ROOT, entry)), logger });
      writeFileSync(join(dir, out), code);
      return join(dir, out);
    };
    // Where the worker looks for the bundle `npm run build` writes: lib/workflow-bundle.js.
    const workerBundlePath = await bundle('src/workflows/index.ts', 'src/workflow-bundle.js');
    // The baselines are bundled on the same terms, so (c) stays the floor of this design.
    const baselineBundlePath = await bundle(
      'bench/baselines/workflows.ts',
      'bench/baselines/workflow-bundle.js',
    );
    return {
      dir,
      /** `node <workerEntry>` runs the worker with the prebuilt bundle. */
      workerEntry: join(dir, 'src', `${WORKER_ENTRY}.js`),
      workerBundlePath,
      plainLoopEntry: join(dir, 'bench/baselines/plain-loop.js'),
      baselineWorkerEntry: join(dir, 'bench/baselines/worker.js'),
      baselineBundlePath,
      emitMs,
      bundleMs: Date.now() - bundleStarted,
      remove: () => rmSync(dir, { recursive: true, force: true }),
    };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Emits every .ts file under `from` as .js under `to`. Single-file transpilation is exact here:
 * the project compiles with `isolatedModules` and `verbatimModuleSyntax`, so no file's output
 * depends on another file's types.
 */
function emitTree(from: string, to: string): void {
  for (const name of readdirSync(from, { recursive: true, encoding: 'utf8' })) {
    if (!name.endsWith('.ts') || name.endsWith('.d.ts')) continue;
    const output = ts.transpileModule(readFileSync(join(from, name), 'utf8'), {
      fileName: relative(ROOT, join(from, name)),
      compilerOptions: {
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.ES2022,
        verbatimModuleSyntax: true,
      },
    });
    const target = join(to, name.replace(/\.ts$/, '.js'));
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, output.outputText);
  }
}
