"""Journal compaction (`compact_journal`, corecrux-memory/src/fact_store.rs), crash-atomic (docs/architecture.md).

The new journal holds, in order: one `store` line per live fact sorted by (`stored_at`, `fact_id`);
one `consolidation_provenance` line per live canonical (sorted by id); one value-free `delete`
tombstone per deleted fact (sorted by id). Deleted facts' values are not copied forward: compaction is
the erasure primitive.

Where it differs from Crux's `compact_journal`: Crux follows a superseded fact's store line with a
`supersede` line re-stamped with the compaction time, which replay skips (its successor is not stored
yet) or applies to no effect; cruxsql writes none, because the store line already carries
`superseded_by`. The journal stays Crux-readable, to the same state, and replays without a skipped
line: `verify --strict` is clean right after a compaction (tombstones are reported as such). Corrupt
lines are never dropped silently: compaction refuses while any exist, unless told to drop them, and
then keeps them byte for byte in `facts.jsonl.corrupt.<32hex>` (mode 0600) first. A line Crux reads
but the view cannot hold (`codec.UnrepresentableLine`) is never moved out of the journal, even then:
it is written to the new journal byte for byte after the rest (`lines_carried_over` in the report)
and the view replayed from the new journal.

Facts are re-serialised from the view exactly as `Fact.to_json` writes them (by SQLite: `store_lines`),
so a fact that did not change comes out byte-identical. The view's facts hold only what the journal
said (access counts kept elsewhere by the salience lane are never baked in).

Steps: 0. without the writer lock, the live facts' lines are built from a read snapshot of the view
into an unnamed fsynced file, their event rows into shadow tables, and the derived tables plan their
own part (the text index: the deleted facts' postings; `Rewrite.prepared`) (compaction_snapshot.py); then
under the writer lock, after catching the view up (the lines appended since the snapshot: their
facts' lines are built again, the others reused byte for byte, the leading ones left as written):
1. legal-hold guard (or a complete `legal_hold_overridden` receipt, stored as a fact first); the
   corrupt-line guard;
2. `Journal.rewrite` (or `rewrite_onto`, the snapshot's file cut after its unchanged head and the rest
   appended): temp `facts.jsonl.compact-<hex>.tmp`, fsync, rename (the commit point), dir fsync;
3. the view is rewritten in one SQLite transaction, opened before step 2 and committed after the
   rename, carrying the new journal's fingerprint and a new generation (the shadow event tables
   replace the old ones in it). A crash before that commit
   leaves a view whose fingerprint no longer matches, which the next open repairs by a rebuild; an
   error after the rename rebuilds the view at once.

The view update is computed directly from what was written (no re-parse of the new journal): the new
journal holds a subset of the view's facts, unchanged, so replay would derive the same rows; replay's
own code records the event rows, decides provenance lines and writes the checkpoint.
"""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager, nullcontext
from array import array
from dataclasses import asdict, dataclass, field
from itertools import accumulate, islice, repeat
from json.encoder import encode_basestring as _jstr
from operator import itemgetter, lt
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, cast

import apsw
import blake3

from ..errors import Conflict, InvalidInput, JournalPoisoned
from ..facts import codec, derived_tables, event_indexes, replay, replay_position, timestamps, view
from ..facts.faults import crash_point
from ..facts.files import file_blake3
from ..facts.journal import JOURNAL_NAME, MAX_RECORD_BYTES, Journal
from ..recall.timeline import Timeline
from . import compaction_snapshot, erasure_lock, legal_holds, store_lines

if TYPE_CHECKING:
    from ..facts.store import Store

Progress = Optional[Callable[[int, int], None]]
_LATEST_ONLY_PREFIXES = ("__repo_registry__::", "__repo_scan__::", "__workspace_scan__::")
_BATCH = 20_000


class LegalHoldBlocked(Conflict):
    """Compaction would hard-erase facts covered by active legal holds (PermissionDenied in Crux)."""

    def __init__(self, message: str, covered: list[tuple[str, list[str]]]) -> None:
        super().__init__(message)
        self.covered = covered

    @property
    def hold_ids(self) -> list[str]:
        return sorted({h for _, hs in self.covered for h in hs})


