"""Fact events Crux has no op for (`set_horizon`, `reverify`), kept where no Crux daemon reads them.

Crux changes a fact's horizon and re-verification time in memory only (`set_horizon`, `reverify` in
crates/corecrux-memory/src/fact_store.rs are never journaled), and its replay has no variant for them:
a `set_horizon` or `reverify` line in `facts.jsonl` is a parse error to Crux, which skips it and sets
`journal_replay_corruption_detected`, and its compaction, which rewrites the journal from memory,
drops it. So cruxsql appends them to `cruxsql-fact-events.jsonl` (an `OwnJournal`), in the same line
format, and replays that file after `facts.jsonl`: each sets one attribute of a fact named by id, so
applying them after the fact journal gives the state applying them in between would. A line naming
a fact the view does not hold (erased, or not yet seen) changes nothing.

What a compaction keeps: cruxsql's compaction writes each live fact with its current horizon and
re-verification time, and leaves this file as it is (replaying it again changes nothing). A Crux
compaction writes the facts as Crux holds them (without these changes); this file, replayed after,
puts them back.

Lines of these ops already in `facts.jsonl` (written before this file existed) still replay there.
A cluster node keeps them in the replicated stream instead (`Store.EXTENSIONS_IN_JOURNAL`).
"""

from __future__ import annotations

from typing import Optional

import apsw

from . import codec
from .own_journal import OwnJournal, Position
from .privacy import PrivacyPolicy
from .replay_position import read_checkpoint
from .view import Applier

EXTENSIONS_NAME = "cruxsql-fact-events.jsonl"
EXTENSION_OPS = codec.EXTENSION_OPS


def journal_for(data_dir) -> OwnJournal:
    return OwnJournal(data_dir, EXTENSIONS_NAME)


def position(db: apsw.Connection, name: str, generation: str) -> Optional[Position]:
    """How far the view of `generation` has applied own journal `name` (None: not at all)."""
    row = db.execute("SELECT byte_offset, inode, tail_hash FROM own_journal_positions WHERE name = ? "
                     "AND generation = ?", (name, generation)).fetchone()
    return Position(*row) if row else None


def replay(db: apsw.Connection, journal: OwnJournal, policy: PrivacyPolicy) -> int:
    """Apply the file's lines the view has not applied yet (all of them onto a new generation of the
    fact tables, or after the file was rewritten), in one transaction; returns how many were read.
    The caller holds the writer lock, or works on a private copy of the view."""
    cp = read_checkpoint(db)
    st = journal.stat()  # once: a file removed between two stats would leave None to read
    if st is None or cp is None:
        return 0
    applied = position(db, journal.name, cp.generation)
    start = applied.byte_offset if applied is not None and journal.still_at(applied) else 0
    if st.st_size == start and applied is not None and start:
        return 0
    applier = Applier(db, policy, cp.next_seq)
    n, end = 0, start
    with db:
        for offset, raw in journal.lines(start):
            end = offset + len(raw) + 1
            try:
                event = codec.decode_event(raw)
            except codec.CorruptLine:
                continue  # `verify` reports it (corrupt_lines)
            if event.op in EXTENSION_OPS:
                applier.apply(event, 0)
                n += 1
        record(db, journal, cp.generation, end)
    return n


def record(db: apsw.Connection, journal: OwnJournal, generation: str, end: int) -> None:
    """Note that the view has applied the file up to `end` (inside the caller's transaction)."""
    if end == 0:
        db.execute("DELETE FROM own_journal_positions WHERE name = ?", (journal.name,))
        return
    p = journal.position(end)
    db.execute("INSERT OR REPLACE INTO own_journal_positions (name, generation, byte_offset, inode, tail_hash) "
               "VALUES (?, ?, ?, ?, ?)", (journal.name, generation, p.byte_offset, p.inode, p.tail_hash))


def corrupt_lines(journal: OwnJournal) -> list[dict]:
    """The file's lines that are not a well-formed extension event (for `verify`)."""
    out = []
    for line_no, (offset, raw) in enumerate(journal.lines(), 1):
        try:
            op = codec.decode_event(raw).op
            reason = None if op in EXTENSION_OPS else f"op {op!r} does not belong in {journal.name}"
        except codec.CorruptLine as exc:
            reason = str(exc)
        if reason:
            out.append({"file": journal.name, "line_no": line_no, "byte_offset": offset, "reason": reason})
    return out
