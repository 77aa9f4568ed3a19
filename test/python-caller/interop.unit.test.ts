/**
 * The Python caller (examples/python-caller/) against the TypeScript library, without a server:
 * payloads sealed by either codec open in the other, byte for byte (several sizes, unicode,
 * binary), values written by one side's data converter read as the same values on the other, a
 * key ID one side lacks fails naming it (and opens after the key is added to the file, without a
 * restart), the same key files are refused for the same reasons, and the Python caller builds the
 * library's workflow ID, summary and fairness key for the same input. The Python side runs in the
 * example's venv (dev/python-venv.ts; made on a machine's first run).
 */
import assert from 'node:assert/strict';
import { createCipheriv, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import proto from '@temporalio/proto';
import { agentJobSummary, agentJobWorkflowId } from '../../src/client/index.js';
import { taskPriority } from '../../src/priority.js';
import {
  AesGcmPayloadCodec,
  FileKeyRing,
  FORMAT_METADATA_KEY,
  KEY_ID_METADATA_KEY,
  parseKeyRing,
  SEALED_ENCODING,
  SealedPayloadError,
  UnknownPayloadKeyError,
} from '../../src/payload-codec/index.js';
import { PYTHON_CALLER_DIR } from '../../dev/python-venv.js';
import { interop, runPython } from './python.js';

// These tests seal format 2, which a process of this release seals once told (decision 0023).
process.env.TEMPORAL_PAYLOAD_SEAL_FORMAT = '2';

const root = mkdtempSync(join(tmpdir(), 'python-caller-test-'));
after(() => rmSync(root, { recursive: true, force: true }));

const { Payload: PayloadMessage } = proto.temporal.api.common.v1;
const newKey = () => randomBytes(32).toString('base64');
let files = 0;

/** A key file with `keys` ([id, base64] pairs, current first), as a path. */
function ringFile(...keys: [string, string][]): string {
  const path = join(root, `ring-${++files}`);
  writeFileSync(path, `# current first\n${keys.map(([id, key]) => `${id} ${key}`).join('\n')}\n`);
  return path;
}

const toWire = (payload: Payload) => Buffer.from(PayloadMessage.encode(payload).finish()).toString('base64');
const fromWire = (text: string): Payload => PayloadMessage.decode(Buffer.from(text, 'base64'));
const bytes = (b: Uint8Array | null | undefined) => Buffer.from(b ?? new Uint8Array()).toString('base64');

/** A payload's every metadata entry and data byte, comparable whatever order the map was written in. */
function contents(payload: Payload): { metadata: Record<string, string>; data: string } {
  const metadata = Object.fromEntries(
    Object.entries(payload.metadata ?? {})
      .map(([k, v]) => [k, bytes(v)] as const)
      .sort(([a], [b]) => a.localeCompare(b)),
  );
  return { metadata, data: bytes(payload.data) };
}

const UNICODE =
  'Dokumentation für «Zahlungen» — 日本語のドキュメント, emoji 😀👩🏽‍💻, RTL עברית, NUL \u0000 and \u2028';

/** Values of several sizes and kinds, as the payloads a caller and a worker write. */
const VALUES: unknown[] = [
  '',
  'a',
  UNICODE,
  'x'.repeat(1_000),
  UNICODE.repeat(1_000),
  'y'.repeat(1_500_000),
  { projectId: 'docs', prompt: `Fix the ${UNICODE} page`, poll: { initialInterval: '5s' } },
  [1, 2.5, null, true, { nested: ['ü'] }],
];

/** `value` with every object's keys sorted: Python's JSON converter writes them sorted. */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => [k, sortedKeys(v)]),
  );
}

/**
 * `actual` and `expected` as the same JSON values; on a difference, a message with the first
 * place it differs rather than megabytes of both.
 */
function assertSameJson(actual: unknown, expected: unknown, what: string): void {
  const [a, e] = [JSON.stringify(sortedKeys(actual)), JSON.stringify(sortedKeys(expected))];
  if (a === e) return;
  let at = 0;
  while (a[at] === e[at]) at++;
  assert.fail(
    `${what}: differs at character ${at}: ${a.slice(at, at + 80)} instead of ${e.slice(at, at + 80)}`,
  );
}

/** The values as the default converter writes them, plus binary data and extra metadata. */
function samplePayloads(): Payload[] {
  return [
    ...[...VALUES, null].map((value) => defaultPayloadConverter.toPayload(value)),
    defaultPayloadConverter.toPayload(new Uint8Array(randomBytes(70_000))),
    { metadata: { encoding: Buffer.from('json/plain'), extra: Buffer.from('ü 😀') }, data: new Uint8Array() },
  ];
}

