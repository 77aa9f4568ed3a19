/**
 * Prebuilds the workflow bundle at build time (`npm run build`), so the worker started from
 * `lib/` loads it instead of running webpack at every start.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { workflowBundleOptions } from '../src/bundle-options.js';

const started = Date.now();
const { code } = await bundleWorkflowCode(
  workflowBundleOptions(fileURLToPath(new URL('../src/workflows/index.ts', import.meta.url))),
);
const target = fileURLToPath(new URL('../lib/workflow-bundle.js', import.meta.url));
writeFileSync(target, code);
process.stderr.write(
  `[build] workflow bundle: ${target} (${Math.round(code.length / 1024)} KiB in ${Date.now() - started}ms)\n`,
);
