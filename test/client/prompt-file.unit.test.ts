/** The prompt file reader: the limit, named with the file, before the whole of a large input is read. */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { readPromptFile } from '../../src/client/prompt-file.js';
import { InvalidInputError, MAX_PROMPT_LENGTH } from '../../src/contract.js';

test('standard input is read as it is, new lines and all', async () => {
  assert.equal(
    await readPromptFile('-', Readable.from(['Fix ', 'the docs\n- a "$(x)"\n'])),
    'Fix the docs\n- a "$(x)"\n',
  );
});

test('an endless standard input stops past 3 bytes per character of the limit, with the limit named', async () => {
  let chunks = 0;
  const endless = Readable.from(
    (function* () {
      for (;;) {
        chunks++;
        yield Buffer.alloc(1024, 'x');
      }
    })(),
  );
  await assert.rejects(
    readPromptFile('-', endless),
    (err: unknown) =>
      err instanceof InvalidInputError &&
      err.message ===
        `prompt: standard input holds more than ${3 * MAX_PROMPT_LENGTH} bytes, past the prompt limit of ${MAX_PROMPT_LENGTH} characters (MAX_PROMPT_LENGTH)`,
  );
  assert.ok(chunks <= (3 * MAX_PROMPT_LENGTH) / 1024 + 2, `read ${chunks} chunks`);
});

test('multi-byte characters count as characters: the limit in 3-byte characters is accepted', async () => {
  const text = '\u20ac'.repeat(MAX_PROMPT_LENGTH);
  assert.equal((await readPromptFile('-', Readable.from([Buffer.from(text)]))).length, MAX_PROMPT_LENGTH);
});
