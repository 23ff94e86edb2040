"""The materialised view: the rules that apply journal events to the fact tables.

Replay follows the V-C rules of Crux's corecrux-memory/src/fact_store.rs. The store's write path uses the same replay
(append, then replay the appended lines), so the view always equals a fresh replay of the journal. Driving a replay
(tail or rebuild, row by row or in bulk) is `replay.py`'s; how far the view got, `replay_position.py`'s; the database file itself
(name, pragmas, migrations) is `view_file.py`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

import apsw

from . import codec, timestamps
from .codec import Event, Fact
from .privacy import PrivacyPolicy

LATEST_ONLY_PREFIXES = ("__repo_registry__::", "__repo_scan__::", "__workspace_scan__::")
# The skip reason of a `delete` naming a fact the journal does not hold: the value-free tombstone a
# compaction writes for a deleted fact it dropped (a no-op in Crux too, where it raises no warning).
TOMBSTONE = "tombstone (fact not in the journal)"

FACT_COLUMNS = (
    "fact_id", "tenant_hash", "entity", "key", "value", "source_receipt", "confidence", "stored_at",
    "stored_at_ns", "tokens", "deleted", "version", "supersedes", "private", "horizon_class",
    "reverified_at", "reverified_at_ns", "superseded_by", "actor", "valid_from", "valid_from_ns",
    "valid_to", "valid_to_ns", "access_count", "last_accessed_at", "last_accessed_at_ns",
    "tokens_exact", "confidence_exact", "seq", "line_no",
)
# The columns that hold a fact's values (all but seq and line_no), in FACT_COLUMNS' order.
VALUE_COLUMNS = len(FACT_COLUMNS) - 2
_INSERT_FACT = (
    f"INSERT OR IGNORE INTO facts ({', '.join(FACT_COLUMNS)}) VALUES ({', '.join('?' * len(FACT_COLUMNS))})"
)
INSERT_NEW_FACT = f"INSERT INTO facts ({', '.join(FACT_COLUMNS)}) VALUES ({', '.join('?' * len(FACT_COLUMNS))})"
FACT_SELECT = ", ".join(FACT_COLUMNS[:VALUE_COLUMNS])
_I64_MAX = 2**63 - 1

_opt_time = timestamps.format_optional_fact_time
_ns = timestamps.column_ns
_exact = timestamps.from_columns


def tokens_columns(tokens: int) -> tuple[int, Optional[str]]:
    """(`tokens`, `tokens_exact`): a usize above 2^63-1 (Crux's `tokens` is one) saturates the INTEGER
    column and is kept exactly, in decimal, beside it."""
    return (tokens, None) if tokens <= _I64_MAX else (_I64_MAX, str(tokens))


def confidence_exact(confidence: float) -> Optional[str]:
    """`confidence_exact`: "-0.0" for a negative zero (a REAL column holds it as 0.0), else NULL."""
    return "-0.0" if confidence == 0 and math.copysign(1.0, confidence) < 0 else None


def fact_row(fact: Fact, seq: int, line_no: int) -> tuple:
    tokens, tokens_exact = tokens_columns(fact.tokens)
    return (
        fact.fact_id, fact.tenant_hash, fact.entity, fact.key, fact.value, fact.source_receipt,
        fact.confidence, timestamps.format_fact_time(fact.stored_at), _ns(fact.stored_at), tokens,
        int(fact.deleted), fact.version, fact.supersedes, int(fact.private), fact.horizon_class,
        _opt_time(fact.reverified_at), _ns(fact.reverified_at), fact.superseded_by, fact.actor,
        _opt_time(fact.valid_from), _ns(fact.valid_from), _opt_time(fact.valid_to), _ns(fact.valid_to),
        fact.access_count, _opt_time(fact.last_accessed_at), _ns(fact.last_accessed_at),
        tokens_exact, confidence_exact(fact.confidence), seq, line_no,
    )


def fact_from_row(row: tuple) -> Fact:
    """A Fact from the first VALUE_COLUMNS columns of FACT_COLUMNS (as selected by FACT_SELECT), its
    values exactly as the journal had them (`timestamps.from_columns`, `tokens_exact`, `confidence_exact`)."""
    return Fact(
        fact_id=row[0], tenant_hash=row[1], entity=row[2], key=row[3], value=row[4], source_receipt=row[5],
        confidence=row[6] if row[27] is None else -0.0, stored_at=_exact(row[8], row[7]),
        tokens=row[9] if row[26] is None else int(row[26]), deleted=bool(row[10]), version=row[11],
        supersedes=row[12], private=bool(row[13]), horizon_class=row[14], reverified_at=_exact(row[16], row[15]),
        superseded_by=row[17], actor=row[18], valid_from=_exact(row[20], row[19]), valid_to=_exact(row[22], row[21]),
        access_count=row[23], last_accessed_at=_exact(row[25], row[24]),
    )


@dataclass
class ReplayStats:
    """What one replay pass did."""

    events: int = 0
    applied: int = 0
    skipped: int = 0
    corrupt: list[tuple[int, str]] = field(default_factory=list)
    rebuilt: bool = False


def reset_facts(db: apsw.Connection) -> None:
    """Empty every table derived from the journal (inside the caller's transaction)."""
    # the checkpoint first: its delete trigger empties the recall tables derived from these, so the
    # known_at timeline's per-row trigger on `facts` then finds nothing to delete
    for table in ("journal_checkpoint", "journal_event_facts", "journal_events", "journal_corrupt_lines",
                  "consolidation_sources", "facts"):
        db.execute(f"DELETE FROM {table}")


def record_events(db: apsw.Connection, event_rows: list[tuple], event_fact_rows: list[tuple]) -> None:
    """Insert `journal_events` rows (line_no, byte_offset, byte_length, op, fact_id, event_at, applied,
    skip_reason) and the `journal_event_facts` rows (line_no, fact_id, role) of the lines they name."""
    db.executemany(
        "INSERT OR REPLACE INTO journal_events (line_no, byte_offset, byte_length, op, fact_id, event_at, applied, "
        "skip_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", event_rows)
    db.executemany(
        "INSERT OR IGNORE INTO journal_event_facts (line_no, fact_id, role) VALUES (?, ?, ?)", event_fact_rows)


class Applier:
    """Applies decoded events to the view's tables with the V-C replay rules."""

    def __init__(self, db: apsw.Connection, policy: PrivacyPolicy, next_seq: int) -> None:
        self.db = db
        self.policy = policy
        self.next_seq = next_seq
        self.first_seq = next_seq
        self.event_rows: list[tuple] = []
        self.event_fact_rows: list[tuple] = []

    def flush(self) -> None:
        """Write the buffered journal_events rows (inside the caller's transaction)."""
        record_events(self.db, self.event_rows, self.event_fact_rows)
        self.event_rows.clear()
        self.event_fact_rows.clear()

    # lookups
    def _fact(self, fact_id: str) -> Optional[tuple]:
        return self.db.execute(
            "SELECT tenant_hash, entity, key, deleted, superseded_by FROM facts WHERE fact_id = ?", (fact_id,)
        ).fetchone()

    def _is_canonical(self, fact_id: str) -> bool:
        return self.db.execute(
            "SELECT 1 FROM consolidation_sources WHERE canonical_fact_id = ? LIMIT 1", (fact_id,)
        ).fetchone() is not None

    def _is_active_source(self, fact_id: str) -> bool:
        return self.db.execute(
            "SELECT 1 FROM consolidation_sources cs JOIN facts s ON s.fact_id = cs.source_fact_id "
            "WHERE cs.source_fact_id = ? AND s.superseded_by = cs.canonical_fact_id LIMIT 1",
            (fact_id,),
        ).fetchone() is not None

    def _insert(self, fact: Fact, line_no: int) -> bool:
        """`replay_journal_insert`: privacy re-applied, empty tenant defaulted, duplicate ids skipped."""
        private = self.policy.enforce(fact.entity, fact.private)
        tenant = fact.tenant_hash or "default"
        if private != fact.private or tenant != fact.tenant_hash:
            fact = fact.copy(private=private, tenant_hash=tenant)
        if (fact.private and fact.key == "content" and fact.entity.startswith(LATEST_ONLY_PREFIXES)):
            self.db.execute(
                "DELETE FROM facts WHERE tenant_hash = ? AND entity = ? AND key = ?",
                (fact.tenant_hash, fact.entity, fact.key),
            )
        self.db.execute(_INSERT_FACT, fact_row(fact, self.next_seq, line_no))
        if self.db.changes() == 0:
            return False
        self.next_seq += 1
        return True

    def apply(self, event: Event, line_no: int) -> tuple[bool, Optional[str], list[tuple[str, str]]]:
        """Apply one event: (applied?, skip reason, [(fact_id, role)] it names)."""
        op = event.op
        db = self.db
        if event.op == "store":
            ok = self._insert(event.fact, line_no)
            return ok, None if ok else "duplicate fact_id", [(event.fact.fact_id, "stored")]
        if event.op == "store_batch":
            names = [(f.fact_id, "stored") for f in event.facts]
            results = [self._insert(f, line_no) for f in event.facts]
            ok = all(results)
            return any(results) or not results, None if ok else "duplicate fact_id", names
        if event.op == "replace_latest":
            f = event.fact
            for rid in event.replaced_fact_ids:
                db.execute(
                    "DELETE FROM facts WHERE fact_id = ? AND tenant_hash = ? AND entity = ? AND key = ?",
                    (rid, f.tenant_hash or "default", f.entity, f.key),
                )
            ok = self._insert(f, line_no)
            names = [(f.fact_id, "stored")] + [(r, "replaced") for r in event.replaced_fact_ids]
            return ok, None if ok else "duplicate fact_id", names
        if event.op == "delete":
            names = [(event.fact_id, "deleted")]
            if self._is_canonical(event.fact_id) or self._is_active_source(event.fact_id):
                return False, "consolidation member", names
            db.execute("UPDATE facts SET deleted = 1 WHERE fact_id = ?", (event.fact_id,))
            return (db.changes() > 0), (None if db.changes() > 0 else TOMBSTONE), names
        if event.op == "supersede":
            names = [(event.fact_id, "superseded"), (event.by_fact_id, "superseding")]
            target, by = self._fact(event.fact_id), self._fact(event.by_fact_id)
            if target is None or by is None:
                return False, "unknown fact_id", names
            if target[0] != by[0]:
                return False, "tenant mismatch", names
            if self._is_active_source(event.fact_id):
                return False, "active consolidation source", names
            db.execute("UPDATE facts SET superseded_by = ? WHERE fact_id = ?", (event.by_fact_id, event.fact_id))
            return True, None, names
        if event.op == "clear_supersede":
            names = [(event.fact_id, "cleared")]
            if self._is_active_source(event.fact_id):
                return False, "active consolidation source", names
            db.execute("UPDATE facts SET superseded_by = NULL WHERE fact_id = ?", (event.fact_id,))
            return (db.changes() > 0), (None if db.changes() > 0 else "unknown fact_id"), names
        if event.op == "set_validity":
            db.execute(
                "UPDATE facts SET valid_from = ?, valid_from_ns = ?, valid_to = ?, valid_to_ns = ? WHERE fact_id = ?",
                (_opt_time(event.valid_from), _ns(event.valid_from), _opt_time(event.valid_to), _ns(event.valid_to),
                 event.fact_id),
            )
            ok = db.changes() > 0
            return ok, None if ok else "unknown fact_id", [(event.fact_id, "validity")]
        if event.op == "set_horizon":
            db.execute("UPDATE facts SET horizon_class = ? WHERE fact_id = ?", (event.horizon_class, event.fact_id))
            ok = db.changes() > 0
            return ok, None if ok else "unknown fact_id", [(event.fact_id, "horizon")]
        if event.op == "reverify":
            db.execute(
                "UPDATE facts SET reverified_at = ?, reverified_at_ns = ? WHERE fact_id = ?",
                (_opt_time(event.reverified_at), _ns(event.reverified_at), event.fact_id),
            )
            ok = db.changes() > 0
            return ok, None if ok else "unknown fact_id", [(event.fact_id, "reverified")]
        if event.op == "consolidate":
            return self._consolidate(event, line_no)
        if event.op == "consolidation_provenance":
            return self._provenance(event)
        if event.op == "consolidate_undo":
            return self._undo(event)
        raise AssertionError(op)

    def _consolidate(self, event: codec.ConsolidateEvent, line_no: int):
        canonical = event.canonical
        if not canonical.tenant_hash:
            canonical = canonical.copy(tenant_hash="default")
        ids = event.superseded_fact_ids
        names = [(canonical.fact_id, "canonical")] + [(i, "source") for i in ids]
        reason = None
        if not ids or len(set(ids)) != len(ids):
            reason = "empty or duplicate source list"
        elif canonical.supersedes is not None and canonical.supersedes not in ids:
            reason = "canonical.supersedes not among sources"
        elif canonical.deleted or self._fact(canonical.fact_id) is not None:
            reason = "canonical deleted or already present"
        else:
            for sid in ids:
                src = self._fact(sid)
                if src is None or src[3] or src[0] != canonical.tenant_hash or src[4] is not None:
                    reason = f"invalid source {sid}"
                    break
        if reason:
            return False, reason, names
        self._insert(canonical, line_no)
        for sid in ids:
            self.db.execute("UPDATE facts SET superseded_by = ? WHERE fact_id = ?", (canonical.fact_id, sid))
        self._record_sources(canonical.fact_id, ids)
        return True, None, names

    def _record_sources(self, canonical_id: str, ids: list[str]) -> None:
        self.db.execute("DELETE FROM consolidation_sources WHERE canonical_fact_id = ?", (canonical_id,))
        self.db.executemany(
            "INSERT INTO consolidation_sources (canonical_fact_id, position, source_fact_id) VALUES (?, ?, ?)",
            [(canonical_id, i, sid) for i, sid in enumerate(ids)],
        )

    def _provenance(self, event: codec.ConsolidationProvenanceEvent):
        cid, ids = event.canonical_fact_id, event.source_fact_ids
        names = [(cid, "canonical")] + [(i, "source") for i in ids]
        canonical = self._fact(cid)
        if canonical is None or canonical[3] or canonical[0] != event.tenant_hash or not ids:
            return False, "invalid canonical", names
        for sid in ids:
            src = self._fact(sid)
            if src is None or src[3] or src[0] != event.tenant_hash or src[4] != cid:
                return False, f"invalid source {sid}", names
        self._record_sources(cid, ids)
        return True, None, names

    def _undo(self, event: codec.ConsolidateUndoEvent):
        cid = event.canonical_fact_id
        names = [(cid, "canonical")] + [(i, "restored") for i in event.restored_fact_ids]
        expected = sorted(r[0] for r in self.db.execute(
            "SELECT source_fact_id FROM consolidation_sources WHERE canonical_fact_id = ?", (cid,)))
        supplied = sorted(set(event.restored_fact_ids))
        canonical = self._fact(cid)
        if canonical is None or not expected or expected != supplied:
            return False, "undo source set does not match", names
        sources = [self._fact(sid) for sid in expected]
        if canonical[3]:
            if all(s is not None and not s[3] and s[0] == canonical[0] and s[4] is None for s in sources):
                return True, None, names
            return False, "undo source set does not match", names
        if canonical[4] is not None:
            return False, "canonical superseded", names
        if not all(s is not None and not s[3] and s[0] == canonical[0] and s[4] == cid for s in sources):
            return False, "undo source set does not match", names
        self.db.execute("UPDATE facts SET deleted = 1 WHERE fact_id = ?", (cid,))
        for sid in expected:
            self.db.execute("UPDATE facts SET superseded_by = NULL WHERE fact_id = ?", (sid,))
        return True, None, names

    def sanitize_links(self) -> None:
        """V-C link sanitisation, for facts inserted by this pass and the facts that refer to them."""
        s = self.first_seq
        if self.next_seq == s:
            return
        # CROSS JOIN and INDEXED BY keep SQLite on the seq range: only this pass's facts are visited. When
        # every fact is this pass's (a rebuild), the pairs seen from the referring end are all the pairs,
        # and the referred-to end (which needs the supersedes / superseded_by indexes) adds nothing.
        referred = s > 1
        self.db.execute(
            "UPDATE facts SET supersedes = NULL WHERE fact_id IN ("
            " SELECT a.fact_id FROM facts a INDEXED BY facts_seq CROSS JOIN facts b ON b.fact_id = a.supersedes"
            "  WHERE a.seq >= ?1 AND (a.tenant_hash != b.tenant_hash OR a.entity != b.entity OR a.key != b.key)"
            + (" UNION SELECT a.fact_id FROM facts b INDEXED BY facts_seq CROSS JOIN facts a ON a.supersedes = b.fact_id"
               "  WHERE b.seq >= ?1 AND (a.tenant_hash != b.tenant_hash OR a.entity != b.entity OR a.key != b.key)"
               if referred else "") + ")",
            (s,),
        )
        self.db.execute(
            "UPDATE facts SET superseded_by = NULL WHERE fact_id IN ("
            " SELECT a.fact_id FROM facts a INDEXED BY facts_seq CROSS JOIN facts b ON b.fact_id = a.superseded_by"
            "  WHERE a.seq >= ?1 AND a.tenant_hash != b.tenant_hash"
            + (" UNION SELECT a.fact_id FROM facts b INDEXED BY facts_seq CROSS JOIN facts a ON a.superseded_by = b.fact_id"
               "  WHERE b.seq >= ?1 AND a.tenant_hash != b.tenant_hash" if referred else "") + ")",
            (s,),
        )


def apply_event(applier: Applier, event: Event, line_no: int, offset: int, length: int,
                stats: ReplayStats) -> list[tuple[str, str]]:
    """Apply one decoded event, count it and buffer its journal_events rows; returns the (fact_id,
    role) pairs it names."""
    applied, reason, names = applier.apply(event, line_no)
    stats.events += 1
    if applied:
        stats.applied += 1
    else:
        stats.skipped += 1
    applier.event_rows.append((line_no, offset, length, event.op, names[0][0] if names else None,
                               codec.event_time_text(event), int(applied), reason))
    applier.event_fact_rows.extend((line_no, fid, role) for fid, role in names)
    return names


def iter_facts(db: apsw.Connection, where: str = "", params: Iterable = ()) -> Iterator[Fact]:
    """Facts from the view as Fact records (`where` is a SQL suffix such as 'WHERE ... ORDER BY ...')."""
    for row in db.execute(f"SELECT {FACT_SELECT} FROM facts {where}", tuple(params)):
        yield fact_from_row(row)