@dataclass
class CompactionReport:
    """Crux's `CompactionReport` fields plus what cruxsql measures."""

    facts_dropped: int = 0
    facts_retained: int = 0
    tombstones_kept: int = 0
    provenance_lines: int = 0
    corrupt_lines_dropped: int = 0
    corrupt_lines_file: Optional[str] = None
    # Lines Crux reads that the view cannot hold (`codec.UnrepresentableLine`): written to the new journal
    # byte for byte, after the rest; their line numbers in the old journal.
    lines_carried_over: list[int] = field(default_factory=list)
    lines_before: int = 0
    lines_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    journal_blake3_before: Optional[str] = None
    journal_blake3_after: Optional[str] = None
    inode_before: Optional[int] = None
    inode_after: Optional[int] = None
    view_update: str = "direct"
    generation: Optional[str] = None
    override_receipt_id: Optional[str] = None
    stale_temp_files_removed: list[str] = field(default_factory=list)
    wal_checkpointed: bool = False
    seq_renumbered: bool = False
    lines_from_snapshot: bool = False  # the live lines were built before the writer lock (compaction_snapshot.py)
    lines_kept_from_snapshot: int = 0  # of which copied, with their event rows, as the snapshot phase wrote them
    seconds: float = 0.0
    seconds_locked: float = 0.0  # of which the rewrite under the writer lock

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- the legal-hold guard --------------------------------------------------------------------------


def _pruned_control_facts_covered(store: Store, holds: list[legal_holds.LegalHold]) -> list[tuple[str, list[str]]]:
    """Facts that only the journal still holds (pruned latest-only snapshots) and that a hold covers."""
    active = [h for h in holds if h.active]
    if not active:
        return []
    rows = cast(list[tuple[int, int, int]], store.db.execute(      # line numbers and byte spans
        "SELECT DISTINCT e.line_no, e.byte_offset, e.byte_length FROM journal_event_facts j "
        "JOIN journal_events e ON e.line_no = j.line_no "
        "WHERE j.role = 'stored' AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.fact_id = j.fact_id) "
        "ORDER BY e.line_no").fetchall())
    if not rows:
        return []
    out: dict[str, set[str]] = {}
    for line_no, raw in store.journal.read_lines(rows):
        try:
            event = codec.decode_event(raw)
        except codec.CorruptLine as exc:
            raise InvalidInput(f"cannot verify legal-hold coverage for fact journal line {line_no}: {exc}") from None
        for fact in codec.event_facts(event):
            if store.db.execute("SELECT 1 FROM facts WHERE fact_id = ?", (fact.fact_id,)).fetchone():
                continue
            ids = legal_holds.covering_holds(active, fact.tenant_hash or "default", fact.entity, fact.key,
                                             fact.value)
            if ids:
                out.setdefault(fact.fact_id, set()).update(ids)
    return [(fid, sorted(ids)) for fid, ids in sorted(out.items())]


def blocked_by_holds(store: Store) -> list[tuple[str, list[str]]]:
    """`(fact_id, [hold_ids])` that compaction would hard-erase although a hold covers them."""
    holds = legal_holds.resolve_holds(store.db)
    covered = dict(legal_holds.deleted_facts_covered(store.db, holds))
    for fid, ids in _pruned_control_facts_covered(store, holds):
        covered[fid] = sorted(set(covered.get(fid, [])) | set(ids))
    return sorted(covered.items())


def check_override(receipt: legal_holds.LegalHoldReceipt, covered: list[tuple[str, list[str]]]) -> None:
    """The receipt must be `legal_hold_overridden` and name every blocked fact and every hold."""
    if receipt.kind != legal_holds.KIND_OVERRIDDEN:
        raise InvalidInput("legal-hold override requires a legal_hold_overridden receipt")
    if not receipt.receipt_id.strip():
        raise InvalidInput("legal-hold override receipt needs a receipt_id")
    facts, holds = set(receipt.fact_ids), set(receipt.hold_ids)
    missing_facts = sorted(fid for fid, _ in covered if fid not in facts)
    missing_holds = sorted({h for _, hs in covered for h in hs} - holds)
    if missing_facts or missing_holds:
        detail = []
        if missing_facts:
            detail.append("facts " + ",".join(missing_facts))
        if missing_holds:
            detail.append("holds " + ",".join(missing_holds))
        raise LegalHoldBlocked(
            "legal_hold_overridden receipt does not cover every blocked fact and hold (missing "
            + "; ".join(detail) + ")", covered)


