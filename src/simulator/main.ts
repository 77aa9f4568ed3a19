/**
 * The simulator program behind `npm run simulator`. Flags fall back to environment variables (see
 * docs/agent-api.md); it stops cleanly on SIGINT and SIGTERM.
 */
import { HELP, parseCommandLine, USAGE, UsageError, type Command } from './cli.js';
import { startSimulator } from './server.js';

async function main(): Promise<void> {
  let command: Command;
  try {
    command = parseCommandLine(process.argv.slice(2), process.env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    // A person mistyped a flag: the problem and the usage, no stack trace.
    process.stderr.write(`simulator: ${err.message}\n${USAGE}\n`);
    process.exitCode = 2;
    return;
  }
  if (command.help) {
    process.stdout.write(HELP);
    return;
  }
  const simulator = await startSimulator(command.options);
  process.stdout.write(`agent job API simulator listening on ${simulator.url}\n`);
  const stop = (signal: NodeJS.Signals) => {
    process.stdout.write(`agent job API simulator stopping (${signal})\n`);
    simulator.stop().catch((err: unknown) => {
      process.stderr.write(`simulator: stop failed: ${(err as Error).message}\n`);
      process.exitCode = 1;
    });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  // Start-up failures (port in use, say) are for a person: the message, not the stack.
  process.stderr.write(`simulator: ${(err as Error).message}\n`);
  process.exitCode = 1;
});
