/**
 * The key ring file's modes (like OpenSSH's StrictModes) and degenerate keys: refused at start with
 * one line naming the file, never a key.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { FileKeyRing, parseKeyRing, PayloadKeyFileError } from '../../src/payload-codec/index.js';

const root = mkdtempSync(join(tmpdir(), 'key-ring-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

const key = randomBytes(32).toString('base64');
const ringFile = (name: string, mode: number, text = `k1 ${key}\n`) => {
  const path = join(root, name);
  writeFileSync(path, text);
  chmodSync(path, mode);
  return path;
};

test('a ring group or others can write is refused, naming the file and the override, never the key', () => {
  for (const mode of [0o666, 0o620, 0o602]) {
    const path = ringFile(`ring-${mode.toString(8)}`, mode);
    assert.throws(
      () => new FileKeyRing(path),
      (err: unknown) =>
        err instanceof PayloadKeyFileError &&
        err.message.startsWith(`${path}: group or others can write it`) &&
        err.message.includes('TEMPORAL_PAYLOAD_KEYS_FILE_MODE_CHECK=off') &&
        !err.message.includes(key) &&
        !err.message.includes('\n'),
    );
  }
});

test('0600 and 0640 are accepted quietly; 0644 with a warning; the override accepts 0666', async () => {
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.message);
  process.on('warning', onWarning);
  try {
    assert.equal(new FileKeyRing(ringFile('ring-600', 0o600)).current().current.id, 'k1');
    new FileKeyRing(ringFile('ring-640', 0o640));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(warnings.length, 0);
    const readable = ringFile('ring-644', 0o644);
    new FileKeyRing(readable);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /others can read the payload key ring/);
    assert.ok(warnings[0]!.startsWith(readable) && !warnings[0]!.includes(key));
  } finally {
    process.off('warning', onWarning);
  }
  process.env.TEMPORAL_PAYLOAD_KEYS_FILE_MODE_CHECK = 'off';
  try {
    assert.equal(new FileKeyRing(ringFile('ring-666-off', 0o666)).current().current.id, 'k1');
  } finally {
    delete process.env.TEMPORAL_PAYLOAD_KEYS_FILE_MODE_CHECK;
  }
});

test('an all-zero key is refused, naming its ID', () => {
  const zero = Buffer.alloc(32).toString('base64');
  assert.deepEqual(parseKeyRing(`k1 ${key}\nold ${zero}\n`), {
    reason: 'key old is all zero, a placeholder: make one with openssl rand -base64 32',
  });
  assert.throws(() => new FileKeyRing(ringFile('ring-zero', 0o600, `k1 ${zero}\n`)), /k1 is all zero/);
});
