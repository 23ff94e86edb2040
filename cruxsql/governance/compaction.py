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
1. legal-hold guard (hold_guard.py; or a complete `legal_hold_overridden` receipt, stored as a fact
   first); the corrupt-line guard;
2. `Journal.rewrite` (or `rewrite_onto`, the snapshot's file cut after its unchanged head and the rest
   appended): temp `facts.jsonl.compact-<hex>.tmp`, fsync, rename (the commit point), dir fsync;
3. the view is rewritten (compaction_view.py) in one SQLite transaction, opened before step 2 and
   committed after the rename, carrying the new journal's fingerprint and a new generation (the shadow
   event tables replace the old ones in it). A crash before that commit leaves a view whose
   fingerprint no longer matches, which the next open repairs by a rebuild; an
   error after the rename rebuilds the view at once.

The view update is computed directly from what was written (no re-parse of the new journal): the new
journal holds a subset of the view's facts, unchanged, so replay would derive the same rows; replay's
own code records the event rows, decides provenance lines and writes the checkpoint.
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext
from functools import partial
from itertools import accumulate, islice, repeat
from json.encoder import encode_basestring as _jstr
from operator import itemgetter, lt
from typing import TYPE_CHECKING, Callable, Iterator, Optional, cast

import apsw
import blake3

from ..errors import Conflict, InvalidInput, JournalPoisoned
from ..facts import codec, replay, replay_position, timestamps, view
from ..facts.faults import crash_point
from ..facts.files import file_blake3
from ..facts.journal import JOURNAL_NAME, MAX_RECORD_BYTES, Journal
from . import compaction_snapshot, compaction_view, erasure_lock, legal_holds, store_lines
from .compaction_report import CompactionReport
from .compaction_view import RewriteState
from .hold_guard import LegalHoldBlocked, blocked_by_holds, check_override

if TYPE_CHECKING:
    from ..facts.store import Store