def compact(store: Store, *, override_receipt: Optional[legal_holds.LegalHoldReceipt] = None, progress: Progress = None,
            hash_before: bool = False, view_update: str = "direct", drop_corrupt: bool = False,
            for_erasure: bool = False) -> CompactionReport:
    """`compact_journal` (or, with a receipt, `compact_journal_after_legal_hold_override_receipt`).

    The live facts' lines are built first from a snapshot of the view, without the writer lock
    (compaction_snapshot.py); the lock is held for the rest (the lines appended meanwhile carried over,
    the journal and the view rewritten and swapped), and the WAL checkpoint after it runs once it is
    released, so that writers wait for neither. (An erasure deletes first, then compacts: its
    deletions are in the snapshot, not in what is carried over under the lock.)

    A compaction waits for a running erasure (the erasure lock): between its delete and its ledger's
    record of the values, an erasure's deleted facts must not be compacted away by someone else.
    `for_erasure`: the erasure's own compaction (it holds that lock)."""
    started = time.perf_counter()
    with nullcontext() if for_erasure else erasure_lock.held(store), _snapshot(store, view_update) as prebuilt:
        report = _compact_locked(store, override_receipt, progress, hash_before, view_update, drop_corrupt,
                                 prebuilt)
    report.wal_checkpointed = checkpoint_wal(store.db)
    report.seconds = round(time.perf_counter() - started, 6)
    return report


@contextmanager
def _snapshot(store: Store, view_update: str) -> Iterator[Optional[compaction_snapshot.PrebuiltLines]]:
    """The compaction's snapshot phase (`compaction_snapshot.prebuild`), closed at the end of the block."""
    prebuilt = compaction_snapshot.prebuild(store, _BATCH) if view_update == "direct" else None
    try:
        yield prebuilt
    finally:
        if prebuilt is not None:
            prebuilt.close()


def _compact_locked(store: Store, override_receipt: Optional[legal_holds.LegalHoldReceipt], progress: Progress,
                    hash_before: bool, view_update: str, drop_corrupt: bool,
                    prebuilt: Optional[compaction_snapshot.PrebuiltLines]) -> CompactionReport:
    # (its view commit makes no inline WAL checkpoint: `compact` checkpoints once the lock is released)
    paused = store.checkpointer.inline_paused() if store.checkpointer is not None else nullcontext()
    with store.writer_lock(), paused:
        locked = time.perf_counter()
        if store.journal.poisoned:
            raise JournalPoisoned("fact journal durable mutation plane is poisoned; restart required before compaction")
        store.refresh()
        covered = blocked_by_holds(store)
        receipt_id = None
        if override_receipt is None:
            if covered:
                hold_ids = sorted({h for _, hs in covered for h in hs})
                raise LegalHoldBlocked("hard erasure blocked by active legal hold(s): " + ",".join(hold_ids), covered)
        else:
            check_override(override_receipt, covered)
            legal_holds.store_receipt(store, override_receipt)
            receipt_id = override_receipt.receipt_id
        report = compact_unchecked(store, progress=progress, hash_before=hash_before, view_update=view_update,
                                   drop_corrupt=drop_corrupt, prebuilt=prebuilt, fold_wal=False)
        report.override_receipt_id = receipt_id
        report.seconds_locked = round(time.perf_counter() - locked, 6)
        return report


# --- the rewrite -----------------------------------------------------------------------------------


def _live_chunks(db) -> Iterator[list[tuple]]:
    """The live facts' store lines in the compacted journal's order, a chunk at a time (`store_lines`)."""
    return store_lines.live_chunks(db, _BATCH)


