"""A compaction's update of the view, in one SQLite transaction with the new journal's rename
(compaction.py, step 3): the event tables emptied, then filled from the lines written, the live facts
numbered by their new lines, the deleted facts gone, the seqs numbered again when replay's order
changed, the derived tables and the checkpoint following the new journal. `RewriteState` is what the
compaction's steps share, from its plan to this commit."""

from __future__ import annotations

import uuid
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, cast

import apsw

from ..facts import derived_tables, event_indexes, replay, replay_position
from ..facts.faults import crash_point
from ..recall.timeline import Timeline
from . import compaction_snapshot
from .compaction_report import CompactionReport

if TYPE_CHECKING:
    from ..facts.store import Store

_INSERT_EVENT = ("INSERT INTO {} (line_no, byte_offset, byte_length, op, fact_id, event_at, applied, "
                 "skip_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


@dataclass
class RewriteState:
    """One compaction's rewrite under the writer lock: what `compaction._plan` decides, and what writing
    the new journal learns (line numbers, times, seq order) for the view's update in the same
    transaction."""

    store: Store
    report: CompactionReport
    progress: Optional[Callable[[int, int], None]]
    direct: bool                    # the view's rows derived from the lines written (else: a replay)
    total: int                      # the view's facts (the progress bar's end)
    cp: Optional[replay_position.Checkpoint]
    carried: list[bytes]            # lines the view cannot hold, written byte for byte after the rest
    prebuilt: Optional[compaction_snapshot.PrebuiltLines]
    live: Optional[Iterator[list[tuple]]]  # the snapshot's live lines after its unchanged head
    shadow: Optional[str]           # the snapshot's shadow event tables, holding the head's rows
    kept_rows: int                  # the head: lines copied from the snapshot's file, rows already written
    onto: bool                      # the snapshot's file itself becomes the new journal
    events_table: str
    facts_table: str
    now_ns: int
    now_text: str
    prefix_size: int                # bytes of the head
    hasher: Any                     # blake3 over the new journal, the head already hashed
    generation: str = field(default_factory=lambda: uuid.uuid4().hex)
    drop_sources: list[str] = field(default_factory=list)  # canonicals whose provenance replay refuses
    dropped_indexes: list[str] = field(default_factory=list)  # event-table indexes to create again
    events: list[tuple] = field(default_factory=list)  # event rows not yet inserted
    names: list[tuple] = field(default_factory=list)   # (line_no, fact_id, role) not yet inserted
    times: array = field(default_factory=lambda: array("q"))  # each new line's event time (ns): known_at
    line_seqs: array = field(default_factory=lambda: array("q"))  # the seq each store line holds, line 1 first
    last_seq: Optional[int] = None
    renumber: bool = False          # the replay order changed: the seqs are numbered again
    line_no: int = 0                # lines written
    renamed: bool = False           # the new journal is committed

    @property
    def insert_event(self) -> str:
        return _INSERT_EVENT.format(self.events_table)


def empty_event_tables(rw: RewriteState) -> None:
    """Open the view's transaction and empty the event tables the new journal's rows go into."""
    db, shadow = rw.store.db, rw.shadow
    # Foreign keys off for this transaction (the pragma is a no-op inside one): with them on,
    # emptying journal_events and journal_event_facts ran row by row, checking each line's
    # references and journaling every page (at 1M events, most of compaction's time and
    # gigabytes of temp-file writes); off, SQLite drops the tables' pages at once. The rows
    # put back reference each other consistently by construction, and no other table of the
    # fact view has a foreign key.
    db.execute("PRAGMA foreign_keys=OFF")
    db.execute("BEGIN IMMEDIATE")
    # Bulk-load the event tables without their secondary indexes, then recreate them
    # (a sort) from their own stored definitions: much cheaper than random index inserts.
    # These tables hold line numbers, offsets, fact ids and times, never a fact's content, so
    # their pages are freed without secure_delete's zero-fill (a write of every page); it is
    # back on before anything that held content (facts, recall's text) is deleted.
    db.execute("PRAGMA secure_delete=OFF")
    # (the shadow tables were made with them, unless they changed since: `adopt_shadow_indexes`)
    live_indexes = event_indexes.live(db)
    adopted = shadow is not None and rw.prebuilt is not None and compaction_snapshot.adopt_shadow_indexes(
        db, rw.prebuilt, [sql for _, sql in live_indexes])
    for name, sql in live_indexes:
        if shadow is None:  # (with the shadow tables: dropped with the old tables in `update`)
            db.execute(f'DROP INDEX "{name}"')
        if not adopted:
            rw.dropped_indexes.append(sql)
    if shadow is None:
        for table in ("journal_event_facts", "journal_events"):
            db.execute(f"DELETE FROM {table}")
    else:
        for table in (rw.facts_table, rw.events_table):
            db.execute(f"DELETE FROM {table} WHERE line_no > ?", (rw.kept_rows,))
    db.execute("DELETE FROM journal_corrupt_lines")
    db.execute("PRAGMA secure_delete=ON")


def flush(rw: RewriteState) -> None:
    """Insert the event rows gathered so far (plain INSERTs: the tables were emptied in this transaction)."""
    db = rw.store.db
    db.executemany(rw.insert_event, rw.events)
    db.executemany(f"INSERT INTO {rw.facts_table} (line_no, fact_id, role) VALUES (?, ?, ?)", rw.names)
    rw.events.clear()
    rw.names.clear()


def update(rw: RewriteState) -> None:
    """Make the view match the new journal and commit it: the live facts' line numbers, the event
    tables swapped in, the derived tables' rewrite, the deleted facts gone, the seqs, the checkpoint."""
    db, report, cp = rw.store.db, rw.report, rw.cp
    _name_live_lines(rw)
    if rw.shadow is not None:
        _swap_in_event_tables(db, rw.events_table, rw.facts_table)
    # Derived tables keyed by fact or seq keep their rows (only the dropped facts' go).
    # (what the snapshot planned holds when the tail changed no fact's text in place: `live`)
    derived_tables.run_rewrite_hooks(db, derived_tables.Rewrite(
        cp.generation if cp else None, rw.generation, rw.line_no, not rw.renumber,
        rw.prebuilt.prepared if rw.live is not None and rw.prebuilt is not None else {}))
    db.execute("DELETE FROM facts WHERE deleted = 1")
    next_seq = (cp.next_seq if cp else 1)
    if rw.renumber:
        # Replay order changed (ties or clock skew): number the facts 1..N as a fresh replay
        # would. seq is unique, so go through negative values first. (OR FAIL: no statement
        # journal of every page of `facts` in a temp file, as in `_name_live_lines`.)
        db.execute("UPDATE OR FAIL facts SET seq = -w.n FROM (SELECT rowid AS rid, row_number() OVER "
                   "(ORDER BY stored_at_ns, fact_id) AS n FROM facts) AS w WHERE facts.rowid = w.rid")
        db.execute("UPDATE OR FAIL facts SET seq = -seq WHERE seq < 0")
        next_seq = report.facts_retained + 1
    report.seq_renumbered = rw.renumber
    for cid in rw.drop_sources:
        db.execute("DELETE FROM consolidation_sources WHERE canonical_fact_id = ?", (cid,))
    db.execute("DELETE FROM consolidation_sources WHERE canonical_fact_id NOT IN "
               "(SELECT fact_id FROM facts WHERE deleted = 0)")
    # No link sanitisation here: every link the view holds was sanitised when it was
    # replayed, and the new journal holds a subset of the same facts, unchanged.
    for sql in rw.dropped_indexes:
        db.execute(sql)
    journal = rw.store.journal
    replay_position.write_checkpoint(db, journal, report.bytes_after, report.lines_after,
                                max(next_seq, report.facts_retained + 1), rw.generation)
    # The known_at timeline follows the new journal in this transaction (not rebuilt by the
    # first query): each line's time, known here; a compacted journal has no change events.
    # Then whatever else replay keeps derived from the event tables, and what a bulk replay
    # builds: recall's text index, carried over unless the seqs were renumbered (then
    # built here, not by the first read).
    Timeline(db, journal).restart(rw.times)
    derived_tables.run_replay_hooks(db, journal)
    derived_tables.run_bulk_replay_hooks(db)
    crash_point("compact-before-view-commit")
    db.execute("COMMIT")
    db.execute("PRAGMA foreign_keys=ON")


def _name_live_lines(rw: RewriteState) -> None:
    """The live facts' lines are 1..stores, in the order written: number them in one statement from the
    seqs written (carray's rowid is the 1-based position, so the line number; ~0.6 s less at 1M facts
    than ranking the rows again with a window function), then name them in journal_event_facts.

    OR FAIL: under SQLite's default (ABORT), each of these two statements first copied the pages it
    was about to change into a statement journal, a temp file outside the data directory (/var/tmp):
    the UPDATE every page of `facts`, the values of the facts about to be erased included (345 of the
    534 MiB of temp files a 1M-event compaction wrote, both together). A failure still rolls the whole
    transaction back (`roll_back`). tests/governance/test_compaction_temp_files.py checks that no erased value
    reaches a temp file."""
    db = rw.store.db
    if rw.line_seqs:  # (carray refuses an empty buffer)
        db.execute("UPDATE OR FAIL facts SET line_no = c.rowid FROM carray(?) AS c "
                   "WHERE facts.seq = c.value", (apsw.carray(rw.line_seqs),))
    db.execute(f"INSERT OR FAIL INTO {rw.facts_table} (line_no, fact_id, role) SELECT line_no, fact_id, "
               "'stored' FROM facts INDEXED BY facts_stored_at WHERE deleted = 0 AND line_no > ? "
               "ORDER BY stored_at_ns, fact_id", (rw.kept_rows,))


def roll_back(rw: RewriteState) -> None:
    """After an error: the view's transaction rolled back and its settings restored, the shadow tables
    dropped; once the new journal is committed, the view rebuilt from it now rather than at next open."""
    db = rw.store.db
    if not db.getautocommit():
        db.execute("ROLLBACK")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA secure_delete=ON")
    if rw.shadow is not None:
        compaction_snapshot.drop_shadow_tables(db, rw.shadow)
    if rw.renamed:
        replay.rebuild(db, rw.store.journal, rw.store.policy)


def _swap_in_event_tables(db: apsw.Connection, events_table: str, facts_table: str) -> None:
    """Replace journal_events and journal_event_facts by the shadow tables, inside the compaction's
    transaction (foreign keys off). The old tables' pages are freed without secure_delete's zero-fill:
    they hold no fact content. Their indexes go with them (the shadow tables' own replace them, or the
    caller builds them again). The views and triggers that name them are dropped first and made again
    after (a RENAME checks every view and trigger, and the tables do not exist between the DROP and the
    RENAME); the RENAME turns the shadow journal_event_facts' reference to the shadow journal_events
    into one to journal_events."""
    dependents = cast(list[tuple[str, str, str]], db.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE type IN ('view', 'trigger') AND sql IS NOT NULL "
        "AND (sql LIKE '%journal_events%' OR sql LIKE '%journal_event_facts%') ORDER BY type DESC").fetchall())
    for kind, name, _ in dependents:
        db.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
    db.execute("PRAGMA secure_delete=OFF")
    db.execute("DROP TABLE journal_event_facts")
    db.execute("DROP TABLE journal_events")
    db.execute("PRAGMA secure_delete=ON")
    db.execute(f"ALTER TABLE {events_table} RENAME TO journal_events")
    db.execute(f"ALTER TABLE {facts_table} RENAME TO journal_event_facts")
    for _, _, sql in reversed(dependents):
        db.execute(sql)