test('payloads sealed by the TypeScript codec open in Python as the payloads they were, byte for byte', async () => {
  const keys = ringFile(['ts-1', newKey()]);
  const payloads = samplePayloads();
  const sealed = await new AesGcmPayloadCodec(new FileKeyRing(keys)).encode(payloads);
  assert.ok(sealed.every((p) => Buffer.from(p.metadata?.encoding ?? []).toString() === SEALED_ENCODING));
  const [opened] = (await interop([{ op: 'open', keysFile: keys, payloads: sealed.map(toWire) }])) as [
    { payload?: string; error?: unknown }[],
  ];
  assert.equal(opened.length, payloads.length);
  opened.forEach((answer, i) => {
    assert.ok(answer.payload, `payload ${i} opened: ${JSON.stringify(answer.error)}`);
    assertSameJson(contents(fromWire(answer.payload)), contents(payloads[i]!), `payload ${i}`);
  });
});

test('payloads sealed by Python open in the TypeScript codec, in the layout the TypeScript codec writes', async () => {
  const keys = ringFile(['py-1', newKey()]);
  const payloads = samplePayloads();
  const [sealedWire] = (await interop([{ op: 'seal', keysFile: keys, payloads: payloads.map(toWire) }])) as [
    string[],
  ];
  const sealed = sealedWire.map(fromWire);
  sealed.forEach((p, i) => {
    assert.deepEqual(Object.keys(p.metadata ?? {}).sort(), [
      'encoding',
      FORMAT_METADATA_KEY,
      KEY_ID_METADATA_KEY,
    ]);
    assert.equal(Buffer.from(p.metadata!.encoding!).toString(), SEALED_ENCODING);
    assert.equal(Buffer.from(p.metadata![FORMAT_METADATA_KEY]!).toString(), '2');
    assert.equal(Buffer.from(p.metadata![KEY_ID_METADATA_KEY]!).toString(), 'py-1');
    // The 12-byte nonce, the serialized payload's length of ciphertext, the 16-byte tag.
    assert.equal(
      p.data?.length,
      12 + PayloadMessage.encode(payloads[i]!).finish().length + 16,
      `payload ${i}`,
    );
    assert.ok(!Buffer.from(p.data).includes('Dokumentation'), 'no plain text in a sealed payload');
  });
  const opened = await new AesGcmPayloadCodec(new FileKeyRing(keys)).decode(sealed);
  opened.forEach((p, i) => assertSameJson(contents(p), contents(payloads[i]!), `payload ${i}`));
});

test("values written by either side's data converter, codec on, read as the same values on the other", async () => {
  const keys = ringFile(['both-1', newKey()]);
  const codec = new AesGcmPayloadCodec(new FileKeyRing(keys));
  const fromTs = await codec.encode(VALUES.map((value) => defaultPayloadConverter.toPayload(value)));
  const [fromPython, readByPython] = (await interop([
    { op: 'toPayloads', keysFile: keys, values: VALUES },
    { op: 'fromPayloads', keysFile: keys, payloads: fromTs.map(toWire) },
  ])) as [string[], unknown[]];
  assertSameJson(readByPython, VALUES, 'the values Python read');
  const opened = await codec.decode(fromPython.map(fromWire));
  assertSameJson(
    opened.map((p) => defaultPayloadConverter.fromPayload(p)),
    VALUES,
    'the values TypeScript read',
  );
});

test('a key ID one side lacks fails naming it on either side, and opens once the key is in the file, without a restart', async () => {
  const [shared, tsOnly, pyOnly] = [newKey(), newKey(), newKey()];
  const tsKeys = ringFile(['ts-new', tsOnly], ['shared', shared]);
  const pyKeys = ringFile(['shared', shared]);
  const tsCodec = new AesGcmPayloadCodec(new FileKeyRing(tsKeys));
  const [sealed] = await tsCodec.encode([defaultPayloadConverter.toPayload(UNICODE)]);
  const tampered = { ...sealed!, data: Buffer.from(sealed!.data!).map((b, i) => (i === 20 ? b ^ 1 : b)) };
  const answers = (await interop([
    { op: 'open', keysFile: pyKeys, payloads: [toWire(sealed!)] },
    { op: 'write', path: pyKeys, text: `shared ${shared}\nts-new ${tsOnly}\n` },
    { op: 'open', keysFile: pyKeys, payloads: [toWire(sealed!), toWire(tampered)] },
    { op: 'seal', keysFile: ringFile(['py-only', pyOnly], ['shared', shared]), payloads: [toWire(sealed!)] },
  ])) as [
    { error?: { type: string; message: string } }[],
    null,
    { payload?: string; error?: { type: string; message: string } }[],
    string[],
  ];
  const [[unknown], , [reopened, altered], [pySealed]] = answers;
  // The same message as the TypeScript codec's: the key ID and the setting, never a key.
  assert.deepEqual(unknown?.error, {
    type: 'UnknownPayloadKeyError',
    message: new UnknownPayloadKeyError('ts-new').message,
  });
  assert.ok(!JSON.stringify(answers[0]).includes(tsOnly) && !JSON.stringify(answers[0]).includes(shared));
  assert.deepEqual(altered?.error, {
    type: 'SealedPayloadError',
    message: new SealedPayloadError(
      'authentication-failed',
      'ts-new',
      'a payload sealed with key ts-new does not open: it was altered, or sealed with another key of that ID',
    ).message,
  });
  assert.ok(reopened?.payload, 'opened after the key was added to the file, in the same process');
  assert.equal(defaultPayloadConverter.fromPayload(fromWire(reopened.payload)), UNICODE);
  await assert.rejects(tsCodec.decode([fromWire(pySealed!)]), (err: unknown) => {
    assert.ok(err instanceof UnknownPayloadKeyError);
    assert.equal(err.keyId, 'py-only');
    return true;
  });
});

