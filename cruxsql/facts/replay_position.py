"""The view's checkpoint: how far it has replayed the journal, and the journal's fingerprint there.

One row (`journal_checkpoint`, id 1) says the view holds the journal's first `byte_offset` bytes
(`line_count` lines), with the inode and a hash of the bytes before that offset, the next fact seq and
the view's generation. It is written in the same transaction as what it describes, so a view that lost
its last transactions lost their checkpoint with them and replays those lines again. The journal no
longer matching the fingerprint (rewritten by a compaction, replaced) means a rebuild.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import apsw

from . import timestamps
from .journal import Journal


@dataclass(frozen=True)
class Checkpoint:
    byte_offset: int
    line_count: int
    inode: int
    tail_hash: str
    next_seq: int
    generation: str


def read_checkpoint(db: apsw.Connection) -> Optional[Checkpoint]:
    row = db.execute(
        "SELECT byte_offset, line_count, inode, tail_hash, next_seq, generation FROM journal_checkpoint WHERE id = 1"
    ).fetchone()
    return Checkpoint(*row) if row else None


def replayed_offset(db: apsw.Connection, journal: Journal) -> Optional[int]:
    """How far the view has replayed this journal: the checkpoint's offset while its fingerprint still
    matches the journal, else None (no checkpoint, or the journal was rewritten: rebuild)."""
    cp = read_checkpoint(db)
    st = journal.stat()
    if cp is None or st is None or cp.byte_offset > st.st_size or cp.inode != st.st_ino:
        return None
    return cp.byte_offset if journal.fingerprint(cp.byte_offset).tail_hash == cp.tail_hash else None


def write_checkpoint(db: apsw.Connection, journal: Journal, offset: int, line_count: int, next_seq: int,
                     generation: str) -> None:
    """Record that the view holds the journal's first `offset` bytes (`line_count` lines), with their
    fingerprint; an empty journal has no checkpoint. Inside the caller's transaction."""
    if offset == 0:
        db.execute("DELETE FROM journal_checkpoint")
        return
    fp = journal.fingerprint(offset)
    db.execute(
        "INSERT OR REPLACE INTO journal_checkpoint (id, byte_offset, line_count, inode, tail_hash, next_seq, "
        "generation, updated_at_ns) VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
        (offset, line_count, fp.inode, fp.tail_hash, next_seq, generation, timestamps.now_ns()),
    )
