"""Crux's chunker (corecruxd local_ingest.rs): ~1800-character chunks, boundaries after 1200, 180 characters of overlap.

Characters are Unicode scalar values (Python `str` indices), not bytes. Markdown is first split into
sections at ATX headings; each section is chunked as plain text.
"""

from __future__ import annotations

import re
from typing import Optional

TARGET_CHARS = 1800
MIN_BOUNDARY_CHARS = 1200
OVERLAP_CHARS = 180

# 1-6 `#` then an ASCII whitespace byte as Rust's `u8::is_ascii_whitespace` (no vertical tab).
_ATX_HEADING = re.compile(r"#{1,6}[ \t\n\x0c\r]")
# Unicode White_Space, as Rust's `char::is_whitespace` and `str::trim` (Python's `str.strip()` also
# strips \x1c-\x1f, so it is not used).
_UNICODE_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


def rust_trim(text: str) -> str:
    """Rust `str::trim`: strip Unicode White_Space from both ends."""
    return text.strip(_UNICODE_WHITESPACE)


def _is_rust_whitespace(char: str) -> bool:
    return char in _UNICODE_WHITESPACE


def chunk_plain_text(text: str) -> list[str]:
    """Split trimmed text into chunks of at most 1800 characters, preferring paragraph then word breaks."""
    chars = rust_trim(text)
    n = len(chars)
    if n == 0:
        return []
    if n <= TARGET_CHARS:
        return [chars]
    chunks: list[str] = []
    start = 0
    while True:
        ideal_end = min(start + TARGET_CHARS, n)
        end = ideal_end
        if ideal_end < n:
            minimum = min(start + MIN_BOUNDARY_CHARS, ideal_end)
            boundary = _boundary(chars, ideal_end, minimum)
            end = ideal_end if boundary is None else boundary
        piece = rust_trim(chars[start:end])
        if piece:
            chunks.append(piece)
        if end == n:
            return chunks
        start = end - OVERLAP_CHARS if end - OVERLAP_CHARS > start else end


def _boundary(chars: str, ideal_end: int, minimum: int) -> Optional[int]:
    """The highest cut in [minimum, ideal_end] after a blank line, else after whitespace, else None."""
    for candidate in range(ideal_end, minimum - 1, -1):
        if candidate >= 2 and chars[candidate - 2] == "\n" and chars[candidate - 1] == "\n":
            return candidate
    for candidate in range(ideal_end, minimum - 1, -1):
        if candidate >= 1 and _is_rust_whitespace(chars[candidate - 1]):
            return candidate
    return None


def _lines_keeping_newline(text: str) -> list[str]:
    """Lines split after each `\\n` only (unlike `str.splitlines`, which also splits on \\r, \\x0b, ...)."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _is_heading(line: str) -> bool:
    return _ATX_HEADING.match(line.lstrip(_UNICODE_WHITESPACE)) is not None


def chunk_markdown(text: str) -> list[str]:
    """Split markdown into sections at ATX headings (1-6 `#` then whitespace) and chunk each section."""
    sections: list[str] = []
    current: list[str] = []
    for line in _lines_keeping_newline(text):
        if _is_heading(line) and "".join(current).strip(_UNICODE_WHITESPACE):
            sections.append("".join(current))
            current = []
        current.append(line)
    if current:
        sections.append("".join(current))
    return [chunk for section in sections for chunk in chunk_plain_text(section)]