test('a key made current in the file seals the next payloads in Python once the ring is checked again, without a restart', async () => {
  const [key1, key2] = [newKey(), newKey()];
  const keys = ringFile(['rot-1', key1]);
  const payload = toWire(defaultPayloadConverter.toPayload(UNICODE));
  const seal = { op: 'seal', keysFile: keys, payloads: [payload] };
  const answers = (await interop([
    seal,
    { op: 'write', path: keys, text: `rot-2 ${key2}\nrot-1 ${key1}\n` },
    seal,
    { op: 'advance', seconds: 0.999 },
    seal,
    { op: 'advance', seconds: 0.001 },
    seal,
  ])) as (string[] | null)[];
  const sealed = answers.filter((a) => a !== null).map((a) => fromWire(a[0]!));
  // The same check interval as the TypeScript ring: a second on a fake clock.
  assert.deepEqual(
    sealed.map((p) => Buffer.from(p.metadata![KEY_ID_METADATA_KEY]!).toString()),
    ['rot-1', 'rot-1', 'rot-1', 'rot-2'],
  );
  const opened = await new AesGcmPayloadCodec(new FileKeyRing(keys)).decode(sealed);
  assert.ok(opened.every((p) => defaultPayloadConverter.fromPayload(p) === UNICODE));
});

test('the same key files are refused for the same reasons by both rings', async () => {
  const key = newKey();
  const texts = [
    '',
    '# only a comment\n',
    `bad/id ${key}\n`,
    `k1 not*base64\n`,
    `k1 ${randomBytes(31).toString('base64')}\n`,
    `k1 ${key}\nk1 ${newKey()}\n`,
    `k1 ${key} extra\n`,
    `k1 ${key.replace(/=+$/, '')}\n`,
    `\n  # indented comment\n\tk2 ${key}  \n`,
  ];
  const paths = texts.map((text) => {
    const path = join(root, `refused-${++files}`);
    writeFileSync(path, text);
    return path;
  });
  const answers = (await interop(paths.map((path) => ({ op: 'ring', path })))) as {
    ok?: true;
    error?: { type: string; message: string };
  }[];
  texts.forEach((text, i) => {
    const parsed = parseKeyRing(text);
    if ('value' in parsed) assert.deepEqual(answers[i], { ok: true }, `file ${i} is a ring for both`);
    else
      assert.deepEqual(
        answers[i],
        { error: { type: 'PayloadKeyFileError', message: `${paths[i]}: ${parsed.reason}` } },
        `file ${i}`,
      );
  });
  assert.ok(
    answers.filter((a) => a.ok).length === 2 && answers.filter((a) => a.error).length === 7,
    'both outcomes are covered',
  );
});

