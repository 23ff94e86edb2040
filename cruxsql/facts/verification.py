"""`cruxsql verify`: the view checked against a fresh replay of the journal, and what the journal holds.

The fresh replay goes into a scratch database inside the data directory (`verify-replay-*.db`: every
open removes a killed verify's leftover, and erasure scans it), built and compared under the writer lock;
a read-only store replays into memory instead.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from . import extension_events, replay, view, view_file
from .faults import crash_point

if TYPE_CHECKING:
    from .store import Store

VERIFY_SCRATCH_PREFIX = "verify-replay-"


@dataclass
class VerifyReport:
    """What `cruxsql verify` checks."""

    events_by_op: dict[str, int]
    skipped_events: list[dict[str, Any]]
    corrupt_lines: list[dict[str, Any]]
    quarantined_tails: list[str]
    view_matches_replay: bool
    differences: list[str] = field(default_factory=list)
    tombstones: int = 0  # value-free deletes of facts a compaction dropped: no-ops, not skipped events

    @property
    def ok(self) -> bool:
        return self.view_matches_replay and not self.corrupt_lines and not self.quarantined_tails

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "events_by_op": self.events_by_op, "skipped_events": self.skipped_events,
            "tombstones": self.tombstones,
            "corrupt_lines": self.corrupt_lines, "quarantined_tails": self.quarantined_tails,
            "view_matches_replay": self.view_matches_replay, "differences": self.differences,
        }


def verify(store: Store) -> VerifyReport:
    """Events by op, skipped events, corrupt lines, quarantined tails, and view == fresh replay."""
    store.refresh()
    events_by_op = dict(store.db.execute("SELECT op, count(*) FROM journal_events GROUP BY op ORDER BY op"))
    skipped = [
        {"line_no": r[0], "op": r[1], "fact_id": r[2], "reason": r[3]}
        for r in store.db.execute(
            "SELECT line_no, op, fact_id, skip_reason FROM journal_events WHERE applied = 0 AND skip_reason != ? "
            "ORDER BY line_no", (view.TOMBSTONE,))
    ]
    tombstones = store.db.execute(
        "SELECT count(*) FROM journal_events WHERE applied = 0 AND skip_reason = ?", (view.TOMBSTONE,)).get
    corrupt = [
        {"line_no": r[0], "byte_offset": r[1], "reason": r[2]}
        for r in store.db.execute("SELECT line_no, byte_offset, reason FROM journal_corrupt_lines ORDER BY line_no")
    ] + extension_events.corrupt_lines(store.extensions)
    differences = _compare_with_fresh_replay(store)
    tails = store.journal.quarantined_tails() + sorted(store.data_dir.glob(f"{store.extensions.name}.torn.*"))
    return VerifyReport(events_by_op, skipped, corrupt, [p.name for p in tails],
                        not differences, differences, tombstones)


def _compare_with_fresh_replay(store: Store) -> list[str]:
    """Replay the journal into a scratch database inside the data directory (where erasure scans and
    every command's open removes leftovers) and compare it with the view, all under the lock. A
    read-only store replays into memory instead: nothing is written anywhere."""
    if store.read_only:
        fresh = apsw.Connection(":memory:")
        try:
            view_file.migrate(fresh)
            replay.rebuild(fresh, store.journal, store.policy, derived=False)
            extension_events.replay(fresh, store.extensions, store.policy)
            store.db.execute("ATTACH DATABASE ':memory:' AS fresh")
            try:
                with store.db.backup("fresh", fresh, "main") as copy:
                    copy.step()
                return _table_differences(store.db)
            finally:
                store.db.execute("DETACH DATABASE fresh")
        finally:
            fresh.close()
    with store.writer_lock():
        fresh_path = store.data_dir / f"{VERIFY_SCRATCH_PREFIX}{uuid.uuid4().hex}.db"
        try:
            fresh = view_file.open_connection(fresh_path)
            try:
                replay.rebuild(fresh, store.journal, store.policy, derived=False)
                extension_events.replay(fresh, store.extensions, store.policy)
            finally:
                fresh.close()
            crash_point("verify-fresh-replay-built")
            store.db.execute("ATTACH DATABASE ? AS fresh", (str(fresh_path),))
            try:
                return _table_differences(store.db)
            finally:
                store.db.execute("DETACH DATABASE fresh")
        finally:
            remove_verify_scratch(store.data_dir)


def remove_verify_scratch(data_dir: Path) -> list[str]:
    """Delete the fresh-replay databases `verify` builds (a killed verify leaves one behind). The caller
    holds the writer lock, which a running verify keeps for as long as its scratch database exists."""
    removed = []
    for path in sorted(Path(data_dir).glob(f"{VERIFY_SCRATCH_PREFIX}*.db*")):
        path.unlink(missing_ok=True)
        removed.append(path.name)
    return removed


def _table_differences(db: apsw.Connection) -> list[str]:
    cols = ", ".join(view.FACT_COLUMNS[:view.VALUE_COLUMNS]) + ", line_no"
    checks = {
        "facts": cols,
        "journal_events": "line_no, byte_offset, byte_length, op, fact_id, event_at, applied, skip_reason",
        "journal_event_facts": "line_no, fact_id, role",
        "journal_corrupt_lines": "line_no, byte_offset, byte_length, reason",
        "consolidation_sources": "canonical_fact_id, position, source_fact_id",
    }
    out = []
    for table, columns in checks.items():
        for a, b, label in (("main", "fresh", "only in the view"), ("fresh", "main", "missing from the view")):
            n = db.execute(
                f"SELECT count(*) FROM (SELECT {columns} FROM {a}.{table} EXCEPT SELECT {columns} FROM {b}.{table})"
            ).get
            if n:
                out.append(f"{table}: {n} row(s) {label}")
    order = ("SELECT fact_id, row_number() OVER (PARTITION BY tenant_hash, entity, key ORDER BY seq) FROM {}.facts")
    n = db.execute(
        f"SELECT count(*) FROM ({order.format('main')} EXCEPT {order.format('fresh')})").get
    if n:
        out.append(f"facts: {n} fact(s) in a different version-chain order")
    return out
