/**
 * The pure pieces of job-end notifications, no server: the webhook signature and a receiver's
 * check of it, the targets' JSON (and its file re-read on a fake clock when a Secret is swapped),
 * the failure policy's delivery column and waits, the notice as a Slack message, and the
 * `notify` name's shape. No error or reason here may hold a URL or a secret.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ConfigError } from '../../src/config/settings.js';
import { loadNotifySettings } from '../../src/config/worker.js';
import { InvalidInputError } from '../../src/contract.js';
import { resolveInput } from '../../src/input.js';
import { DELIVERY_BACKOFF, nextDeliveryDelayMs } from '../../src/failure-policy/backoff.js';
import { FailureKind } from '../../src/failure-policy/kinds.js';
import { formatBound } from '../../src/failure-policy/messages.js';
import { slackMessage, type JobEndNotice } from '../../src/notify/notice.js';
import { noticeRequest } from '../../src/notify/sender.js';
import { signNotice, verifyNotice } from '../../src/notify/signature.js';
import { FileNotifyTargets, NotifyTargetsError, parseNotifyTargets } from '../../src/notify/targets.js';
import { SecretVolume } from '../secret-volume.js';

const root = mkdtempSync(join(tmpdir(), 'notify-unit-'));
after(() => rmSync(root, { recursive: true, force: true }));

const SECRET = 'a-shared-secret-of-at-least-32-characters';
const HOOK_URL = 'https://hooks.example.com/agent-jobs/very-secret-path-token';

const notice: JobEndNotice = {
  type: 'agent-job.ended',
  deliveryId: '0b6f4f0e-0000-4000-8000-000000000001',
  workflowId: 'agent-job/docs-site/release-42',
  projectId: 'docs-site',
  outcome: 'completed',
  jobId: 'job_1',
  prLink: 'https://github.com/acme/docs/pull/7',
  job: { id: 'job_1', status: 'completed', prLink: 'https://github.com/acme/docs/pull/7' },
  failure: null,
  polls: 4,
  turns: 1,
  created: true,
  resent: 0,
  endedAt: '2026-11-27T21:00:00.000Z',
};

test('the signature is HMAC-SHA256 of "<timestamp>.<body>", hex, with a v1= prefix (a known vector)', () => {
  // echo -n '1700000000.{"a":1}' | openssl dgst -sha256 -hmac 'a-shared-secret-of-at-least-32-characters'
  assert.equal(
    signNotice(SECRET, 1_700_000_000, '{"a":1}'),
    'v1=5cc368b3c3804d928cd08c494750e0a4fbdf8082df4b37960b1d1eec4e7c797f',
  );
});

test('a receiver accepts the signed request, and refuses another body, secret, timestamp or an old one', () => {
  const { body, headers } = noticeRequest(
    { type: 'webhook', url: HOOK_URL, secret: SECRET },
    notice,
    1_700_000_000_500,
  );
  const check = (over: Partial<Parameters<typeof verifyNotice>[0]>) =>
    verifyNotice({
      secret: SECRET,
      body,
      signature: headers['x-agent-job-signature'],
      timestamp: headers['x-agent-job-timestamp'],
      nowSeconds: 1_700_000_010,
      ...over,
    });
  assert.equal(headers['x-agent-job-timestamp'], '1700000000');
  assert.equal(headers['x-agent-job-delivery'], notice.deliveryId);
  assert.equal(check({}), null);
  assert.equal(check({ body: body.replace('job_1', 'job_2') }), 'the signature does not match');
  assert.equal(check({ secret: `${SECRET}x` }), 'the signature does not match');
  assert.equal(check({ timestamp: '1700000001' }), 'the signature does not match');
  assert.equal(check({ nowSeconds: 1_700_000_000 + 301 }), 'the timestamp is outside the tolerance');
  assert.equal(check({ signature: undefined }), 'no signature or timestamp header');
  assert.equal((JSON.parse(body) as JobEndNotice).deliveryId, notice.deliveryId);
});

test('a Slack request is the Slack message, unsigned: the webhook URL is its secret', () => {
  const { body, headers } = noticeRequest({ type: 'slack', url: HOOK_URL }, notice, 0);
  assert.equal(headers['x-agent-job-signature'], undefined);
  assert.deepEqual(JSON.parse(body), slackMessage(notice));
});

test("the Slack message's text escapes &, < and > (no mention, no link; emphasis marks stay, Slack has no escape for them), and its plain_text fields keep values exact", () => {
  const hostile = { ...notice, projectId: 'docs <!channel> & *bold*', jobId: 'job_<@U123>' };
  const message = slackMessage(hostile) as {
    text: string;
    blocks: { fields?: { type: string; text: string }[] }[];
  };
  assert.equal(
    message.text,
    'Agent job completed in project docs &lt;!channel&gt; &amp; *bold*, job job_&lt;@U123&gt;: ' +
      '<https://github.com/acme/docs/pull/7|Pull request>',
  );
  const fields = message.blocks[0]?.fields ?? [];
  assert.ok(fields.every((field) => field.type === 'plain_text'));
  assert.ok(fields.some((field) => field.text === 'Project: docs <!channel> & *bold*'));
  const oddLink = slackMessage({ ...notice, prLink: 'https://x.test/a|b>c' }) as { text: string };
  assert.ok(!oddLink.text.includes('<https://x.test'), 'a URL that would break a link is shown as text');
});

test('targets: a webhook and a Slack target parse; every bad one is refused naming the target and field, never the value', () => {
  const parsed = parseNotifyTargets(
    JSON.stringify({
      ci: { type: 'webhook', url: HOOK_URL, secret: SECRET },
      team: { type: 'slack', url: HOOK_URL },
    }),
  );
  assert.ok('value' in parsed);
  assert.deepEqual([...parsed.value.keys()], ['ci', 'team']);
  const cases: [unknown, RegExp][] = [
    [
      { ci: { type: 'webhook', url: HOOK_URL, secret: 'short-very-secret' } },
      /target "ci": secret must be a string of at least 32/,
    ],
    [
      { ci: { type: 'webhook', url: 'http://hooks.example.com/very-secret-path-token', secret: SECRET } },
      /target "ci": url must be https/,
    ],
    [
      { ci: { type: 'slack', url: 'https://user:very-secret-path-token@hooks.example.com/' } },
      /url must not carry a user or password/,
    ],
    [{ ci: { type: 'email', url: HOOK_URL } }, /target "ci": must be an object with "type"/],
    [{ ci: { type: 'slack', url: HOOK_URL, secrett: SECRET } }, /unknown field "secrett"/],
    [{ 'bad name': { type: 'slack', url: HOOK_URL } }, /target name "bad name" is not/],
    [['very-secret-path-token'], /must be one JSON object/],
  ];
  for (const [json, reason] of cases) {
    const result = parseNotifyTargets(JSON.stringify(json));
    assert.ok('reason' in result, JSON.stringify(json));
    assert.match(result.reason, reason);
    assert.ok(!result.reason.includes('very-secret') && !result.reason.includes(SECRET), result.reason);
  }
  const notJson = parseNotifyTargets(`{"ci": ${HOOK_URL}`);
  assert.ok('reason' in notJson && !notJson.reason.includes('very-secret'));
  assert.ok('value' in parseNotifyTargets('{"local":{"type":"slack","url":"http://127.0.0.1:9/x"}}'));
});

test('a targets file is re-read when its Secret is swapped, on a fake clock; a broken swap keeps the last good targets', () => {
  const volume = new SecretVolume(
    root,
    JSON.stringify({ ci: { type: 'webhook', url: HOOK_URL, secret: SECRET } }),
  );
  let now = 0;
  const events: string[] = [];
  const targets = new FileNotifyTargets(volume.path, {
    checkIntervalMs: 1_000,
    now: () => now,
    onEvent: (event) => events.push(JSON.stringify(event)),
  });
  assert.deepEqual([...targets.current().keys()], ['ci']);
  volume.swap(
    JSON.stringify({
      ci: { type: 'webhook', url: HOOK_URL, secret: SECRET },
      team: { type: 'slack', url: HOOK_URL },
    }),
  );
  assert.deepEqual([...targets.current().keys()], ['ci'], 'not checked again within the interval');
  now += 1_000;
  assert.deepEqual([...targets.current().keys()], ['ci', 'team']);
  volume.swap('{"ci": {"type": "webhook", "url": "https://hooks.example.com/very-secret-path-token"}}');
  now += 1_000;
  assert.deepEqual([...targets.current().keys()], ['ci', 'team'], 'the last good targets stay');
  assert.ok(events.some((event) => /unusable.*secret must be/.test(event)));
  assert.ok(
    events.every((event) => !event.includes('very-secret') && !event.includes(SECRET)),
    events.join('\n'),
  );
  assert.throws(() => new FileNotifyTargets(join(root, 'missing')), NotifyTargetsError);
});

test('AGENT_NOTIFY_TARGETS[_FILE] and AGENT_NOTIFY_RETRY_FOR: defaults, one of the two, errors without the content', () => {
  assert.equal(loadNotifySettings({}), null);
  const inline = loadNotifySettings({
    AGENT_NOTIFY_TARGETS: JSON.stringify({ team: { type: 'slack', url: HOOK_URL } }),
  });
  assert.equal(inline?.retryForMs, 24 * 60 * 60_000);
  assert.equal(inline?.file, null);
  assert.equal(
    loadNotifySettings({ AGENT_NOTIFY_TARGETS: '{}', AGENT_NOTIFY_RETRY_FOR: '90m' })?.retryForMs,
    90 * 60_000,
  );
  const bad = () =>
    loadNotifySettings({
      AGENT_NOTIFY_TARGETS: JSON.stringify({ team: { type: 'slack', url: 'ftp://very-secret' } }),
    });
  assert.throws(bad, (err: unknown) => err instanceof ConfigError && !err.message.includes('very-secret'));
  assert.throws(
    () => loadNotifySettings({ AGENT_NOTIFY_TARGETS: '{}', AGENT_NOTIFY_TARGETS_FILE: '/x' }),
    /not both/,
  );
});

test('delivery policy: 5xx, 408, 429 and network failures are tried again with growing waits; other 4xx and redirects stop', () => {
  const half = () => 0.5;
  const wait = (kind: FailureKind, attempt: number, retryAfterMs: number | null = null) =>
    nextDeliveryDelayMs({ kind, attempt, retryAfterMs, random: half });
  assert.equal(wait(FailureKind.ServerError, 1), 5_500);
  assert.equal(wait(FailureKind.ServerError, 2), 11_000);
  assert.equal(wait(FailureKind.ServerError, 30), DELIVERY_BACKOFF.maximumIntervalMs * 1.1);
  assert.equal(wait(FailureKind.NotProcessed, 1), 5_500);
  assert.equal(wait(FailureKind.NotConnected, 1), 5_500);
  assert.equal(wait(FailureKind.NoAnswerInTime, 1), 5_500);
  assert.equal(wait(FailureKind.RateLimited, 1, 60_000), 66_000, '429 honours Retry-After');
  assert.equal(wait(FailureKind.ServerError, 1, 60_000), 5_500, 'a 500 does not');
  for (const kind of [
    FailureKind.Malformed,
    FailureKind.NotFound,
    FailureKind.Forbidden,
    FailureKind.KeyRefused,
    FailureKind.Redirect,
  ]) {
    assert.equal(wait(kind, 1), null, kind);
  }
});

test('notify in the input: a name of letters, digits, ".", "_", "-" up to 64; anything else is InvalidInput naming notify', () => {
  assert.equal(resolveInput({ projectId: 'p', prompt: 'x' }).notify, null);
  assert.equal(
    resolveInput({ projectId: 'p', prompt: 'x', notify: 'ci.docs_team-1' }).notify,
    'ci.docs_team-1',
  );
  for (const notify of ['', ' ci', 'ci\n', 'a'.repeat(65), '-ci', 'ci/x', 42, null]) {
    assert.throws(
      () => resolveInput({ projectId: 'p', prompt: 'x', notify }),
      (err: unknown) => err instanceof InvalidInputError && err.field === 'notify',
      JSON.stringify(notify),
    );
  }
});

test('the bound as AGENT_NOTIFY_RETRY_FOR is written', () => {
  assert.deepEqual([24 * 3_600_000, 90 * 60_000, 3_000].map(formatBound), ['24h', '90m', '3s']);
});
