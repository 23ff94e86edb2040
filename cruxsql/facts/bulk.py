"""Bulk replay: many journal lines applied to the view at once, with the rules of `view.Applier`.

A full rebuild and any long journal tail come through here; the one or two lines a `store()` appends
go through the row-by-row `Applier`, and tests/facts/test_bulk_replay.py proves both build the same tables.
Where the time goes instead of ~120 µs per event:

* Lines are decoded straight into view rows by msgspec's compiled decoder (`line_decoder.py`), which
  hands anything unusual to `codec.decode_event`, so a line is accepted, or rejected with the same
  reason, exactly as the codec does.
* Which facts exist, and in which tenant (all the common replay rules need), is read for a whole
  batch with one query and then tracked in a dict while the batch is walked in journal order.
* Rows go out with `executemany`. A full rebuild runs in one transaction with the secondary indexes
  of the replayed tables dropped and built after the last row (a sorted build instead of random B-tree
  inserts); a crash rolls back to the previous view, indexes and all.

The events this path does not cover go through the `Applier` one at a time, after the rows gathered so
far are written: `replace_latest`, the consolidation ops (and deletes or supersessions once any
consolidation exists), latest-only control facts, and lines the fast decoder hands to the codec.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple, Optional

import apsw

from ..errors import JournalError
from . import codec, derived_tables, replay_position, view
from .codec import CorruptLine
from .faults import crash_point
from .journal import Journal
from .line_decoder import decode_record

if TYPE_CHECKING:
    from .privacy import PrivacyPolicy

Progress = Optional[Callable[[int, int], None]]
# Lines per batch: one known-facts query and one executemany per table (for a tail, also one transaction,
# checkpoint and hook call each).
BATCH_LINES = 20_000
_ASCII_WS = b" \t\n\r\x0c"
# Indexes a full rebuild keeps while it inserts: facts_seq grows at its right edge (cheap), and replay
# hooks follow facts by seq.
_KEEP_INDEXES = frozenset({"facts_seq"})
_DEFERRED_TABLES = ("facts", "journal_events", "journal_event_facts")
_CONSOLIDATION_CHECKED = frozenset({"delete", "supersede", "clear_supersede"})


def read_lines(journal: Journal, offset: int, progress: Progress) -> Iterator[list[bytes]]:
    """The journal's newline-terminated lines from `offset`, without their newlines, in batches of at
    most BATCH_LINES (an unterminated last line is not committed and not returned). Progress is
    reported after each chunk read."""
    for lines in journal.line_chunks(offset, progress):
        for i in range(0, len(lines), BATCH_LINES):
            yield lines[i:i + BATCH_LINES]


class BulkApplier:
    """Applies batches of journal lines with the V-C replay rules, sharing `applier`'s seq counter and
    buffers, and handing it the events it alone handles."""

    def __init__(self, applier: "view.Applier", stats: "view.ReplayStats") -> None:
        self.applier = applier
        self.db = applier.db
        self.policy = applier.policy
        self.stats = stats
        self.consolidations = self.db.execute("SELECT 1 FROM consolidation_sources LIMIT 1").fetchone() is not None
        self.deferred: dict[str, str] = {}
        self._fact_rows: list[tuple] = []
        self._deleted: list[tuple] = []
        self._superseded: list[tuple] = []
        self._validity: list[tuple] = []
        self._horizon: list[tuple] = []
        self._reverified: list[tuple] = []
        self._corrupt: list[tuple] = []

    # --- deferred indexes (full rebuild) -------------------------------------------------------------

    def defer_indexes(self, keep: frozenset[str] = _KEEP_INDEXES) -> None:
        """Drop the secondary indexes of the replayed tables but `keep` until `restore_indexes` (in one
        transaction)."""
        marks = ", ".join("?" * len(_DEFERRED_TABLES))
        for name, sql in self.db.execute(
                f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                f"AND tbl_name IN ({marks}) ORDER BY name", _DEFERRED_TABLES).fetchall():
            if name not in keep:
                self.deferred[str(name)] = str(sql)
                self.db.execute(f'DROP INDEX "{name}"')

    def restore_indexes(self, names: Optional[list[str]] = None) -> None:
        """Build the deferred indexes (or only `names`) from the rows now in place."""
        for name in list(self.deferred) if names is None else names:
            sql = self.deferred.pop(name, None)
            if sql is not None:
                self.db.execute(sql)

    # --- applying --------------------------------------------------------------------------------------

    def apply(self, lines: list[bytes], offset: int, line_no: int) -> tuple[int, int]:
        """Apply `lines` (each without its newline) starting at byte `offset`, line `line_no`; write
        every row they produce. Returns the (offset, line number) after the last line."""
        decoded = []
        for raw in lines:
            length = len(raw) + 1
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if raw.strip(_ASCII_WS):
                item = self.decode_line(raw, line_no, offset, length)
                if item is not None:
                    decoded.append(item)
            offset += length
            line_no += 1
        self.apply_decoded(decoded)
        return offset, line_no

    def apply_decoded(self, decoded: list[tuple]) -> None:
        """Apply lines already decoded (as `decode_line` returns them, in journal order) and write their rows:
        the bulk path's own, and the store's write path with the events it just appended (no decoding)."""
        wanted: set[str] = set()
        for item in decoded:
            op, payload = item[3], item[4]
            if op in ("store", "store_batch"):
                wanted.update(v[0] for v in payload)
            elif op == "supersede":
                wanted.add(payload[0])
                wanted.add(payload[1])
            elif op is not None:
                wanted.add(payload[0])
        known = self._lookup(wanted)
        for item in decoded:
            self._walk(item, known)
        self.flush()

    def decode_line(self, raw: bytes, line_no: int, offset: int, length: int) -> Optional[tuple]:
        """(line_no, offset, length, op, payload, raw) for the fast path, (line_no, offset, length, None,
        event, raw) for the Applier, or None for a corrupt line (recorded)."""
        try:
            op, payload = decode_record(raw)
            return line_no, offset, length, op, payload, raw
        except CorruptLine as exc:
            self.record_corrupt(line_no, offset, length, str(exc))
            return None

    def record_corrupt(self, line_no: int, offset: int, length: int, reason: str) -> None:
        self._corrupt.append((line_no, offset, length, reason))
        self.stats.corrupt.append((line_no, reason))

    def _lookup(self, ids: set[str] | list[str]) -> dict[str, str]:
        """fact_id -> tenant_hash of those of `ids` the view holds."""
        if not ids:
            return {}
        return dict(self.db.execute("SELECT fact_id, tenant_hash FROM facts WHERE fact_id IN carray(?)",
                                    (apsw.carray(tuple(ids)),)))

    def _walk(self, item: tuple, known: dict[str, str]) -> None:
        line_no, offset, length, op, payload, _ = item
        if op is None or (op in _CONSOLIDATION_CHECKED and self.consolidations):
            self._by_applier(item, known)
            return
        if op in ("store", "store_batch"):
            facts = payload
            for i, v in enumerate(payload):
                if not v[1] or (not v[13] and self.policy.is_always_private(v[2])):
                    if facts is payload:
                        facts = list(payload)
                    facts[i] = (v[0], v[1] or "default", *v[2:13], int(self.policy.enforce(v[2], bool(v[13]))),
                                *v[14:])
                    v = facts[i]
                if v[13] and v[3] == "content" and v[2].startswith(view.LATEST_ONLY_PREFIXES):
                    # a latest-only control fact removes its whole (tenant, entity, key) chain
                    self._by_applier(item, known)
                    return
            fresh = 0
            seq = self.applier.next_seq
            for v in facts:
                if v[0] not in known:
                    known[v[0]] = v[1]
                    self._fact_rows.append((*v, seq, line_no))
                    seq += 1
                    fresh += 1
            self.applier.next_seq = seq
            names = [(v[0], "stored") for v in facts]
            applied = fresh > 0 or not facts
            reason = None if fresh == len(facts) else "duplicate fact_id"
            event_at = facts[0][7] if facts else None
        else:
            fact_id = payload[0]
            tenant = known.get(fact_id)
            reason = None if tenant is not None else "unknown fact_id"
            if op == "delete":
                names = [(fact_id, "deleted")]
                event_at = payload[1]
                if tenant is None:
                    reason = view.TOMBSTONE
                else:
                    self._deleted.append((fact_id,))
            elif op == "supersede":
                by = payload[1]
                names = [(fact_id, "superseded"), (by, "superseding")]
                event_at = payload[2]
                by_tenant = known.get(by)
                if tenant is None or by_tenant is None:
                    reason = "unknown fact_id"
                elif tenant != by_tenant:
                    reason = "tenant mismatch"
                else:
                    self._superseded.append((by, fact_id))
            elif op == "clear_supersede":
                names = [(fact_id, "cleared")]
                event_at = payload[1]
                if tenant is not None:
                    self._superseded.append((None, fact_id))
            elif op == "set_validity":
                names = [(fact_id, "validity")]
                event_at = payload[5]
                if tenant is not None:
                    self._validity.append((*payload[1:5], fact_id))
            elif op == "set_horizon":
                names = [(fact_id, "horizon")]
                event_at = payload[2]
                if tenant is not None:
                    self._horizon.append((payload[1], fact_id))
            else:
                names = [(fact_id, "reverified")]
                event_at = payload[1]
                if tenant is not None:
                    self._reverified.append((payload[1], payload[2], fact_id))
            applied = reason is None
        stats = self.stats
        stats.events += 1
        if applied:
            stats.applied += 1
        else:
            stats.skipped += 1
        self.applier.event_rows.append((line_no, offset, length, op, names[0][0] if names else None, event_at,
                                        int(applied), reason))
        self.applier.event_fact_rows.extend((line_no, fid, role) for fid, role in names)

    def _by_applier(self, item: tuple, known: dict[str, str]) -> None:
        """Hand one event to the row-by-row Applier, with every row gathered so far written first; then
        re-read the existence of every fact it may have added or removed."""
        line_no, offset, length, op, event, raw = item
        if op is not None:
            event = codec.decode_event(raw)
        self.flush()
        chains: set[str] = set()
        for fact in codec.event_facts(event):
            if (self.policy.enforce(fact.entity, fact.private) and fact.key == "content"
                    and fact.entity.startswith(view.LATEST_ONLY_PREFIXES)):
                self.restore_indexes(["facts_chain"])
                chains.update(r[0] for r in self.db.execute(
                    "SELECT fact_id FROM facts WHERE tenant_hash = ? AND entity = ? AND key = ?",
                    (fact.tenant_hash or "default", fact.entity, fact.key)))
        names = view.apply_event(self.applier, event, line_no, offset, length, self.stats)
        if event.op in ("consolidate", "consolidation_provenance"):
            self.consolidations = True
        touched = chains | {fid for fid, _ in names}
        for fid in touched:
            known.pop(fid, None)
        known.update(self._lookup(touched))

    def flush(self) -> None:
        """Write every row gathered so far: facts first, then the updates in journal order, then the
        journal_events rows (inside the caller's transaction)."""
        db = self.db
        if self._fact_rows:
            db.executemany(view.INSERT_NEW_FACT, self._fact_rows)
        for rows, sql in (
                (self._deleted, "UPDATE facts SET deleted = 1 WHERE fact_id = ?"),
                (self._superseded, "UPDATE facts SET superseded_by = ? WHERE fact_id = ?"),
                (self._validity, "UPDATE facts SET valid_from = ?, valid_from_ns = ?, valid_to = ?, valid_to_ns = ? "
                                 "WHERE fact_id = ?"),
                (self._horizon, "UPDATE facts SET horizon_class = ? WHERE fact_id = ?"),
                (self._reverified, "UPDATE facts SET reverified_at = ?, reverified_at_ns = ? WHERE fact_id = ?")):
            if rows:
                db.executemany(sql, rows)
                rows.clear()
        if self._corrupt:
            db.executemany("INSERT OR REPLACE INTO journal_corrupt_lines (line_no, byte_offset, byte_length, reason) "
                           "VALUES (?, ?, ?, ?)", self._corrupt)
        for buffer in (self._fact_rows, self._corrupt):
            buffer.clear()
        self.applier.flush()


def replay(db: apsw.Connection, journal: Journal, applier: "view.Applier", stats: "view.ReplayStats",
           offset: int, line_no: int, generation: str, progress: Progress, full: bool, derived: bool = True) -> None:
    """Replay the journal from `offset` (line `line_no`) with the bulk path.

    `full` (a rebuild): one transaction that empties the fact tables, defers their secondary indexes
    and replays everything, so a crash anywhere leaves the previous view. Else one transaction per
    batch, each advancing the checkpoint, the last one also sanitising the links (as the row path).
    Replay hooks (then the bulk replay hooks) run after every batch of a tail, inside its transaction;
    in a rebuild once, at the end; with `derived` False, not at all.
    """
    if progress is not None:  # the bar appears before the old rows are cleared (seconds on a big view)
        st = journal.stat()
        progress(0, (st.st_size if st else 0) - offset)
    bulk = BulkApplier(applier, stats)
    if full:
        _rebuild(db, journal, applier, bulk, offset, line_no, generation, progress, derived)
        return
    batches = read_lines(journal, offset, progress)
    lines = next(batches, None)
    while lines is not None:
        following = next(batches, None)
        with db:
            offset, line_no = bulk.apply(lines, offset, line_no)
            if following is None:
                applier.sanitize_links()
            replay_position.write_checkpoint(db, journal, offset, line_no - 1, applier.next_seq, generation)
            if derived:
                derived_tables.run_replay_hooks(db, journal)
                derived_tables.run_bulk_replay_hooks(db)
            crash_point("replay-before-commit")
        lines = following


def _rebuild(db: apsw.Connection, journal: Journal, applier: "view.Applier", bulk: BulkApplier, offset: int,
             line_no: int, generation: str, progress: Progress, derived: bool) -> None:
    bar = _RebuildBar(progress)
    with db:
        bulk.defer_indexes()
        view.reset_facts(db)
        for lines in read_lines(journal, offset, bar.reading):
            offset, line_no = bulk.apply(lines, offset, line_no)
        replay_position.write_checkpoint(db, journal, offset, line_no - 1, applier.next_seq, generation)
        applier.sanitize_links()  # before the indexes exist: its updates maintain none of them
        bar.reached(0.48)
        bulk.restore_indexes()
        bar.reached(0.6)
        # once, over the whole journal: derived tables are built by a few sorted passes instead of
        # being extended batch by batch (random inserts into ever larger B-trees)
        if derived:
            derived_tables.run_replay_hooks(db, journal)
            bar.reached(0.83)
            derived_tables.run_bulk_replay_hooks(db)
        crash_point("replay-before-commit")
    bar.reached(1.0)


class _RebuildBar:
    """A rebuild's progress: the journal bytes read fill the first 45% of the bar (about their share of
    the time at 1M events), then the links, the deferred indexes, the replay hooks and the bulk replay
    hooks the rest, each its share, so the bar does not sit at 100% while they run (minutes on a big
    journal)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.total = 0

    def reading(self, done: int, total: int) -> None:
        self.total = total
        if self.progress is not None:
            self.progress(done * 45 // 100, total)

    def reached(self, share: float) -> None:
        if self.progress is not None and self.total:
            self.progress(int(self.total * share), self.total)


class Decoded(NamedTuple):
    """One line as `RangeReplay.add` takes it: decoded once, by whoever holds it before it is appended."""

    length: int
    raw: bytes
    op: Optional[str]
    payload: object  # decode_record's payload; None for a blank or corrupt line
    corrupt: Optional[str] = None  # the reason replay records a corrupt line with


def decode_appended(raw: bytes) -> Decoded:
    """A line about to be appended to the journal (without its newline), decoded as the bulk path's
    replay of it would."""
    length = len(raw) + 1
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if not raw.strip(_ASCII_WS):
        return Decoded(length, raw, None, None)
    try:
        op, payload = decode_record(raw)
    except CorruptLine as exc:
        return Decoded(length, raw, None, None, str(exc))
    return Decoded(length, raw, op, payload)


class RangeReplay:
    """The replay of a range of lines a caller appends to the journal and holds decoded (a cluster node
    mirroring a long stretch of its stream): rows, skips, links, checkpoint and derived tables as
    `replay` of those lines would leave them, in one view transaction (`range_replay`) that commits
    after the caller's last append. With `defer`, the replayed tables' secondary indexes are dropped
    until the end, as in a rebuild (`index_chains` builds the version chains' before it reads them)."""

    def __init__(self, db: apsw.Connection, journal: Journal, policy: "PrivacyPolicy") -> None:
        cp = replay_position.read_checkpoint(db)
        st = journal.stat()
        if (replay_position.replayed_offset(db, journal) if cp else 0) != (st.st_size if st else 0):
            raise JournalError(f"{journal.path}: the view is not at the journal's end; replay it first")
        self.db, self.journal = db, journal
        self.offset, self.line_no = (cp.byte_offset, cp.line_count + 1) if cp else (0, 1)
        self.generation = cp.generation if cp else uuid.uuid4().hex
        self.stats = view.ReplayStats()
        self.applier = view.Applier(db, policy, cp.next_seq if cp else 1)
        self.bulk = BulkApplier(self.applier, self.stats)
        self._items: list[tuple] = []

    def add(self, lines: list[Decoded]) -> None:
        """Lines that come next in the journal (appended, or to be appended before the commit)."""
        for d in lines:
            if d.corrupt is not None:
                self.bulk.record_corrupt(self.line_no, self.offset, d.length, d.corrupt)
            elif d.op is not None or d.payload is not None:
                self._items.append((self.line_no, self.offset, d.length, d.op, d.payload, d.raw))
            self.offset += d.length
            self.line_no += 1

    def index_chains(self) -> None:
        """Build the version chains' index now, if deferred (queries by chain are about to be made)."""
        self.bulk.restore_indexes(["facts_chain"])

    @property
    def pending(self) -> int:
        """How many lines added have their rows not written yet (`apply` writes them)."""
        return len(self._items)

    def apply(self) -> None:
        """Write the rows of the lines added so far (into the transaction), so the view's reads see them."""
        self.bulk.apply_decoded(self._items)
        self._items = []

    def finish(self) -> None:
        self.apply()
        st = self.journal.stat()
        if (st.st_size if st else 0) != self.offset:
            raise JournalError(f"{self.journal.path}: it does not end where the lines replayed into the view do")
        self.applier.sanitize_links()
        replay_position.write_checkpoint(self.db, self.journal, self.offset, self.line_no - 1, self.applier.next_seq,
                                    self.generation)
        self.bulk.restore_indexes()
        derived_tables.run_replay_hooks(self.db, self.journal)
        derived_tables.run_bulk_replay_hooks(self.db)
        crash_point("replay-before-commit")


@contextmanager
def range_replay(db: apsw.Connection, journal: Journal, policy: "PrivacyPolicy",
                 defer: bool = False) -> Iterator[RangeReplay]:
    """A `RangeReplay` from the view's checkpoint (which must be the journal's end), committed when the
    block ends (rolled back by an exception: the lines appended meanwhile are then replayed from the
    journal by the next catch-up)."""
    with db:
        ranged = RangeReplay(db, journal, policy)
        if defer:
            ranged.bulk.defer_indexes()
        yield ranged
        ranged.finish()
