/**
 * Text that came from outside (the Agent Job API's IDs, statuses, links and messages) made safe for
 * where a person reads it: markdown (the Temporal UI renders a workflow's current details and every
 * summary as markdown; a GitHub job summary would too), a terminal (the starter, the demo), or a
 * plain-text message that programs read as well (a failure's message). Nothing is refused or
 * dropped: every character the value had can still be read off the screen, only never acted on.
 *
 * Pure and free of Node modules: workflow code imports it.
 */

/**
 * Code points never written raw: C0 and C1 controls and DEL (`Cc`: ESC starts a terminal's escape
 * sequences, CR overwrites a line, LF starts a new one), format characters (`Cf`: bidi overrides and
 * isolates that reorder what follows, zero-width characters, tag characters that hide text), the
 * line and paragraph separators, and lone surrogates.
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/**
 * {@link UNSAFE} but for C0 controls: what `JSON.stringify` leaves raw. It escapes every C0 control
 * inside a string itself, and the line breaks it indents with stand outside strings, as meant.
 */
const UNSAFE_IN_JSON = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/**
 * Every character markdown may act on anywhere in a line, escaped with a backslash (CommonMark
 * renders a backslash before any ASCII punctuation as that character): emphasis and strikethrough
 * (`* _ ~`), code (`` ` ``), links and images (`[ ] ( ) !`), autolinks and HTML (`< >`), entities
 * (`&`), headings (`#`), tables (`|`), math (`$`), the backslash itself, and `{ }`, which the
 * Temporal UI fills in itself (`{workflowId}`, `{namespace}`, `{runId}`). What is left (letters,
 * digits, `. / : - = ? @ % , ; + ' "`) reads the same rendered or not, so a URL or an ID mostly
 * stays as it was.
 */
const MARKDOWN_INLINE = /[\\`*_~[\]()!<>&#|${}]/g;

/**
 * What starts a block when it begins a line, after {@link MARKDOWN_INLINE} has done its part: a
 * list item or a thematic break (`-`, `+`), a setext underline (`=`), an ordered list item (`1.`).
 * A value may be written at the start of a line, so these are escaped there too.
 */
const MARKDOWN_LINE_START = /^( *)([-+=]|\d{1,9}(?=\.))/;

/**
 * Characters of an http(s) URL that a markdown autolink (`<https://...>`) shows and links as they
 * are. `&` is left out (entities are decoded inside an autolink), and so are `{ } |` (the Temporal
 * UI's placeholders; a table's cell separator, which no escape works on inside an autolink).
 */
const AUTOLINK_URL = /^https?:\/\/[A-Za-z0-9\-._~:/?#@!$'*+,;=%]+$/;

/** `\u{1b}`: a code point as it reads in a JavaScript string, for a person to see. */
function visibleEscape(codePoint: string): string {
  return `\\u{${(codePoint.codePointAt(0) ?? 0).toString(16)}}`;
}

/** `\u001b`, `\udb40\udc01`: a code point as JSON escapes it, UTF-16 unit by unit. */
function jsonEscape(codePoint: string): string {
  let escaped = '';
  for (let i = 0; i < codePoint.length; i++) {
    escaped += `\\u${codePoint.charCodeAt(i).toString(16).padStart(4, '0')}`;
  }
  return escaped;
}

/**
 * `text` for a terminal: every control or format character (ESC, which starts every ANSI and OSC
 * sequence; C1 controls such as CSI; CR and LF; bidi overrides; zero-width characters) written as
 * a visible `\u{..}` escape, the rest as it is. For one value on a line: a line break inside it is escaped too, so
 * it cannot forge a line of its own. A backslash is left alone; `\u{1b}` already in `text` reads
 * the same as an escaped ESC, which is harmless.
 */
export function terminalText(text: string): string {
  return text.replace(UNSAFE, visibleEscape);
}

/**
 * `text` for markdown, which renders as `text` and as nothing else: every character markdown may act
 * on escaped with a backslash (see {@link MARKDOWN_INLINE}; repository names and IDs often hold `_`
 * or `#`, so nothing is refused), and control and format characters written as visible `\u{..}`
 * escapes, as {@link terminalText} does, so no line break can start a heading, a list or a quote.
 */
export function markdownText(text: string): string {
  return text
    .replace(MARKDOWN_INLINE, (char) => `\\${char}`)
    .replace(MARKDOWN_LINE_START, (_start, indent: string, marker: string) =>
      /^\d/.test(marker) ? `${indent}${marker}\\` : `${indent}\\${marker}`,
    )
    .replace(UNSAFE, visibleEscape);
}

/**
 * A URL for markdown: an autolink (`<https://...>`, which a person can click and which shows the
 * URL as it is) when it is an http(s) URL made only of characters an autolink keeps as they are
 * (no white space, controls, `<>`, `&`, `{}` or `|`); otherwise {@link markdownText}, which shows it
 * as text.
 */
export function markdownUrl(url: string): string {
  return AUTOLINK_URL.test(url) ? `<${url}>` : markdownText(url);
}

/**
 * `value` as JSON that is safe on a screen and still the same JSON: `JSON.stringify` escapes C0
 * controls, quotes and backslashes but writes C1 controls, DEL, bidi and other format characters and
 * U+2028/U+2029 raw, so those are written as `\uXXXX` escapes too (only possible inside strings, so
 * `JSON.parse` gives back the same value). `space` indents as `JSON.stringify` does. `undefined`
 * gives `null`.
 */
export function jsonText(value: unknown, space?: number): string {
  return (JSON.stringify(value, null, space) ?? 'null').replace(UNSAFE_IN_JSON, jsonEscape);
}

/**
 * `text` as a JSON string literal ({@link jsonText}): for an ID or a status inside a plain-text
 * message. The quotes show where the value starts and ends whatever it holds, nothing in it can act
 * on a terminal, and it can be copied back exactly.
 */
export function quoted(text: string): string {
  return jsonText(text);
}

/** What Slack's mrkdwn acts on and lets be escaped: its three HTML entities. */
const SLACK_ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;' };

/**
 * `text` for Slack's mrkdwn (a message's `text`, a `mrkdwn` text object): `&`, `<` and `>` as the
 * entities Slack documents, so no value can make a link, a mention (`<!channel>`, `<@U123>`) or a
 * date token, and control and format characters as visible `\u{..}` escapes, as
 * {@link terminalText} does. Slack has no escape for its emphasis markers (`* _ ~` and the
 * backtick): text that must show exactly goes in a `plain_text` object, which Slack renders as it
 * is (the notification's Slack message does so for every value from the API or a caller).
 */
export function slackText(text: string): string {
  return text.replace(/[&<>]/g, (char) => SLACK_ENTITIES[char] ?? char).replace(UNSAFE, visibleEscape);
}

/**
 * A link in Slack's mrkdwn, `<url|label>`: only for an http(s) URL of characters that cannot end
 * the link or start another (no white space, controls, `<>`, `|` or `&`); otherwise the URL as
 * {@link slackText}, which shows it without linking it. `label` is the caller's own words
 * (`Pull request`), without `|`.
 */
export function slackLink(url: string, label: string): string {
  if (!AUTOLINK_URL.test(url)) return slackText(url);
  return `<${url}|${slackText(label)}>`;
}