_LINE, _FACT_ID, _STORED_AT, _STORED_AT_NS, _SEQ = (itemgetter(i) for i in range(5))
_INSERT_EVENT = ("INSERT INTO {} (line_no, byte_offset, byte_length, op, fact_id, event_at, applied, "
                 "skip_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")


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


def _tail_lines(db, applier: view.Applier, now_text: str, stats: CompactionReport,
                drop_sources: list[str]) -> Iterator[tuple]:
    """The lines after the live facts' `store` lines, with the view rows a fresh replay derives from each:
    (text, op, fact_id, event_at, applied, skip_reason, [(fact_id, role)])."""
    canonicals = db.execute(
        "SELECT DISTINCT cs.canonical_fact_id, c.tenant_hash FROM consolidation_sources cs "
        "JOIN facts c ON c.fact_id = cs.canonical_fact_id WHERE c.deleted = 0 ORDER BY cs.canonical_fact_id"
    ).fetchall()
    for cid, tenant in canonicals:
        ids = [r[0] for r in db.execute(
            "SELECT source_fact_id FROM consolidation_sources WHERE canonical_fact_id = ? ORDER BY position", (cid,))]
        event = codec.ConsolidationProvenanceEvent(cid, ids, tenant, now_text)
        # Replay's own rule decides (deleted sources count as missing, as they will be in the new journal).
        applied, reason, names = applier.apply(event, 0)
        if not applied:
            drop_sources.append(cid)
        stats.provenance_lines += 1
        yield (codec.encode_event(event), "consolidation_provenance", cid, now_text, applied, reason, names)
    tail = ',"deleted_at":' + _jstr(now_text) + "}"
    for (fid,) in db.execute("SELECT fact_id FROM facts WHERE deleted = 1 ORDER BY fact_id"):
        stats.facts_dropped += 1
        stats.tombstones_kept += 1
        yield ('{"op":"delete","fact_id":' + _jstr(fid) + tail, "delete", fid, now_text, False,
               view.TOMBSTONE, ((fid, "deleted"),))


def checkpoint_wal(db, attempts: int = 20) -> bool:
    """Fold the WAL into cruxsql.db and truncate it, so old page images (with deleted values) go too.

    A read transaction in another process can keep the WAL busy: each attempt waits at most 100 ms for
    readers, and keeps writers out only while it waits and copies (`compact` runs it after releasing the
    writer lock, so a writer waits for one attempt, not for all of them). Returns False when it stayed
    busy; the next checkpoint will do it. A PASSIVE checkpoint first copies what it can without keeping
    anyone out (after a compaction, most of the WAL), so that the TRUNCATE has little left to copy while
    writers wait."""
    db.setbusytimeout(100)
    try:
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except apsw.BusyError:
            pass
        for attempt in range(attempts):
            try:
                busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except apsw.BusyError:
                busy = 1
            if not busy:
                return True
            if attempt + 1 < attempts:
                time.sleep(0.05)
        return False
    finally:
        db.setbusytimeout(30_000)


def remove_stale_temp_files(journal: Journal) -> list[str]:
    """Delete leftover `facts.jsonl.compact-*.tmp` files (the caller holds the writer lock)."""
    removed = []
    for path in sorted(journal.data_dir.glob(f"{JOURNAL_NAME}.compact-*.tmp")):
        path.unlink(missing_ok=True)
        removed.append(path.name)
    return removed


def estimate_bytes_after(store: Store) -> int:
    """The size the journal would have if compacted now (nothing is written)."""
    stats = CompactionReport()
    now_text = timestamps.format_event_time(timestamps.now_ns())
    with store.db:  # the provenance check rewrites the rows it approves: roll that back
        size = store_lines.total_bytes(store.db)
        lines = _tail_lines(store.db, view.Applier(store.db, store.policy, 0), now_text, stats, [])
        size += sum(len(line[0].encode("utf-8")) + 1 for line in lines)
        store.db.execute("SAVEPOINT keep_nothing")
        store.db.execute("ROLLBACK TO keep_nothing")
    return size


class CorruptLinesPresent(Conflict):
    """Compaction would drop undecodable journal lines; the operator must say so (`drop_corrupt`)."""


