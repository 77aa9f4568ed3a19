/**
 * The one escaping module: what the API sends reaches a screen (markdown, a terminal, a message)
 * as text a person reads, never as markup or a terminal's command. No server.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  jsonText,
  markdownText,
  markdownUrl,
  quoted,
  slackLink,
  slackText,
  terminalText,
} from '../src/escape.js';

/** What CommonMark renders for backslash escapes: a backslash before ASCII punctuation is dropped. */
const rendered = (markdown: string) => markdown.replace(/\\([!-/:-@[-`{-~])/g, '$1');

/** The markdown with every backslash escape taken out: what a renderer could still act on. */
const unescaped = (markdown: string) => markdown.replace(/\\[!-/:-@[-`{-~]/g, '');

/** Any control, format or separator character, or a lone surrogate. */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

const ESC = '\u001b';
const OSC_LINK = `${ESC}]8;;https://evil.example${ESC}\\Approve${ESC}]8;;${ESC}\\`;
const ANSI_RED = `${ESC}[31mfailed${ESC}[0m`;
const BIDI = 'job_\u202egnp.exe\u202c';
const ordinary = [
  'https://github.com/sim-org/docs-site/pull/42',
  'https://x.example/pr/1?tab=files#diff-3',
  'job_7257ffd7acc149c690b09412b893e45a',
  'completed',
  '\u00e9t\u00e9-docs \u4e00\u4e8c \ud83d\ude00',
];

describe('markdownText', () => {
  test('a markdown link, an image and an autolink render as the text they are', () => {
    for (const text of [
      'https://x.example/pr/1 [Approve](https://evil.example)',
      '![x](https://evil.example/p.png)',
      '<https://evil.example>',
      '[Approve][1]\n\n[1]: https://evil.example',
    ]) {
      const markdown = markdownText(text);
      assert.doesNotMatch(unescaped(markdown), /[[\]()<>!]/, markdown);
      assert.ok(!markdown.includes('\n'), 'no line break left');
    }
    assert.equal(
      markdownText('x [Approve](https://evil.example)'),
      'x \\[Approve\\]\\(https://evil.example\\)',
    );
  });

  test('emphasis, strikethrough, code, headings, tables, HTML, entities, math and the UI placeholders', () => {
    const text = '_a_ *b* ~~c~~ `d` # e | f <b>g</b> &lt; $h$ {workflowId} \\';
    const markdown = markdownText(text);
    assert.equal(rendered(markdown), text);
    assert.doesNotMatch(unescaped(markdown), /[_*~`#|<>&${}\\]/, markdown);
    assert.ok(!markdown.includes('{workflowId}'), 'the Temporal UI fills in no placeholder');
  });

  test('what starts a block at the start of a line is escaped there', () => {
    for (const text of ['- item', '+ item', '---', '=====', '1. item', '12) item', '  - item', '> quote']) {
      const markdown = markdownText(text);
      assert.equal(rendered(markdown), text);
      assert.doesNotMatch(markdown, /^ *([-+=>]|\d+[.)])/, markdown);
    }
    assert.equal(markdownText('a-b 1. c'), 'a-b 1. c', 'only at the start');
  });

  test('line breaks, ANSI and OSC sequences and bidi characters become visible escapes', () => {
    assert.equal(markdownText('a\nb\r\n# c'), 'a\\u{a}b\\u{d}\\u{a}\\# c');
    assert.equal(markdownText(BIDI), 'job\\_\\u{202e}gnp.exe\\u{202c}');
    for (const text of [OSC_LINK, ANSI_RED, BIDI, 'a\u2028b', 'x\u0085y\u009bz', 'tag\udb40\udc41']) {
      assert.doesNotMatch(markdownText(text), UNSAFE, JSON.stringify(text));
    }
  });

  test('ordinary URLs, IDs and statuses render as they are', () => {
    for (const text of [...ordinary, 'sim-org/my_docs#1', 'a.b/c:d?e=f@g%20']) {
      assert.equal(rendered(markdownText(text)), text);
    }
    assert.equal(markdownText(ordinary[0] as string), ordinary[0], 'a plain URL is untouched');
  });
});

describe('markdownUrl', () => {
  test('an ordinary http(s) URL becomes an autolink', () => {
    assert.equal(markdownUrl(ordinary[0] as string), `<${ordinary[0]}>`);
    assert.equal(
      markdownUrl('https://github.com/my_org/repo/pull/1'),
      '<https://github.com/my_org/repo/pull/1>',
    );
  });

  test('anything an autolink would not show as it is, is text instead', () => {
    for (const url of [
      'https://x.example/pr/1 [Approve](https://evil.example)',
      'https://x.example/a>b',
      'https://x.example/?a=1&amp;b=2',
      'https://x.example/{workflowId}',
      `https://x.example/${ESC}[31m`,
      'javascript:alert(1)',
    ]) {
      assert.equal(markdownUrl(url), markdownText(url), url);
    }
  });
});

describe('terminalText', () => {
  test('ESC, whole ANSI and OSC 8 sequences, C1 controls, bidi and line breaks are shown, never sent', () => {
    assert.equal(terminalText(ANSI_RED), '\\u{1b}[31mfailed\\u{1b}[0m');
    assert.equal(
      terminalText(OSC_LINK),
      '\\u{1b}]8;;https://evil.example\\u{1b}\\Approve\\u{1b}]8;;\\u{1b}\\',
    );
    assert.equal(terminalText('a\u009b31mb\u007f'), 'a\\u{9b}31mb\\u{7f}');
    assert.equal(terminalText(BIDI), 'job_\\u{202e}gnp.exe\\u{202c}');
    assert.equal(
      terminalText('ok\r\nprLink: https://good.example'),
      'ok\\u{d}\\u{a}prLink: https://good.example',
    );
    assert.equal(
      terminalText('\u2066x\u2069\u200b\ufeff\ud800'),
      '\\u{2066}x\\u{2069}\\u{200b}\\u{feff}\\u{d800}',
    );
  });

  test('ordinary URLs, IDs, statuses and markdown characters are left as they are', () => {
    for (const text of [...ordinary, '[a](b) _c_ `d`']) assert.equal(terminalText(text), text);
  });
});

describe('jsonText and quoted', () => {
  test('the same JSON, with nothing raw that a terminal acts on', () => {
    const value = {
      id: 'job_1',
      prLink: null,
      note: `${OSC_LINK} ${ANSI_RED} ${BIDI} a\u2028b \u0085 \udb40\udc41`,
      n: 3,
    };
    for (const space of [undefined, 2]) {
      const json = jsonText(value, space);
      assert.doesNotMatch(json.replace(/\n/g, ''), UNSAFE);
      assert.deepEqual(JSON.parse(json), value);
    }
    assert.equal(jsonText({ a: 'x\u202ey' }), '{"a":"x\\u202ey"}');
    assert.equal(jsonText(undefined), 'null');
  });

  test('ordinary values are what JSON.stringify writes', () => {
    for (const text of ordinary) assert.equal(jsonText({ text }, 2), JSON.stringify({ text }, null, 2));
  });

  test('quoted: a JSON string literal that names the value exactly', () => {
    assert.equal(quoted('job_1'), '"job_1"');
    assert.equal(quoted('a"b'), '"a\\"b"');
    for (const text of [OSC_LINK, BIDI, 'a\nb', ...ordinary]) {
      const literal = quoted(text);
      assert.doesNotMatch(literal, UNSAFE);
      assert.equal(JSON.parse(literal), text);
    }
  });
});

test('slackText: &, < and > as the entities Slack documents, so no mention or link; controls as visible escapes', () => {
  assert.equal(slackText('a <!channel> & <@U1|x>'), 'a &lt;!channel&gt; &amp; &lt;@U1|x&gt;');
  assert.equal(slackText('line\nbreak\u202e'), 'line\\u{a}break\\u{202e}');
  assert.equal(
    slackLink('https://github.com/a/b/pull/1', 'Pull request'),
    '<https://github.com/a/b/pull/1|Pull request>',
  );
  assert.equal(slackLink('https://x.test/a>b', 'PR'), 'https://x.test/a&gt;b');
});
