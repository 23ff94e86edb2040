"""Driving a replay: bring the view to the journal's end (the tail past the checkpoint, or a rebuild).

A short tail (what one store() or a few writes append, or the rebuild of a small journal) is applied row
by row through `view.Applier`, one transaction per `_COMMIT_EVERY` records, each advancing the checkpoint
and running the replay hooks inside it; a longer one goes by the bulk path (`bulk.py`), whose rebuild
drops and recreates every secondary index. Either way a crash leaves the view at a committed checkpoint,
and the result equals a fresh row-by-row replay. The caller holds the journal lock.
"""

from __future__ import annotations

import uuid
from typing import Callable, Iterator, Optional

import apsw

from . import bulk, codec, derived_tables, replay_position, view
from .codec import CorruptLine
from .faults import crash_point
from .journal import MAX_RECORD_BYTES, Journal, Record
from .privacy import PrivacyPolicy

_COMMIT_EVERY = 20_000
# A replay of up to this many journal bytes (what one store() or a few writes append, or the rebuild of
# a small journal) is applied row by row; a longer one by the bulk path (bulk.py), whose rebuild drops
# and recreates every secondary index (DDL a store's first write should not pay).
ROW_PATH_MAX_BYTES = 64 * 1024


def replay(db: apsw.Connection, journal: Journal, policy: PrivacyPolicy,
           progress: Optional[Callable[[int, int], None]] = None) -> view.ReplayStats:
    """Bring the view up to the journal's end: replay the tail past the checkpoint, or rebuild.

    The caller holds the journal lock. A checkpoint whose fingerprint no longer matches the journal
    (rewritten by a compaction, another process or a Crux daemon) triggers a full rebuild.
    """
    st = journal.stat()
    cp = replay_position.read_checkpoint(db)
    stats = view.ReplayStats()
    if st is None:
        if cp is not None and cp.byte_offset > 0:
            with db:
                view.reset_facts(db)
            stats.rebuilt = True
        return stats
    if cp is not None and replay_position.replayed_offset(db, journal) is not None:
        if cp.byte_offset < st.st_size:
            _replay_records(db, journal, policy, cp, stats, progress)
        return stats
    stats.rebuilt = True
    _replay_records(db, journal, policy, None, stats, progress)
    return stats


def adopt_journal(db: apsw.Connection, journal: Journal) -> bool:
    """Rebind the checkpoint to `journal` when its bytes before the offset are the ones replayed.

    A copied or restored journal is a new file (a new inode) with the same bytes; without this its
    first open would rebuild the view. Returns whether the checkpoint was rebound.
    """
    cp = replay_position.read_checkpoint(db)
    st = journal.stat()
    if cp is None or st is None or cp.byte_offset > st.st_size:
        return False
    fp = journal.fingerprint(cp.byte_offset)
    if fp.tail_hash != cp.tail_hash:
        return False
    with db:
        db.execute("UPDATE journal_checkpoint SET inode = ? WHERE id = 1", (fp.inode,))
    return True


def rebuild(db: apsw.Connection, journal: Journal, policy: PrivacyPolicy,
            progress: Optional[Callable[[int, int], None]] = None, *, row_by_row: bool = False,
            derived: bool = True) -> view.ReplayStats:
    """Drop the fact tables and replay the whole journal (in bulk, in one transaction; `row_by_row`:
    through the view.Applier, one transaction per batch, as before the bulk path existed). `derived=False`:
    leave out the tables the replay hooks derive (verify's scratch copy compares only the others; at 1M
    facts they are ~20 s of a rebuild). The caller holds the journal lock."""
    stats = view.ReplayStats(rebuilt=True)
    if journal.stat() is None:
        with db:
            view.reset_facts(db)
    else:
        _replay_records(db, journal, policy, None, stats, progress, row_by_row, derived)
    return stats


def _replay_records(db: apsw.Connection, journal: Journal, policy: PrivacyPolicy, cp: Optional[replay_position.Checkpoint],
                    stats: view.ReplayStats, progress: Optional[Callable[[int, int], None]],
                    row_by_row: bool = False, derived: bool = True) -> None:
    """Replay past the checkpoint (`cp` None: everything, into emptied fact tables). A short replay, or
    any replay with `row_by_row`, goes through the view.Applier one record at a time; the rest in bulk."""
    offset, line_no, seq = (cp.byte_offset, cp.line_count + 1, cp.next_seq) if cp else (0, 1, 1)
    generation = cp.generation if cp else uuid.uuid4().hex
    applier = view.Applier(db, policy, seq)
    if not row_by_row:
        st = journal.stat()
        if st is not None and st.st_size - offset > ROW_PATH_MAX_BYTES:
            bulk.replay(db, journal, applier, stats, offset, line_no, generation, progress, full=cp is None,
                        derived=derived)
            return
    if cp is None:
        with db:
            view.reset_facts(db)
    records = journal.records(offset, line_no, progress)
    sanitized = False
    while not sanitized:
        batch = list(_take(records, _COMMIT_EVERY))
        if not batch:
            break
        with db:
            for rec in batch:
                _apply_record(db, applier, rec, stats)
            applier.flush()
            if len(batch) < _COMMIT_EVERY:
                applier.sanitize_links()
                sanitized = True
            last = batch[-1]
            replay_position.write_checkpoint(db, journal, last.end, last.line_no, applier.next_seq, generation)
            if derived:
                derived_tables.run_replay_hooks(db, journal)
            crash_point("replay-before-commit")
    if not sanitized:
        with db:
            applier.sanitize_links()


def _take(it: Iterator[Record], n: int) -> Iterator[Record]:
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return


def _apply_record(db: apsw.Connection, applier: view.Applier, rec: Record, stats: view.ReplayStats) -> None:
    if rec.is_blank():
        return
    try:
        if len(rec.raw) > MAX_RECORD_BYTES:
            raise CorruptLine(f"record exceeds the {MAX_RECORD_BYTES}-byte replay ceiling")
        event = codec.decode_event(rec.raw)
    except CorruptLine as exc:
        db.execute(
            "INSERT OR REPLACE INTO journal_corrupt_lines (line_no, byte_offset, byte_length, reason) VALUES (?, ?, ?, ?)",
            (rec.line_no, rec.offset, rec.length, str(exc)),
        )
        stats.corrupt.append((rec.line_no, str(exc)))
        return
    view.apply_event(applier, event, rec.line_no, rec.offset, rec.length, stats)
