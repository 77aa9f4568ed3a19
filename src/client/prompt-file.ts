/**
 * A prompt read from a file or from standard input (`-`): the starter's `--prompt-file` and the
 * GitHub Action's `prompt-file`. CI builds its prompt from commit messages, which a shell must not
 * interpolate, so it writes them to a file and passes the path. The prompt limit is checked here,
 * before anything connects, with an error that names the file and the limit.
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { InvalidInputError, MAX_PROMPT_LENGTH } from '../contract.js';

/**
 * Bytes read at most. A UTF-16 code unit is at most 3 bytes of UTF-8, so a text of more than
 * 3 × {@link MAX_PROMPT_LENGTH} bytes is surely past the limit: reading stops there, and a large
 * file or an endless pipe named by mistake is never held in memory whole.
 */
const MAX_PROMPT_FILE_BYTES = 3 * MAX_PROMPT_LENGTH;

/** How the file is named in errors: `standard input` for `-`, else its path. */
function nameOf(path: string): string {
  return path === '-' ? 'standard input' : path;
}

/**
 * The prompt in the file at `path`, or in `stdin` when `path` is `-`, as UTF-8 text, unchanged.
 *
 * @throws {InvalidInputError} naming `prompt`, the file and the limit, when the file cannot be
 *   read, is blank, or holds more than {@link MAX_PROMPT_LENGTH} characters
 */
export async function readPromptFile(path: string, stdin: Readable = process.stdin): Promise<string> {
  const where = nameOf(path);
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
