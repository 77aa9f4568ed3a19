/**
 * The GitHub Action's entry point (action.yml runs its bundle, dist/action/index.js, built by
 * dev/build-action.ts): runs the step for this process's environment and exits with its code.
 */
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
