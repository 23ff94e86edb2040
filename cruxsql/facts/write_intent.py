"""The write intent: what cruxsql's last multi-line append to `facts.jsonl` was about to write.

A mutation of several lines (a new version's `store` and its `supersede` lines) goes out in one
`write`. A crash inside that write can leave whole lines of it and not the rest: a group cut short.
Crux writes such groups itself, one line per `write` with a pause between (its `store`, then
`mark_superseded`), and its `store_synced` appends a single `store` line whose fact carries
`supersedes` with no `supersede` line at all (crates/corecrux-memory/src/fact_store.rs); both are
complete lines that Crux replays as they stand. So the shape of the journal's tail cannot tell a
cruxsql mutation cut short from a Crux one: only cruxsql's own record of what it was writing can.

Before each multi-line append, the writer (holding the writer lock) records here the journal's inode,
the offset the append starts at and, for each line, its length and CRC-32. At the next open, a tail
past the view's checkpoint is taken back out only when it is exactly a proper prefix of whole lines
of that recorded append and nothing follows it. A stale record (its append completed, the journal was
rewritten, another writer appended after it) matches nothing. The record is one line rewritten in
place and never fsynced: it matters only after a crash inside the write it describes, and if it is
lost or garbled, the lines are replayed as Crux would replay them (a new version beside the old).
The file holds offsets and checksums, never a fact's text.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

INTENT_NAME = "cruxsql-write-intent"
_FORMAT = "cruxsql-write-intent-v1"


@dataclass(frozen=True)
class Intent:
    inode: int
    start: int
    lines: tuple[tuple[int, int], ...]  # (length with the newline, crc32 of the line without it)

    @property
    def end(self) -> int:
        return self.start + sum(length for length, _ in self.lines)


def line_signature(raw: bytes) -> tuple[int, int]:
    """(length with its newline, CRC-32) of one journal line given without its newline."""
    return len(raw) + 1, zlib.crc32(raw)


class WriteIntentFile:
    """`cruxsql-write-intent` in one data directory (the caller holds the writer lock)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / INTENT_NAME
        self._fd: Optional[int] = None
        self._pid = 0

    def record(self, inode: int, start: int, signatures: Iterable[tuple[int, int]]) -> None:
        """Note that an append of lines with these signatures starts at `start` of journal `inode`."""
        body = " ".join(f"{n}:{crc}" for n, crc in signatures)
        data = f"{_FORMAT} {inode} {start} {body}\n".encode("ascii")
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._pid = os.getpid()
        # One pwrite at offset 0; whatever an older, longer record left after the newline is ignored.
        os.pwrite(self._fd, data, 0)

    def read(self) -> Optional[Intent]:
        """The last recorded intent, or None when there is none or it does not parse."""
        try:
            with open(self.path, "rb") as fh:
                text = fh.read(1 << 20).split(b"\n", 1)[0].decode("ascii")
        except (OSError, UnicodeDecodeError):
            return None
        parts = text.split(" ")
        try:
            if parts[0] != _FORMAT or len(parts) < 4:
                return None
            lines = tuple((int(n), int(crc)) for n, crc in (p.split(":") for p in parts[3:]))
            return Intent(int(parts[1]), int(parts[2]), lines)
        except ValueError:
            return None

    def close(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = None