Progress = Optional[Callable[[int, int], None]]
_BATCH = 20_000


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

    Steps, each a function of the `RewriteState` they share: `_plan`, then in one view transaction
    `compaction_view.empty_event_tables`, `_write_journal` (its commit point the rename) and
    `compaction_view.update`, or `compaction_view.roll_back` on any error; without the direct view
    update, a replay of the new journal instead.
    """
    if view_update not in ("direct", "rebuild"):
        raise InvalidInput(f"view_update must be direct or rebuild, not {view_update!r}")
    started = time.perf_counter()
    with store.writer_lock():
        store.refresh()
        rw = _plan(store, prebuilt, progress, hash_before, view_update, drop_corrupt)
        report = rw.report
        try:
            if rw.direct:
                compaction_view.empty_event_tables(rw)
            _write_journal(rw)
            if rw.direct:
                compaction_view.update(rw)
        except BaseException:
            compaction_view.roll_back(rw)
            raise
        if not rw.direct:
            crash_point("compact-before-view-commit")
            replay.rebuild(store.db, store.journal, store.policy, progress)
            cp = replay_position.read_checkpoint(store.db)
            report.generation = cp.generation if cp else None
        crash_point("compact-after-view-commit")
        if fold_wal:
            report.wal_checkpointed = checkpoint_wal(store.db)
        if progress is not None:
            progress(rw.total, rw.total)
        report.seconds = report.seconds_locked = round(time.perf_counter() - started, 6)
        return report


def _plan(store: Store, prebuilt: Optional[compaction_snapshot.PrebuiltLines], progress: Progress,
          hash_before: bool, view_update: str, drop_corrupt: bool) -> RewriteState:
    """Clear what an earlier compaction left, guard the corrupt lines, record the journal as it is, and
    decide how much of the snapshot is reused (its head copied as written, its shadow tables adopted)."""
    db, journal = store.db, store.journal
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
    # tables, which replace the old ones in `compaction_view.update`; without those tables (their schema not the
    # one this code knows, or dropped meanwhile), every line's rows are written here.
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
    if progress is not None:
        progress(0, total)  # the bar appears before the slow steps, not after them
    now_ns = timestamps.now_ns()
    # The leading lines the snapshot holds as they are now: copied from its file, already hashed.
    prefix_size, hasher = prebuilt.prefix(kept_rows) if kept_rows and prebuilt is not None else (0, blake3.blake3())
    return RewriteState(store, report, progress, direct, total, cp, carried, prebuilt, live, shadow, kept_rows,
                        onto, events_table, facts_table, now_ns, timestamps.format_event_time(now_ns), prefix_size,
                        hasher)


def _write_journal(rw: RewriteState) -> None:
    """Write the new journal and rename it over the old one (the commit point), then report it."""
    journal, report, prebuilt = rw.store.journal, rw.report, rw.prebuilt
    if rw.onto and prebuilt is not None:
        _, size = journal.rewrite_onto(prebuilt.file, rw.prefix_size, partial(_write_lines, rw))
    else:
        _, size = journal.rewrite(partial(_write_lines, rw), whole_lines=True)
    rw.renamed = True
    crash_point("compact-after-rename")
    report.bytes_after = size
    report.lines_after = rw.line_no
    report.journal_blake3_after = rw.hasher.hexdigest()
    new_st = journal.stat()
    report.inode_after = new_st.st_ino if new_st else None
    report.generation = rw.generation


def _write_lines(rw: RewriteState, emit: Callable[[bytes], None]) -> None:
    """The new journal's lines, in order: the snapshot's head, the live facts' store lines, the
    provenance lines and tombstones, then the lines carried over."""
    n, offset = _write_head(rw, emit)
    n, offset = _write_live_lines(rw, emit, n, offset)
    n, offset = _write_tail_lines(rw, emit, n, offset)
    for data in rw.carried:
        emit(data)
        rw.hasher.update(data)
        n += 1
        offset += len(data)
    rw.line_no = n
    if rw.direct:
        compaction_view.flush(rw)
    crash_point("compact-temp-complete")


def _write_head(rw: RewriteState, emit: Callable[[bytes], None]) -> tuple[int, int]:
    """The snapshot's head (unless the new journal is its file already): (lines, bytes) written."""
    n, prebuilt = rw.kept_rows, rw.prebuilt
    if n and prebuilt is not None:
        longest = max(prebuilt.lengths[:n]) + 1
        if longest > MAX_RECORD_BYTES:
            fid = next(islice(prebuilt.fact_ids(), prebuilt.lengths.index(longest - 1), None))
            raise InvalidInput(f"fact journal record exceeds the {MAX_RECORD_BYTES}-byte append "
                               f"ceiling (fact {fid})")
        if not rw.onto:
            prebuilt.emit_prefix(rw.prefix_size, emit)
        rw.times.extend(prebuilt.ns[:n])
        rw.line_seqs.extend(prebuilt.seqs[:n])
        rw.last_seq = prebuilt.seqs[n - 1]
        rw.renumber = prebuilt.sorted_upto < n
        rw.report.facts_retained += n
        if n >= max(1, rw.total // 2):
            crash_point("compact-temp-partial")  # part of the temp file is on disk
    return n, rw.prefix_size


def _write_live_lines(rw: RewriteState, emit: Callable[[bytes], None], n: int, offset: int) -> tuple[int, int]:
    """The live facts' store lines, a chunk at a time, built by SQLite (`store_lines`): one write and
    one hash per chunk, and each line's bookkeeping (offsets, event rows, times, the seq order check) by
    C-level iterators over the chunk rather than a Python loop per line. Their view rows: journal_events
    here, facts.line_no and journal_event_facts in SQL in `compaction_view.update`."""
    db, kept_rows, half = rw.store.db, rw.kept_rows, max(1, rw.total // 2)
    for rows in rw.live if rw.live is not None else _live_chunks(db):
        lines = list(map(_LINE, rows))
        blob = b"\n".join(lines) + b"\n"
        lengths = [length + 1 for length in map(len, lines)]
        longest = max(lengths)
        if longest > MAX_RECORD_BYTES:
            row = rows[lengths.index(longest)]
            raise InvalidInput(f"fact journal record exceeds the {MAX_RECORD_BYTES}-byte append "
                               f"ceiling (fact {row[1]})")
        emit(blob)
        rw.hasher.update(blob)
        starts = list(accumulate(lengths, initial=offset))
        if rw.direct:
            # (lines the shadow table already holds: skipped)
            db.executemany(rw.insert_event, islice(zip(
                range(n + 1, n + len(rows) + 1), starts, lengths, repeat("store"), map(_FACT_ID, rows),
                map(_STORED_AT, rows), repeat(1), repeat(None)), max(0, kept_rows - n), None))
            rw.times.extend(map(_STORED_AT_NS, rows))
            seqs = list(map(_SEQ, rows))
            rw.line_seqs.extend(seqs)
            chain = seqs if rw.last_seq is None else [rw.last_seq, *seqs]
            if not all(map(lt, chain, chain[1:])):  # replay order changed: renumber in `compaction_view.update`
                rw.renumber = True
            rw.last_seq = seqs[-1]
        n += len(rows)
        offset = starts[-1]
        rw.report.facts_retained += len(rows)
        if n >= half > n - len(rows):
            crash_point("compact-temp-partial")  # part of the temp file is on disk
        if rw.progress is not None:
            rw.progress(min(n, rw.total), rw.total)
    return n, offset


def _write_tail_lines(rw: RewriteState, emit: Callable[[bytes], None], n: int, offset: int) -> tuple[int, int]:
    """The provenance lines and tombstones after the store lines (`_tail_lines`), with their event rows."""
    db = rw.store.db
    applier = view.Applier(db, rw.store.policy, 0)
    for text, op, fact_id, event_at, applied, reason, line_names in _tail_lines(
            db, applier, rw.now_text, rw.report, rw.drop_sources):
        data = text.encode("utf-8") + b"\n"
        emit(data)
        rw.hasher.update(data)
        n += 1
        if rw.direct:
            rw.events.append((n, offset, len(data), op, fact_id, event_at, int(applied), reason))
            rw.times.append(rw.now_ns)
            rw.names.extend((n, fid, role) for fid, role in line_names)
            if len(rw.events) >= _BATCH:
                compaction_view.flush(rw)
        offset += len(data)
    return n, offset
