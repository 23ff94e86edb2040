"""Retention (`mark_retention_eligible`, fact_store.rs): which facts a cutoff makes eligible, a report, and applying it.

`mark_retention_eligible(cutoff)` candidates are the facts not deleted (every version, superseded ones
too: `fact_store.rs` filters all of `self.facts` on `!deleted`) stored before the cutoff that are not
private, not `__sync_tombstone__::` records, not under a daemon-owned prefix and not covered by an
active legal hold. cruxsql also leaves out active consolidation members (Crux's `try_delete` refuses
them and only logs). Governance's own state (legal holds, their receipts, erasure reports: private
facts retention never takes) is neither eligible nor counted as protected. Deleting is one durable
append (Crux: one fsync pair per fact); the content stays on disk until compaction, which `apply` runs
at once and records in an erasure report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from ..errors import InvalidInput
from ..facts import timestamps
from ..facts.privacy import daemon_owned_prefix
from ..facts.view import FACT_SELECT, fact_from_row
from . import compaction, erasure, erasure_lock, erasure_proof, legal_holds
from .durations import parse_cutoff, parse_duration_ns

if TYPE_CHECKING:
    from ..facts.store import Store

SYNC_TOMBSTONE_PREFIX = "__sync_tombstone__::"
_STORE_LINE_OVERHEAD = len('{"op":"store","fact":}') + 1
GOVERNANCE_STATE_PREFIXES = legal_holds.OWNER.prefixes + erasure_proof.OWNER.prefixes


def governance_state(entity: str) -> bool:
    """A fact governance keeps its own state in (a hold, a receipt, an erasure report)."""
    return entity.startswith(GOVERNANCE_STATE_PREFIXES)


@dataclass
class Classification:
    cutoff_ns: int
    eligible: list[dict[str, Any]] = field(default_factory=list)
    protected: list[dict[str, Any]] = field(default_factory=list)


def _members(db) -> set[str]:
    """Active consolidation canonicals and sources."""
    out: set[str] = set()
    for cid, sid in db.execute(
            "SELECT cs.canonical_fact_id, cs.source_fact_id FROM consolidation_sources cs "
            "JOIN facts s ON s.fact_id = cs.source_fact_id AND s.superseded_by = cs.canonical_fact_id"):
        out.add(cid)
        out.add(sid)
    out.update(r[0] for r in db.execute("SELECT DISTINCT canonical_fact_id FROM consolidation_sources"))
    return out


def classify(store: Store, cutoff_ns: int, tenant: Optional[str] = None) -> Classification:
    """Split the live facts stored before `cutoff_ns` (of `tenant`, or every tenant) into eligible and
    protected (with reasons)."""
    holds = legal_holds.active_holds(store.db)
    members = _members(store.db)
    out = Classification(cutoff_ns)
    for row in store.db.execute(
            f"SELECT {FACT_SELECT} FROM facts WHERE deleted = 0 AND stored_at_ns < ?1 "
            "AND (?2 IS NULL OR tenant_hash = ?2) ORDER BY stored_at_ns, fact_id", (cutoff_ns, tenant)):
        fact = fact_from_row(row)
        if governance_state(fact.entity):
            continue
        item = {"fact_id": fact.fact_id, "tenant_hash": fact.tenant_hash, "entity": fact.entity, "key": fact.key,
                "stored_at": timestamps.format_fact_time(fact.stored_at),
                "value_bytes": len(fact.value.encode("utf-8")),
                "journal_bytes": len(fact.to_json().encode("utf-8")) + _STORE_LINE_OVERHEAD}
        prefix = daemon_owned_prefix(fact.entity)
        hold_ids = legal_holds.covering_holds(holds, fact.tenant_hash, fact.entity, fact.key, fact.value)
        if fact.private:
            item["reason"] = "private"
        elif fact.entity.startswith(SYNC_TOMBSTONE_PREFIX):
            item["reason"] = "sync tombstone"
        elif prefix:
            item["reason"] = f"daemon-owned prefix {prefix}"
        elif hold_ids:
            item["reason"] = "legal hold"
            item["hold_ids"] = hold_ids
        elif fact.fact_id in members:
            item["reason"] = "consolidation member"
        else:
            out.eligible.append(item)
            continue
        out.protected.append(item)
    return out


def mark_retention_eligible(store: Store, cutoff_ns: int) -> list[str]:
    """Delete every eligible fact (one durable append); returns the ids actually deleted."""
    with store.writer_lock():
        store.refresh()
        ids = [item["fact_id"] for item in classify(store, cutoff_ns).eligible]
        deleted, _, _ = erasure.delete_facts(store, ids)
        return deleted


def retention_report(store: Store, older_than: str, now_ns: Optional[int] = None,
                     tenant: Optional[str] = None) -> dict[str, Any]:
    """What `retention apply --older-than` (of `tenant`, or every tenant) would erase, what it protects and
    why, and the bytes it frees."""
    now = timestamps.now_ns() if now_ns is None else now_ns
    cutoff = parse_cutoff(older_than, now)
    with store.writer_lock():
        store.refresh()
        c = classify(store, cutoff, tenant)
        awaiting = store.db.execute("SELECT count(*) FROM facts WHERE deleted = 1 "
                                    "AND (?1 IS NULL OR tenant_hash = ?1)", (tenant,)).get
        st = store.journal.stat()
        journal_now = st.st_size if st else 0
        compacted_now = compaction.estimate_bytes_after(store)
        tombstone = len('{"op":"delete","fact_id":"","deleted_at":"2026-01-01T00:00:00.000000000+00:00"}') + 1
        eligible_ids = [e["fact_id"] for e in c.eligible]
        freed = sum(e["journal_bytes"] for e in c.eligible)
        after = max(0, compacted_now - freed + sum(tombstone + len(i.encode()) for i in eligible_ids))
        reasons: dict[str, int] = {}
        for p in c.protected:
            key = p["reason"] if not p["reason"].startswith("daemon-owned") else "daemon-owned prefix"
            reasons[key] = reasons.get(key, 0) + 1
        next_due = None
        try:
            window = parse_duration_ns(older_than)
        except InvalidInput:
            window = None
        if window is not None:
            row = store.db.execute(  # (the exact instant: stored_at_ns is clamped outside 1677-2262)
                "SELECT min(stored_at_ns), stored_at FROM facts WHERE deleted = 0 AND private = 0 AND stored_at_ns >= ?1 "
                "AND (?2 IS NULL OR tenant_hash = ?2)", (cutoff, tenant)).fetchone()
            if row and row[0] is not None:
                next_due = timestamps.format_fact_time(timestamps.from_columns(row[0], row[1]) + window)
        return {
            "tenant": tenant,
            "older_than": older_than,
            "cutoff": timestamps.format_fact_time(cutoff),
            "generated_at": timestamps.format_fact_time(now),
            "counts": {"eligible": len(c.eligible), "protected": len(c.protected), "protected_by_reason": reasons,
                       "already_deleted_awaiting_compaction": awaiting},
            "bytes": {"journal_now": journal_now, "journal_if_compacted_now": compacted_now,
                      "journal_after_apply_estimate": after, "reclaimable_estimate": max(0, journal_now - after),
                      "eligible_value_bytes": sum(e["value_bytes"] for e in c.eligible)},
            "holds": [h.to_dict() for h in legal_holds.active_holds(store.db) if tenant in (None, h.tenant_id)],
            "next_due": next_due,
            "eligible": c.eligible,
            "protected": c.protected,
        }


def apply(store: Store, older_than: str, *, actor: Optional[str] = None, reason: Optional[str] = None,
          request_id: Optional[str] = None, vacuum: bool = False, progress=None,
          tenant: Optional[str] = None) -> dict[str, Any]:
    """Delete what is eligible (of `tenant`, or every tenant), compact, scrub, and write an erasure report
    (kind `retention`)."""
    requested = timestamps.now_ns()
    cutoff = parse_cutoff(older_than, requested)

    def plan() -> erasure.Plan:  # (made under the erasure's writer lock, the view caught up)
        c = classify(store, cutoff, tenant)
        # Facts already deleted (e.g. by a run that crashed before compacting) are erased too; with none
        # of them and nothing eligible, the run changes nothing.
        return erasure.Plan(
            to_delete=[e["fact_id"] for e in c.eligible],
            already_deleted=[r[0] for r in store.db.execute("SELECT fact_id FROM facts WHERE deleted = 1")],
            held_back=[{"fact_id": p["fact_id"], "hold_ids": p["hold_ids"]} for p in c.protected if "hold_ids" in p],
            protected=[{"fact_id": p["fact_id"], "reason": p["reason"]} for p in c.protected if "hold_ids" not in p],
        )

    selection = {"tenant": tenant, "older_than": older_than, "cutoff": timestamps.format_fact_time(cutoff),
                 "rules": "mark_retention_eligible: not private, not __sync_tombstone__::, not daemon-owned, "
                          "not held, not a consolidation member"}
    why = reason or f"retention: older than {older_than}"
    erasure.checked_request(why, actor, request_id)
    with erasure_lock.held(store):
        return erasure.execute(store, kind="retention", selection=selection, plan=plan, actor=actor, reason=why,
                               request_id=request_id, vacuum=vacuum, progress=progress, requested_at=requested)