def _lines_to_carry_over(store: Store, report: CompactionReport) -> list[bytes]:
    """The lines Crux reads and the view cannot hold, byte for byte (newline included), in journal order:
    never dropped, whatever `drop_corrupt` says (a Crux daemon sharing the directory would lose them)."""
    rows = cast(list[tuple[int, int, int]], store.db.execute(
        "SELECT line_no, byte_offset, byte_length FROM journal_corrupt_lines WHERE substr(reason, 1, ?) = ? "
        "ORDER BY line_no", (len(codec.UNREPRESENTABLE), codec.UNREPRESENTABLE)).fetchall())
    report.lines_carried_over = [r[0] for r in rows]
    return [raw for _, raw in store.journal.read_spans([(r[1], r[2]) for r in rows])]


def _refuse_or_preserve_corrupt_lines(store: Store, drop_corrupt: bool, report: CompactionReport) -> None:
    """A compaction never drops a line silently: refuse while corrupt lines exist, or, when asked to
    drop them, first keep them byte for byte in a quarantine file named in the report. (Lines Crux
    reads are not among them: `_lines_to_carry_over`.)"""
    rows = cast(list[tuple[int, int, int]], store.db.execute(      # line numbers and byte spans
        "SELECT line_no, byte_offset, byte_length FROM journal_corrupt_lines WHERE substr(reason, 1, ?) != ? "
        "ORDER BY line_no", (len(codec.UNREPRESENTABLE), codec.UNREPRESENTABLE)).fetchall())
    report.corrupt_lines_dropped = len(rows)
    if not rows:
        return
    if not drop_corrupt:
        shown = ", ".join(str(r[0]) for r in rows[:10]) + (", ..." if len(rows) > 10 else "")
        raise CorruptLinesPresent(
            f"the journal has {len(rows)} corrupt line(s) (line {shown}) that compaction would drop; run "
            "`cruxsql verify` to see them, or pass --drop-corrupt to move them to a quarantine file first")
    report.corrupt_lines_file = store.journal.preserve_lines([(r[1], r[2]) for r in rows]).name


