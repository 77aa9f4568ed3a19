/**
 * A prompt read from a file or from standard input (`-`), for the starter's `--prompt-file` and
 * the Action's `prompt-file`: text such as commit messages that no shell should interpolate.
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { InvalidInputError, MAX_PROMPT_LENGTH } from '../contract.js';

/**
 * Bytes read at most: a UTF-16 code unit is at most 3 bytes of UTF-8, so more is surely past the
 * limit, and a large file or an endless pipe is never held in memory whole.
 */
const MAX_PROMPT_FILE_BYTES = 3 * MAX_PROMPT_LENGTH;

/**
 * The prompt in the file at `path`, or in `stdin` for `-`, as UTF-8 text, unchanged; an
 * `InvalidInputError` naming the file when it cannot be read, is blank or is past the limit.
 */
export async function readPromptFile(path: string, stdin: Readable = process.stdin): Promise<string> {
  const where = path === '-' ? 'standard input' : path;
  const stream = path === '-' ? stdin : createReadStream(path);
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer | string>) {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      chunks.push(buffer);
      bytes += buffer.length;
      if (bytes > MAX_PROMPT_FILE_BYTES) {
        throw new InvalidInputError(
          'prompt',
          `${where} holds more than ${MAX_PROMPT_FILE_BYTES} bytes, past the prompt limit of ${MAX_PROMPT_LENGTH} characters (MAX_PROMPT_LENGTH)`,
        );
      }
    }
  } catch (err) {
    if (err instanceof InvalidInputError) throw err;
    const reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new InvalidInputError('prompt', `cannot read the prompt file ${where} (${reason})`, { cause: err });
  } finally {
    if (path !== '-' && 'destroy' in stream) stream.destroy();
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw new InvalidInputError('prompt', `${where} is empty or blank`);
  if (text.length > MAX_PROMPT_LENGTH) {
    throw new InvalidInputError(
      'prompt',
      `${where} holds ${text.length} characters, past the prompt limit of ${MAX_PROMPT_LENGTH} (MAX_PROMPT_LENGTH)`,
    );
  }
  return text;
}
