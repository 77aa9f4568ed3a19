/** The GitHub Action's entry point (bundled to dist/action/index.js by dev/build-action.ts). */
import * as core from '@actions/core';
import { messageChain } from '../errors.js';
import { terminalText } from '../escape.js';
import { ExitCode } from '../starter/exit-codes.js';
import { runAction } from './run.js';

runAction().then(
  (code) => process.exit(code),
  (err: unknown) => {
    core.error(terminalText(messageChain(err)));
    process.exit(ExitCode.Error);
  },
);