test("the Python caller builds the TypeScript library's workflow ID, bounded form included, its summary and its fairness key", async () => {
  const projects = ['docs', 'team/docs%', 'p'.repeat(200), 'é'.repeat(100), '日本'.repeat(40)];
  const keys = [
    'deploy-42',
    'a/b',
    '100%',
    '%2F',
    'ünï/cödé',
    '😀'.repeat(100),
    'x'.repeat(300),
    'a%'.repeat(150),
    '/'.repeat(100),
    // Cuts that land on each place of a `%2F` escape.
    ...[100, 101, 102, 103, 104, 105, 106, 107].map((n) => `${'k'.repeat(n)}${'/'.repeat(60)}`),
    ...[118, 119, 120, 121].map((n) => `${'k'.repeat(n)}😀${'é'.repeat(40)}`),
    // Not well-formed: the library still builds an ID for it (the key check refuses it first).
    `lone-\ud800-surrogate`,
  ];
  const pairs = projects.flatMap((project) => keys.map((key) => [project, key] as const));
  const prompts = [
    'Fix the docs',
    '  lots\n\nof   space\t',
    '# heading *bold* [link](x) <b> & `code` | {workflowId} $x ~ ! _',
    '1. item',
    '- item',
    '+ item',
    '=== underline',
    `${'x'.repeat(78)}😀😀 split between the halves of a pair`,
    `${'x'.repeat(79)}😀`,
    'x'.repeat(80),
    'x'.repeat(81),
    '\u202eRTL override and \u200b zero width',
    'tab\tand\u00a0nbsp\u3000ideographic space',
    'line\u2028separator',
    'bom\ufeffinside',
    '\u001b[31m red \u007f del \u0085 nel',
    UNICODE,
  ];
  const [ids, summaries, fairness] = (await interop([
    { op: 'workflowIds', pairs },
    { op: 'summaries', pairs: prompts.map((prompt) => ['team_docs#1', prompt]) },
    { op: 'fairnessKeys', projects },
  ])) as [string[], string[], string[]];
  const expected = pairs.map(([project, key]) => agentJobWorkflowId(project, key));
  assert.deepEqual(ids, expected);
  assert.ok(expected.filter((id) => id.includes('%~')).length > 50, 'the bounded form is covered');
  assert.ok(expected.every((id) => Buffer.byteLength(id) <= 255));
  assert.deepEqual(
    summaries,
    prompts.map((prompt) => agentJobSummary('team_docs#1', prompt)),
  );
  assert.deepEqual(
    fairness,
    projects.map((project) => taskPriority(project, 2).fairnessKey),
  );
});

test('the Python code passes ruff check and ruff format --check', async () => {
  const config = ['--config', join(PYTHON_CALLER_DIR, 'pyproject.toml')];
  const paths = [PYTHON_CALLER_DIR, join(PYTHON_CALLER_DIR, '..', '..', 'test', 'python-caller')];
  const check = await runPython(['-m', 'ruff', 'check', '--no-cache', ...config, ...paths]);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  const format = await runPython(['-m', 'ruff', 'format', '--check', '--no-cache', ...config, ...paths]);
  assert.equal(format.code, 0, format.stdout + format.stderr);
});

/** `payload` sealed as the codecs did before format 2: no associated data, no format entry. */
function sealedAsFormat1(payload: Payload, keyId: string, key: string): Payload {
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', Buffer.from(key, 'base64'), nonce);
  const plain = PayloadMessage.encode(payload).finish();
  return {
    metadata: { encoding: Buffer.from(SEALED_ENCODING), [KEY_ID_METADATA_KEY]: Buffer.from(keyId) },
    data: Buffer.concat([nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]),
  };
}

test('format 1 payloads (sealed before the key ID was authenticated) open on both sides; a format 2 payload relabelled or stripped of its format opens on neither', async () => {
  const key = newKey();
  const keys = ringFile(['k-new', key], ['k-old', key]);
  const codec = new AesGcmPayloadCodec(new FileKeyRing(keys));
  const original = defaultPayloadConverter.toPayload(UNICODE);
  const old = sealedAsFormat1(original, 'k-old', key);
  const [sealed] = await codec.encode([original]);
  const relabelled = {
    ...sealed!,
    metadata: { ...sealed!.metadata, [KEY_ID_METADATA_KEY]: Buffer.from('k-old') },
  };
  const stripped = { ...sealed!, metadata: { ...sealed!.metadata } };
  delete stripped.metadata[FORMAT_METADATA_KEY];
  const [answers] = (await interop([
    { op: 'open', keysFile: keys, payloads: [old, relabelled, stripped].map(toWire) },
  ])) as [{ payload?: string; error?: { type: string } }[]];
  assert.ok(answers[0]?.payload, 'Python opens format 1');
  assertSameJson(contents(fromWire(answers[0].payload)), contents(original), 'format 1 in Python');
  assertSameJson(contents((await codec.decode([old]))[0]!), contents(original), 'format 1 in TypeScript');
  for (const [i, changed] of [relabelled, stripped].entries()) {
    assert.equal(answers[i + 1]?.error?.type, 'SealedPayloadError', `Python refuses change ${i}`);
    await assert.rejects(codec.decode([changed]), (err: unknown) => {
      assert.ok(err instanceof SealedPayloadError);
      assert.equal(err.reason, 'authentication-failed');
      return true;
    });
  }
});
