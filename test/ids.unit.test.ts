/**
 * The pure ID helpers: UTF-8 length and well-formedness as Node counts them, and workflow IDs that
 * fit 255 bytes, read as they are when short, and never share an ID between distinct inputs.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  boundedWorkflowId,
  CUT_MARK,
  fitPart,
  idHash,
  isWellFormed,
  MAX_WORKFLOW_ID_BYTES,
  utf8ByteLength,
  utf8Prefix,
} from '../src/ids.js';

/** Node's answer: a string that survives a UTF-8 round trip has no lone surrogate. */
const roundTrips = (text: string) => Buffer.from(text, 'utf8').toString('utf8') === text;

const samples = ['', 'docs', 'é', '\u4e00\u4e8c', '\ud83d\ude00x', 'a\ud800b', '\udc00', 'x'.repeat(300)];

describe('UTF-8 length and well-formedness', () => {
  test('the length is what Node encodes', () => {
    for (const text of samples) assert.equal(utf8ByteLength(text), Buffer.byteLength(text, 'utf8'), text);
  });

  test('a lone surrogate, and only that, is not well-formed', () => {
    assert.deepEqual(samples.map(isWellFormed), samples.map(roundTrips));
  });

  test('a prefix never splits a code point and never exceeds its bytes', () => {
    const text = `ab\u4e00\ud83d\ude00cd`;
    for (let max = 0; max <= 12; max++) {
      const prefix = utf8Prefix(text, max);
      assert.ok(text.startsWith(prefix));
      assert.ok(utf8ByteLength(prefix) <= max);
      assert.ok(roundTrips(prefix), `${max}: ${JSON.stringify(prefix)}`);
    }
    assert.equal(utf8Prefix(text, 5), 'ab\u4e00');
    assert.equal(utf8Prefix(text, 8), 'ab\u4e00');
    assert.equal(utf8Prefix(text, 9), 'ab\u4e00\ud83d\ude00');
  });
});

describe('hash and cut parts', () => {
  test('the hash is stable, 16 hex digits, and tells lone surrogates apart', () => {
    // Stable across processes and releases, since workflow IDs hold it: 64-bit FNV-1a over the
    // UTF-16LE bytes, the values computed outside this code (no bytes: the FNV offset basis).
    assert.equal(idHash(''), 'cbf29ce484222325');
    assert.equal(idHash('docs'), '1f721454aae285de');
    assert.match(idHash('a\ud800'), /^[0-9a-f]{16}$/);
    assert.notEqual(idHash('a\ud800'), idHash('a\ud801'));
    assert.notEqual(idHash('ab'), idHash('ba'));
  });

  test('a part that fits is kept; a longer one is cut within its bytes, with the mark and the hash', () => {
    assert.equal(fitPart('short', 'short', 10), 'short');
    const long = 'p'.repeat(100);
    const cut = fitPart(long, long, 40);
    assert.equal(utf8ByteLength(cut), 40);
    // 40 bytes: 22 of the part, the mark, the 16 hex digits of the part's hash (as above).
    assert.equal(cut, `${'p'.repeat(22)}%~69fdb320d18daec5`);
    // Never ends inside a %XX escape.
    const escaped = 'a%2F'.repeat(20);
    assert.doesNotMatch(fitPart(escaped, escaped, 40).split(CUT_MARK)[0] ?? '', /%.?$/);
  });
});

describe('bounded workflow IDs', () => {
  const encode = (part: string) => part.replaceAll('%', '%25').replaceAll('/', '%2F');
  const build = ([a, b]: readonly string[]) => `wf/${a}/${b}`;
  const id = (a: string, b: string) => boundedWorkflowId([a, b], encode, build);

  test('short IDs read as they are', () => {
    assert.equal(id('docs', 'key-1'), 'wf/docs/key-1');
  });

  test('every ID fits 255 bytes, CJK and emoji included', () => {
    for (const [a, b] of [
      ['\u4e00'.repeat(200), 'k'],
      ['p', '\ud83d\ude00'.repeat(300)],
      ['x'.repeat(2000), 'y'.repeat(2000)],
      ['%/'.repeat(200), 'k'],
    ] as const) {
      const built = id(a, b);
      assert.ok(utf8ByteLength(built) <= MAX_WORKFLOW_ID_BYTES, `${utf8ByteLength(built)} bytes`);
      assert.ok(built.includes(CUT_MARK));
    }
  });

  test('a part with a lone surrogate is always cut: its encoding reads like U+FFFD, its hash does not', () => {
    const lone = id('docs', 'a\ud800b');
    const replaced = id('docs', 'a\ufffdb');
    assert.ok(lone.includes(CUT_MARK), lone);
    assert.notEqual(lone, replaced);
    assert.equal(replaced, 'wf/docs/a\ufffdb');
  });

  test('distinct inputs never share an ID, a cut one and a readable one included', () => {
    const long = 'k'.repeat(400);
    const pairs: Array<[string, string]> = [
      ['docs', long],
      ['docs', `${long}x`],
      ['docs', fitPart(long, long, 120)],
      ['docs', id('docs', long).split('/')[2] ?? ''],
      ['d', 'x'.repeat(251)],
      ['d', 'x'.repeat(250)],
    ];
    const ids = pairs.map(([a, b]) => id(a, b));
    assert.equal(new Set(ids).size, pairs.length, ids.join('\n'));
  });
});
