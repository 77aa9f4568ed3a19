/**
 * The GitHub Action's entry point (action.yml runs its bundle, dist/action/index.js, built by
 * dev/build-action.ts): runs the step for this process's environment and exits with its code.
 */
import * as core from '@actions/core';
import { terminalText } from '../escape.js';
import { ExitCode } from '../starter/exit-codes.js';
import { runAction } from './run.js';

runAction().then(
  (code) => process.exit(code),
  (err: unknown) => {
    // Unexpected: the message and its causes, which may carry what the server sent, escaped.
    const parts: string[] = [];
    for (let cause: unknown = err; cause instanceof Error && parts.length < 5; cause = cause.cause) {
      parts.push(cause.message);
    }
    core.error(terminalText(parts.length > 0 ? parts.join(': ') : String(err)));
    process.exit(ExitCode.Error);
  },
);
