/**
 * Text from outside (the API's IDs, statuses, links, messages) made safe where a person reads it:
 * markdown (the Temporal UI, a GitHub job summary), a terminal, Slack, a plain-text message. Nothing
 * is dropped: every character can still be read, never acted on. Pure: workflow code imports it.
 */

/**
 * Code points never written raw: C0 and C1 controls and DEL (`Cc`: ESC starts a terminal's escape
 * sequences, CR overwrites a line, LF starts a new one), format characters (`Cf`: bidi overrides and
 * isolates that reorder what follows, zero-width characters, tag characters that hide text), the
 * line and paragraph separators, and lone surrogates.
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/** {@link UNSAFE} but for C0 controls, which `JSON.stringify` escapes inside strings itself. */
const UNSAFE_IN_JSON = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;

/**
 * Every character markdown may act on anywhere in a line, escaped with a backslash (CommonMark
 * renders `\` before ASCII punctuation as that character), and `{ }`, which the Temporal UI fills
 * in itself (`{workflowId}`). What is left reads the same rendered or not, so a URL mostly stays.
 */
const MARKDOWN_INLINE = /[\\`*_~[\]()!<>&#|${}]/g;

/** What starts a block at the start of a line once {@link MARKDOWN_INLINE} is done: `- + = 1.`. */
const MARKDOWN_LINE_START = /^( *)([-+=]|\d{1,9}(?=\.))/;

/**
 * An http(s) URL that a markdown autolink (`<https://...>`) shows as it is: without `&` (entities
 * are decoded in one) and `{ } |` (the UI's placeholders; a table's cell separator).
 */
const AUTOLINK_URL = /^https?:\/\/[A-Za-z0-9\-._~:/?#@!$'*+,;=%]+$/;

/** `\u{1b}`: a code point as it reads in a JavaScript string, for a person to see. */
function visibleEscape(codePoint: string): string {
  return `\\u{${(codePoint.codePointAt(0) ?? 0).toString(16)}}`;
}

/** `\u001b`, `\udb40\udc01`: a code point as JSON escapes it, UTF-16 unit by unit. */
function jsonEscape(codePoint: string): string {
  return codePoint.replace(/[^]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `text` for a terminal, one value a line: every {@link UNSAFE} character as a visible `\u{..}` escape. */
export function terminalText(text: string): string {
  return text.replace(UNSAFE, visibleEscape);
}

/**
 * `text` for markdown, rendered as `text` and nothing else (IDs often hold `_` or `#`, so nothing is
 * refused): {@link UNSAFE} characters as in {@link terminalText}, so no line break starts a block.
 */
export function markdownText(text: string): string {
  return text
    .replace(MARKDOWN_INLINE, (char) => `\\${char}`)
    .replace(MARKDOWN_LINE_START, (_start, indent: string, marker: string) =>
      /^\d/.test(marker) ? `${indent}${marker}\\` : `${indent}\\${marker}`,
    )
    .replace(UNSAFE, visibleEscape);
}

/** A URL for markdown: an autolink when {@link AUTOLINK_URL} allows, else {@link markdownText}. */
export function markdownUrl(url: string): string {
  return AUTOLINK_URL.test(url) ? `<${url}>` : markdownText(url);
}

/**
 * `value` as JSON that is safe on a screen and still the same JSON: what `JSON.stringify` writes
 * raw (C1 controls, DEL, format characters, U+2028/9) as `\uXXXX` escapes. `undefined` gives `null`.
 */
export function jsonText(value: unknown, space?: number): string {
  return (JSON.stringify(value, null, space) ?? 'null').replace(UNSAFE_IN_JSON, jsonEscape);
}

/** `text` as a JSON string literal ({@link jsonText}) inside a plain-text message: it can be copied back. */
export const quoted: (text: string) => string = jsonText;

/** What Slack's mrkdwn acts on and lets be escaped: its three HTML entities. */
const SLACK_ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;' };

/**
 * `text` for Slack's mrkdwn: `&`, `<` and `>` as entities, so no value makes a link, a mention
 * (`<!channel>`) or a date token, and {@link UNSAFE} characters as in {@link terminalText}. Slack
 * has no escape for `* _ ~` and the backtick: exact text goes in a `plain_text` object instead.
 */
export function slackText(text: string): string {
  return text.replace(/[&<>]/g, (char) => SLACK_ENTITIES[char] ?? char).replace(UNSAFE, visibleEscape);
}

/**
 * A Slack mrkdwn link `<url|label>` for an {@link AUTOLINK_URL} (nothing that ends the link or starts
 * another), else the URL unlinked by {@link slackText}. `label` is the caller's own words, no `|`.
 */
export function slackLink(url: string, label: string): string {
  return AUTOLINK_URL.test(url) ? `<${url}|${slackText(label)}>` : slackText(url);
}