def compact_unchecked(store: Store, *, progress: Progress = None, hash_before: bool = False, view_update: str = "direct",
                      drop_corrupt: bool = False, prebuilt: Optional[compaction_snapshot.PrebuiltLines] = None,
                      fold_wal: bool = True) -> CompactionReport:
    """Rewrite the journal from the view's current state and rewrite the view to match (no hold guard).

    `view_update="direct"` derives the view's rows from the lines written; `"rebuild"` replays the new
    journal instead (slower; the two are tested equal). `prebuilt`: the live lines a snapshot gave
    (reused where the lines appended since leave them as they were). `fold_wal`: fold the WAL in at the
    end (`compact` does it after releasing the lock instead).
    """
    if view_update not in ("direct", "rebuild"):
        raise InvalidInput(f"view_update must be direct or rebuild, not {view_update!r}")
    started = time.perf_counter()
    db, journal = store.db, store.journal
    with store.writer_lock():
        store.refresh()
        report = CompactionReport()
        report.stale_temp_files_removed = remove_stale_temp_files(journal)
        compaction_snapshot.remove_stale_shadow_tables(db)
        _refuse_or_preserve_corrupt_lines(store, drop_corrupt, report)
        carried = _lines_to_carry_over(store, report)
        if carried:  # lines the view has no rows for: the view is replayed from the new journal
            view_update = "rebuild"
        st = journal.stat()
        cp = replay_position.read_checkpoint(db)
        report.bytes_before = st.st_size if st else 0
        report.inode_before = st.st_ino if st else None
        report.lines_before = cp.line_count if cp else 0
        if hash_before and st is not None:
            report.journal_blake3_before = file_blake3(journal.path)
        direct = view_update == "direct"
        report.view_update = view_update
        total = db.execute("SELECT count(*) FROM facts").get
        live = compaction_snapshot.live_chunks(store, prebuilt, _BATCH, after_unchanged=True) \
            if prebuilt is not None and direct else None
        report.lines_from_snapshot = live is not None
        # The leading lines the tail left as the snapshot has them (`prebuilt.unchanged`) are copied from
        # its file, already hashed, and their event rows were written before the lock into the shadow
        # tables, which replace the old ones below; without those tables (their schema not the one this
        # code knows, or dropped meanwhile), every line's rows are written here.
        shadow = prebuilt.shadow if live is not None and prebuilt is not None else None
        if shadow is not None and not compaction_snapshot.shadow_tables_present(db, shadow):
            shadow = None
        if shadow is None and prebuilt is not None:
            prebuilt.unchanged = 0  # (`live` then yields every line)
        kept_rows = prebuilt.unchanged if shadow is not None and prebuilt is not None else 0
        report.lines_kept_from_snapshot = kept_rows
        # With few lines after those, the snapshot's file itself becomes the new journal: its head is
        # already written and fsynced (`Journal.rewrite_onto`); the rows after it are read first.
        onto = bool(kept_rows) and prebuilt is not None and prebuilt.linkable and len(prebuilt) - kept_rows <= _BATCH
        if onto and live is not None:
            live = iter(list(live))
        events_table, facts_table = ("journal_events", "journal_event_facts") if shadow is None else \
            (compaction_snapshot.shadow_table(shadow, "events"), compaction_snapshot.shadow_table(shadow, "event_facts"))
        insert_event = _INSERT_EVENT.format(events_table)
        if progress is not None:
            progress(0, total)  # the bar appears before the slow steps, not after them
        now_ns = timestamps.now_ns()
        now_text = timestamps.format_event_time(now_ns)
        # The leading lines the snapshot holds as they are now: copied from its file, already hashed.
        prefix_size, hasher = prebuilt.prefix(kept_rows) if kept_rows and prebuilt is not None else (0, blake3.blake3())
        drop_sources: list[str] = []
        state = {"line_no": 0, "offset": 0, "stores": 0}
        generation = uuid.uuid4().hex
        renamed = False
        try:
            dropped_indexes: list[str] = []
            if direct:
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
                adopted = shadow is not None and prebuilt is not None and compaction_snapshot.adopt_shadow_indexes(
                    db, prebuilt, [sql for _, sql in live_indexes])
                for name, sql in live_indexes:
                    if shadow is None:  # (with the shadow tables: dropped with the old tables below)
                        db.execute(f'DROP INDEX "{name}"')
                    if not adopted:
                        dropped_indexes.append(sql)
                if shadow is None:
                    for table in ("journal_event_facts", "journal_events"):
                        db.execute(f"DELETE FROM {table}")
                else:
                    for table in (facts_table, events_table):
                        db.execute(f"DELETE FROM {table} WHERE line_no > ?", (kept_rows,))
                db.execute("DELETE FROM journal_corrupt_lines")
                db.execute("PRAGMA secure_delete=ON")
            events: list[tuple] = []
            names: list[tuple] = []
            times = array("q")  # each new line's event time (ns), for the known_at timeline
            line_seqs = array("q")  # the seq of the fact each store line holds, line 1 first
            order: dict[str, Any] = {"last_seq": None, "renumber": False}

            def flush() -> None:
                # plain INSERTs: the tables were emptied in this transaction
                db.executemany(insert_event, events)
                db.executemany(f"INSERT INTO {facts_table} (line_no, fact_id, role) VALUES (?, ?, ?)", names)
                events.clear()
                names.clear()

            def write_lines(emit: Callable[[bytes], None]) -> None:
                n, offset = kept_rows, prefix_size
                half = max(1, total // 2)
                if kept_rows and prebuilt is not None:
                    longest = max(prebuilt.lengths[:n]) + 1
                    if longest > MAX_RECORD_BYTES:
                        fid = next(islice(prebuilt.fact_ids(), prebuilt.lengths.index(longest - 1), None))
                        raise InvalidInput(f"fact journal record exceeds the {MAX_RECORD_BYTES}-byte append "
                                           f"ceiling (fact {fid})")
                    if not onto:
                        prebuilt.emit_prefix(prefix_size, emit)
                    times.extend(prebuilt.ns[:n])
                    line_seqs.extend(prebuilt.seqs[:n])
                    order["last_seq"] = prebuilt.seqs[n - 1]
                    order["renumber"] = prebuilt.sorted_upto < n
                    report.facts_retained += n
                    if n >= half:
                        crash_point("compact-temp-partial")  # part of the temp file is on disk
                # The live facts' store lines, a chunk at a time, built by SQLite (`store_lines`): one write
                # and one hash per chunk, and each line's bookkeeping
                # (offsets, event rows, times, the seq order check) by C-level iterators over the chunk
                # rather than a Python loop per line. Their view rows: journal_events here,
                # facts.line_no and journal_event_facts in SQL afterwards.
                for rows in live if live is not None else _live_chunks(db):
                    lines = list(map(_LINE, rows))
                    blob = b"\n".join(lines) + b"\n"
                    lengths = [n + 1 for n in map(len, lines)]
                    longest = max(lengths)
                    if longest > MAX_RECORD_BYTES:
                        row = rows[lengths.index(longest)]
                        raise InvalidInput(f"fact journal record exceeds the {MAX_RECORD_BYTES}-byte append "
                                           f"ceiling (fact {row[1]})")
                    emit(blob)
                    hasher.update(blob)
                    starts = list(accumulate(lengths, initial=offset))
                    if direct:
                        # (lines the shadow table already holds: skipped)
                        db.executemany(insert_event, islice(zip(
                            range(n + 1, n + len(rows) + 1), starts, lengths, repeat("store"), map(_FACT_ID, rows),
                            map(_STORED_AT, rows), repeat(1), repeat(None)), max(0, kept_rows - n), None))
                        times.extend(map(_STORED_AT_NS, rows))
                        seqs = list(map(_SEQ, rows))
                        line_seqs.extend(seqs)
                        chain = seqs if order["last_seq"] is None else [order["last_seq"], *seqs]
                        if not all(map(lt, chain, chain[1:])):  # replay order changed: renumber below
                            order["renumber"] = True
                        order["last_seq"] = seqs[-1]
                    n += len(rows)
                    offset = starts[-1]
                    report.facts_retained += len(rows)
                    if n >= half > n - len(rows):
                        crash_point("compact-temp-partial")  # part of the temp file is on disk
                    if progress is not None:
                        progress(min(n, total), total)
                stores = n
                applier = view.Applier(db, store.policy, 0)
                for text, op, fact_id, event_at, applied, reason, line_names in _tail_lines(
                        db, applier, now_text, report, drop_sources):
                    data = text.encode("utf-8") + b"\n"
                    emit(data)
                    hasher.update(data)
                    n += 1
                    if direct:
                        events.append((n, offset, len(data), op, fact_id, event_at, int(applied), reason))
                        times.append(now_ns)
                        names.extend((n, fid, role) for fid, role in line_names)
                        if len(events) >= _BATCH:
                            flush()
                    offset += len(data)
                for data in carried:
                    emit(data)
                    hasher.update(data)
                    n += 1
                    offset += len(data)
                state["line_no"], state["offset"], state["stores"] = n, offset, stores
                if direct:
                    flush()
                crash_point("compact-temp-complete")

            if onto and prebuilt is not None:
                _, size = journal.rewrite_onto(prebuilt.file, prefix_size, write_lines)
            else:
                _, size = journal.rewrite(write_lines, whole_lines=True)
            renamed = True
            crash_point("compact-after-rename")
            report.bytes_after = size
            report.lines_after = state["line_no"]
            report.journal_blake3_after = hasher.hexdigest()
            new_st = journal.stat()
            report.inode_after = new_st.st_ino if new_st else None
            report.generation = generation
            if direct:
                # The live facts' lines are 1..stores, in the order written: number them in one statement
                # from the seqs written (carray's rowid is the 1-based position, so the line number;
                # ~0.6 s less at 1M facts than ranking the rows again with a window function), then name
                # them in journal_event_facts.
                # OR FAIL: under SQLite's default (ABORT), each of these two statements first copied the pages
                # it was about to change into a statement journal, a temp file outside the data directory
                # (/var/tmp): the UPDATE every page of `facts`, the values of the facts about to be erased
                # included (345 of the 534 MiB of temp files a 1M-event compaction wrote, both together).
                # A failure still rolls the whole transaction back (below).
                # tests/test_compaction_temp_files.py checks that no erased value reaches a temp file.
                if line_seqs:  # (carray refuses an empty buffer)
                    db.execute("UPDATE OR FAIL facts SET line_no = c.rowid FROM carray(?) AS c "
                               "WHERE facts.seq = c.value", (apsw.carray(line_seqs),))
                db.execute(f"INSERT OR FAIL INTO {facts_table} (line_no, fact_id, role) SELECT line_no, fact_id, "
                           "'stored' FROM facts INDEXED BY facts_stored_at WHERE deleted = 0 AND line_no > ? "
                           "ORDER BY stored_at_ns, fact_id", (kept_rows,))
                if shadow is not None:
                    _swap_in_event_tables(db, events_table, facts_table)
                # Derived tables keyed by fact or seq keep their rows (only the dropped facts' go).
                # (what the snapshot planned holds when the tail changed no fact's text in place: `live`)
                derived_tables.run_rewrite_hooks(db, derived_tables.Rewrite(
                    cp.generation if cp else None, generation, state["line_no"], not order["renumber"],
                    prebuilt.prepared if live is not None and prebuilt is not None else {}))
                db.execute("DELETE FROM facts WHERE deleted = 1")
                next_seq = (cp.next_seq if cp else 1)
                if order["renumber"]:
                    # Replay order changed (ties or clock skew): number the facts 1..N as a fresh replay
                    # would. seq is unique, so go through negative values first. (OR FAIL: no statement
                    # journal of every page of `facts` in a temp file, as above.)
                    db.execute("UPDATE OR FAIL facts SET seq = -w.n FROM (SELECT rowid AS rid, row_number() OVER "
                               "(ORDER BY stored_at_ns, fact_id) AS n FROM facts) AS w WHERE facts.rowid = w.rid")
                    db.execute("UPDATE OR FAIL facts SET seq = -seq WHERE seq < 0")
                    next_seq = report.facts_retained + 1
                report.seq_renumbered = order["renumber"]
                for cid in drop_sources:
                    db.execute("DELETE FROM consolidation_sources WHERE canonical_fact_id = ?", (cid,))
                db.execute("DELETE FROM consolidation_sources WHERE canonical_fact_id NOT IN "
                           "(SELECT fact_id FROM facts WHERE deleted = 0)")
                # No link sanitisation here: every link the view holds was sanitised when it was
                # replayed, and the new journal holds a subset of the same facts, unchanged.
                for sql in dropped_indexes:
                    db.execute(sql)
                replay_position.write_checkpoint(db, journal, size, report.lines_after,
                                      max(next_seq, report.facts_retained + 1), generation)
                # The known_at timeline follows the new journal in this transaction (not rebuilt by the
                # first query): each line's time, known here; a compacted journal has no change events.
                # Then whatever else replay keeps derived from the event tables, and what a bulk replay
                # builds: recall's text index, carried over above unless the seqs were renumbered (then
                # built here, not by the first read).
                Timeline(db, journal).restart(times)
                derived_tables.run_replay_hooks(db, journal)
                derived_tables.run_bulk_replay_hooks(db)
                crash_point("compact-before-view-commit")
                db.execute("COMMIT")
                db.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            if not db.getautocommit():
                db.execute("ROLLBACK")
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("PRAGMA secure_delete=ON")
            if shadow is not None:
                compaction_snapshot.drop_shadow_tables(db, shadow)
            if renamed:
                # The new journal is committed; make the view match it now rather than at next open.
                replay.rebuild(db, journal, store.policy)
            raise
        if not direct:
            crash_point("compact-before-view-commit")
            replay.rebuild(db, journal, store.policy, progress)
            cp = replay_position.read_checkpoint(db)
            report.generation = cp.generation if cp else None
        crash_point("compact-after-view-commit")
        if fold_wal:
            report.wal_checkpointed = checkpoint_wal(db)
        if progress is not None:
            progress(total, total)
        report.seconds = report.seconds_locked = round(time.perf_counter() - started, 6)
        return report
