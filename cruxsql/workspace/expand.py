"""ctx_expand: dereference a handle another verb issued.

Content handles (`@h:<sha8>`) return the exact stored body. Symbolic handles
(`path#qualname@Lstart`) are re-resolved against the file as it is now; when the symbol's span moved
the reply says so, and a vanished symbol is an error naming the handle.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from ..errors import NotFound
from . import handles
from .reply import Reply
from .snapshot import load


def ctx_expand(db: apsw.Connection, root: Path, handle: str) -> Reply:
    kind, match = handles.parse(handle)
    if kind == "content":
        body = handles.stored_body(db, handle)
        if body is None:
            raise NotFound(f"handle {handle!r} is unknown in this index (it may predate a rebuild; rerun the verb)")
        return Reply(f"{handle} · content\n{body}", {"handle": handle, "kind": kind, "content": body}, [])
    assert match is not None
    path, qualname, start = match.group("path"), match.group("qualname"), int(match.group("start"))
    indexed = load(db, root, path)
    candidates = [s for s in indexed.symbols if s.qualname == qualname]
    if not candidates:
        raise NotFound(f"handle {handle!r}: {qualname} is no longer defined in {indexed.path}")
    symbol = min(candidates, key=lambda s: (abs(s.start - start), s.start))
    body = "\n".join(indexed.lines[symbol.start - 1:symbol.end])
    moved = f" · moved: was L{start}, now L{symbol.start}" if symbol.start != start else ""
    text = f"{indexed.path}#{qualname} · L{symbol.start}-{symbol.end} · sha {indexed.short_sha}{moved}\n{body}"
    data = {"handle": handle, "kind": kind, "path": indexed.path, "qualname": qualname, "start": symbol.start,
            "end": symbol.end, "moved": bool(moved), "content": body}
    return Reply(text, data, [indexed.path])
