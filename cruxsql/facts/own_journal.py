"""A journal of cruxsql's own: an append-only JSONL file in the data directory that no Crux daemon reads.

`facts.jsonl` is shared with Crux daemons, so it carries only ops Crux replays. Records cruxsql must
keep durably and Crux has no place for go into a file of this kind instead, one file per purpose
(`extension_events.py` keeps the fact events Crux has no op for; idempotency keys could be another).
The rules are the fact journal's: the caller holds the writer lock; every line of one append goes out
in one `write`, then an fsync (and a directory fsync when the file is created); a torn last line (a
crash inside that write) is moved to `<name>.torn.<32hex>` (mode 0600) before the next append or read,
as `facts.jsonl`'s is. Readers follow a file by byte offset, with the file's inode and a hash of the
bytes before the offset to notice a rewrite (`Position`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import blake3

from ..errors import JournalError
from .files import fsync_dir
from .journal import FINGERPRINT_WINDOW, quarantine_torn_tail

_WINDOW = FINGERPRINT_WINDOW


@dataclass(frozen=True)
class Position:
    """How far a reader has followed an own journal: offset, the file's inode, a hash of the bytes before."""

    byte_offset: int
    inode: int
    tail_hash: str


class OwnJournal:
    """One cruxsql-own JSONL file `<data_dir>/<name>`."""

    def __init__(self, data_dir: Path, name: str) -> None:
        self.data_dir = Path(data_dir)
        self.name = name
        self.path = self.data_dir / name

    def stat(self) -> Optional[os.stat_result]:
        try:
            return os.stat(self.path)
        except FileNotFoundError:
            return None

    def append(self, lines: list[str]) -> Position:
        """Append the lines (one write, fsync); return the position after them. The caller holds the
        writer lock."""
        self.repair_torn_tail()
        payload = "".join(line + "\n" for line in lines).encode("utf-8")
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise JournalError(f"cannot open {self.path}: {exc.strerror}") from exc
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
            end = os.fstat(fd).st_size
        except OSError as exc:
            raise JournalError(f"cannot append to {self.path}: {exc.strerror}") from exc
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.data_dir)
        return self.position(end)

    def repair_torn_tail(self) -> Optional[Path]:
        """Move an unterminated last line to `<name>.torn.<32hex>` (0600) and truncate, as the fact
        journal's is; the caller holds the writer lock."""
        return quarantine_torn_tail(self.path)

    def position(self, offset: int) -> Position:
        """The position at `offset` (inode and the hash of the bytes just before it)."""
        with open(self.path, "rb") as fh:
            start = max(0, offset - _WINDOW)
            fh.seek(start)
            window = fh.read(offset - start)
            return Position(offset, os.fstat(fh.fileno()).st_ino, blake3.blake3(window).hexdigest())

    def still_at(self, position: Position) -> bool:
        """Whether the file still holds the bytes a reader followed up to `position`."""
        st = self.stat()
        if st is None or st.st_ino != position.inode or st.st_size < position.byte_offset:
            return False
        return self.position(position.byte_offset).tail_hash == position.tail_hash

    def lines(self, offset: int = 0) -> Iterator[tuple[int, bytes]]:
        """(offset, line without its newline) of each newline-terminated line from `offset`."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except FileNotFoundError:
            return
        pos = offset
        for raw in data.split(b"\n")[:-1]:
            yield pos, raw
            pos += len(raw) + 1
