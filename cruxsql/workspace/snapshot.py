"""One indexed file as the verbs see it: its row, its current text (never stale) and its symbols."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import apsw

from ..errors import InvalidInput, NotFound
from .indexer import Indexer, content_sha
from .outline import Symbol
from .paths import read_text, resolve_inside


@dataclass(frozen=True)
class IndexedFile:
    file_id: int
    path: str
    lang: str
    path_class: str
    sha: str
    text: str
    tokens: int
    approx: str
    symbols: list[Symbol]

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def short_sha(self) -> str:
        return self.sha[:8]


def load(db: apsw.Connection, root: Path, rel: str) -> IndexedFile:
    """The file at `rel` (refused outside the workspace); re-indexed first if it changed since indexing."""
    real, rel = resolve_inside(root, rel)
    if not real.is_file():
        raise NotFound(f"path {rel!r} is not a file in the workspace")
    row = _row(db, rel)
    data = real.read_bytes()
    sha = content_sha(data)
    if row is None or row[4] != sha:
        text, reason = read_text(real)
        if text is None:
            raise InvalidInput(f"path {rel!r} is skipped: {reason}")
        skip = db.execute("SELECT reason FROM skipped WHERE path=?", (rel,)).fetchone()
        if row is None and skip:
            raise InvalidInput(f"path {rel!r} is skipped: {skip[0]}")
        with db:
            Indexer(db, root).store_file(rel, text, sha, real.stat().st_mtime_ns, len(data), row[0] if row else None)
        row = _row(db, rel)
    text = data.decode("utf-8")
    symbols = [Symbol(*r) for r in db.execute(
        "SELECT name, qualname, kind, start, end, signature, depth, doc FROM symbols WHERE file_id=? "
        "ORDER BY start, depth", (row[0],))]
    return IndexedFile(row[0], rel, row[2], row[3], sha, text, row[5], row[6], symbols)


def _row(db: apsw.Connection, rel: str):
    return db.execute("SELECT file_id, path, lang, path_class, sha, tokens, approx FROM files WHERE path=?",
                      (rel,)).fetchone()
