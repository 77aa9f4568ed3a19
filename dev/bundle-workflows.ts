/**
 * Prebuilds the workflow bundle at build time (`npm run build`), so the worker started from
 * `lib/` loads it instead of running webpack at every start, and writes its build ID beside it
 * (`lib/build-id`, see src/config/version.ts) for CI to tag the image and name the version with.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';
import { workflowBundleOptions } from '../src/worker/bundle-options.js';
import { BUILD_ID_FILE, buildIdOf } from '../src/config/version.js';

const started = Date.now();
const { code } = await bundleWorkflowCode(
  workflowBundleOptions(fileURLToPath(new URL('../src/workflows/index.ts', import.meta.url))),
);
const target = fileURLToPath(new URL('../lib/workflow-bundle.js', import.meta.url));
writeFileSync(target, code);
const buildId = buildIdOf(code);
writeFileSync(fileURLToPath(new URL(`../lib/${BUILD_ID_FILE}`, import.meta.url)), `${buildId}\n`);
process.stderr.write(
  `[build] workflow bundle: ${target} (${Math.round(code.length / 1024)} KiB in ${Date.now() - started}ms), build ID ${buildId}\n`,
);
