/**
 * What the action tells the GitHub Actions runner, by its documented protocol of files and
 * standard output: workflow commands (`::error::`, `::add-mask::`) on stdout, outputs appended to
 * the file GITHUB_OUTPUT names, the job summary to GITHUB_STEP_SUMMARY's. That protocol is a few
 * lines, so the action needs no toolkit package.
 */
import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';

/**
 * A workflow command's message with `%`, CR and LF escaped as the runner unescapes them: a message
 * holding a line break stays one command, and cannot start a command of its own on the next line.
 */
export function commandData(text: string): string {
  return text.replaceAll('%', '%25').replaceAll('\r', '%0D').replaceAll('\n', '%0A');
}

/** `::<name>::<message>`, the message escaped ({@link commandData}). */
export function workflowCommand(name: 'error' | 'warning' | 'notice' | 'add-mask', message: string): string {
  return `::${name}::${commandData(message)}`;
}

/**
 * What to mask for a secret: the whole value, and each of its lines, since the runner masks the
 * log line by line and a multi-line value (a PEM key, a key ring) would never match whole. PEM
 * armour lines (`-----BEGIN ...-----`) and comments of a key ring are public and left out.
 */
export function maskValues(secret: string): string[] {
  const lines = secret
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter(
      (line) => line !== '' && !/^-----(BEGIN|END) [A-Z0-9 ]+-----$/.test(line) && !line.startsWith('#'),
    );
  return [...new Set([secret.trim(), ...lines])].filter((value) => value !== '');
}

/**
 * One output in GITHUB_OUTPUT's multi-line form: `<name><<<delimiter>`, the value, the delimiter.
 * A random delimiter, which the value cannot hold, so a value cannot end the entry early and set
 * other outputs.
 */
export function outputEntry(name: string, value: string, delimiter = `ghadelimiter_${randomUUID()}`): string {
  if (value.includes(delimiter)) throw new Error('an output value holds its delimiter');
  return `${name}<<${delimiter}\n${value}\n${delimiter}\n`;
}

/** The runner's side of a step: its stdout, its output and summary files. */
export interface Runner {
  /** A line on stdout: the step's log, where the runner reads workflow commands. */
  log(line: string): void;
  /** Masks each of `secret`'s {@link maskValues} in the rest of the job's log. */
  mask(secret: string): void;
  /** An error annotation; the step's exit code says it failed. */
  error(message: string): void;
  /** Sets a step output (appended to GITHUB_OUTPUT; without it, only logged). */
  setOutput(name: string, value: string): void;
  /** Appends markdown to the job summary (GITHUB_STEP_SUMMARY; without it, nothing). */
  summary(markdown: string): void;
}

/** The runner of `env` (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY), writing its log with `write`. */
export function githubRunner(
  env: Record<string, string | undefined>,
  write: (text: string) => void = (text) => process.stdout.write(text),
): Runner {
  const log = (line: string) => write(`${line}\n`);
  return {
    log,
    mask: (secret) => maskValues(secret).forEach((value) => log(workflowCommand('add-mask', value))),
    error: (message) => log(workflowCommand('error', message)),
    setOutput: (name, value) => {
      if (env.GITHUB_OUTPUT) appendFileSync(env.GITHUB_OUTPUT, outputEntry(name, value));
      else log(`output ${name}: ${value}`);
    },
    summary: (markdown) => {
      if (env.GITHUB_STEP_SUMMARY) appendFileSync(env.GITHUB_STEP_SUMMARY, markdown);
    },
  };
}
