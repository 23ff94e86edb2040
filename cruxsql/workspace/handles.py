"""Handles a verb issues for what it left out, and their dereference (ctx_expand).

Two forms, both deterministic so repeated calls stay byte-stable:
- content handles `@h:<sha8>`: an exact stored blob (an omitted section's body);
- symbolic handles `path#qualname@Lstart`: re-resolved against the current index at expand time.
"""

from __future__ import annotations

import hashlib
import re
from typing import Optional

import apsw

from ..errors import InvalidInput

_SYMBOLIC = re.compile(r"(?P<path>[^#@]+)#(?P<qualname>[\w.]+)@L(?P<start>\d+)")
_CONTENT = re.compile(r"@h:[0-9a-f]{8}")


def content_handle(db: apsw.Connection, body: str) -> str:
    handle = "@h:" + hashlib.sha256(body.encode()).hexdigest()[:8]
    db.execute("INSERT OR IGNORE INTO handles(handle, kind, body) VALUES (?, 'content', ?)", (handle, body))
    return handle


def symbolic_handle(path: str, qualname: str, start: int) -> str:
    return f"{path}#{qualname}@L{start}"


def parse(handle: str) -> tuple[str, Optional[re.Match]]:
    """("content", None) or ("symbol", match); anything else is refused with both accepted shapes."""
    if _CONTENT.fullmatch(handle):
        return "content", None
    match = _SYMBOLIC.fullmatch(handle)
    if match:
        return "symbol", match
    raise InvalidInput(f"handle {handle!r} is malformed: expected @h:<8 hex> or PATH#QUALNAME@L<line>")


def stored_body(db: apsw.Connection, handle: str) -> Optional[str]:
    row = db.execute("SELECT body FROM handles WHERE handle=?", (handle,)).fetchone()
    return row[0] if row else None
