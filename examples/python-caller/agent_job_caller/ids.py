"""The names a caller gives an agent-job workflow, built as the TypeScript library builds them.

The workflow ID of a key is ``agent-job/<project>/<key>`` (src/client/ids.ts), each part with ``%``
and ``/`` percent-encoded, and never more than 255 UTF-8 bytes (src/ids.ts): a longer one keeps the
start of each long part, then ``%~`` and a 64-bit FNV-1a hash of the whole part over its UTF-16 code
units. A Python caller and a TypeScript caller that start a job with the same project and key reach
the same workflow, and so the same agent job; the tests compare both builders on the same keys.

Also here: the key check, the UI summary (the project and the prompt's start, markdown-escaped as
src/escape.ts does) and the fairness key of a start's priority.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

MAX_WORKFLOW_ID_BYTES = 255
"""Longest workflow ID built, in UTF-8 bytes: the compose file's server limit."""

CUT_MARK = "%~"
"""What marks a cut part: never in an uncut, percent-encoded part."""

MAX_FAIRNESS_KEY_BYTES = 64
"""The server's limit on a fairness key."""

_HASH_LENGTH = 16


def _utf8(text: str) -> bytes:
    # A lone surrogate counts 3 bytes, as the TypeScript count does (the U+FFFD an encoder writes).
    return text.encode("utf-8", errors="surrogatepass")


def utf8_byte_length(text: str) -> int:
    """UTF-8 length of ``text`` in bytes."""
    return len(_utf8(text))


def is_well_formed(text: str) -> bool:
    """Whether ``text`` has no lone surrogate (it then has a UTF-8 form)."""
    return not any(0xD800 <= ord(char) <= 0xDFFF for char in text)


def utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest start of ``text`` of at most ``max_bytes`` UTF-8 bytes, whole code points only."""
    used = 0
    for end, char in enumerate(text):
        used += len(_utf8(char))
        if used > max_bytes:
            return text[:end]
    return text


def id_hash(text: str) -> str:
    """64-bit FNV-1a of ``text``'s UTF-16 code units (low byte first), as 16 hex digits."""
    value = 0xCBF29CE484222325
    for byte in text.encode("utf-16-le", errors="surrogatepass"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


def fit_part(encoded: str, whole: str, max_bytes: int) -> str:
    """``encoded`` when it fits ``max_bytes``; else its start, ``%~`` and the hash of ``whole``.

    The start never ends inside a ``%XX`` escape.
    """
    if utf8_byte_length(encoded) <= max_bytes:
        return encoded
    start = utf8_prefix(encoded, max_bytes - len(CUT_MARK) - _HASH_LENGTH)
    escape = start.rfind("%")
    if escape != -1 and escape > len(start) - 3:
        start = start[:escape]
    return f"{start}{CUT_MARK}{id_hash(whole)}"


def encode_id_part(part: str) -> str:
    """``%`` and ``/`` percent-encoded, nothing else: a part never holds a separator."""
    return part.replace("%", "%25").replace("/", "%2F")


def bounded_workflow_id(
    parts: Sequence[str],
    encode: Callable[[str], str],
    build: Callable[[Sequence[str]], str],
) -> str:
    """A workflow ID from ``parts`` within 255 bytes: readable when it fits, else long parts cut."""
    encoded = [encode(part) for part in parts]
    readable = build(encoded)
    faithful = all(is_well_formed(part) for part in parts)
    if faithful and utf8_byte_length(readable) <= MAX_WORKFLOW_ID_BYTES:
        return readable
    fixed = utf8_byte_length(build(["" for _ in parts]))
    share = (MAX_WORKFLOW_ID_BYTES - fixed) // len(parts)
    cut: list[str] = []
    for part, whole in zip(encoded, parts, strict=True):
        # One byte short of the encoding forces the cut of a part that is not well-formed.
        limit = share if is_well_formed(whole) else min(share, utf8_byte_length(part) - 1)
        cut.append(fit_part(part, whole, limit))
    return build(cut)


def agent_job_workflow_id(project_id: str, key: str) -> str:
    """The workflow ID for a project and an idempotency key: ``agent-job/<project>/<key>``."""
    return bounded_workflow_id([project_id, key], encode_id_part, lambda p: f"agent-job/{p[0]}/{p[1]}")


def fairness_key(project_id: str) -> str:
    """The project as a start's fairness key, cut to the server's 64 bytes as the library cuts it."""
    return fit_part(project_id, project_id, MAX_FAIRNESS_KEY_BYTES)


def checked_key(key: str) -> str:
    """A caller's key, checked as the TypeScript library checks it.

    Raises:
        ValueError: a blank key (every caller passing one would share a workflow) or one with a lone
            surrogate (two such keys could become one).
    """
    if key.strip() == "":
        raise ValueError("key: must be a non-blank string when given (leave it out for a random one)")
    if not is_well_formed(key):
        raise ValueError("key: must be well-formed Unicode (it holds a lone UTF-16 surrogate)")
    return key


# What JavaScript's \s and trim() take as white space (Python's \s differs at the edges).
_JS_SPACE = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
_MARKDOWN_INLINE = re.compile(r"[\\`*_~\[\]()!<>&#|${}]")
_MARKDOWN_LINE_START = re.compile(r"^( *)([-+=]|[0-9]{1,9}(?=\.))")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def markdown_text(text: str) -> str:
    """``text`` for markdown, as src/escape.ts writes it: markdown characters escaped, control and
    format characters as visible ``\\u{..}`` escapes."""
    escaped = _MARKDOWN_INLINE.sub(lambda m: f"\\{m.group(0)}", text)
    escaped = _MARKDOWN_LINE_START.sub(
        lambda m: f"{m.group(1)}{m.group(2)}\\" if m.group(2)[0].isdigit() else f"{m.group(1)}\\{m.group(2)}",
        escaped,
        count=1,
    )
    return "".join(
        f"\\u{{{ord(c):x}}}" if unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in escaped
    )


def agent_job_summary(project_id: str, prompt: str) -> str:
    """The one-line summary the Temporal UI shows: the project and the prompt's first 80 characters
    (UTF-16 code units, as JavaScript counts them)."""
    flat = re.sub(f"^{_JS_SPACE}+|{_JS_SPACE}+$", "", re.sub(f"{_JS_SPACE}+", " ", prompt))
    units = flat.encode("utf-16-le", errors="surrogatepass")
    if len(units) > 160:
        # JavaScript's slice may end between the halves of a pair: the lone half is escaped below.
        flat = units[:158].decode("utf-16-le", errors="surrogatepass") + "\u2026"
    return f'Agent job in {markdown_text(project_id)}: "{markdown_text(flat)}"'
