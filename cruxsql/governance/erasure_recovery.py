"""Erasures finished or applied again later. An erasure killed mid-way (its ledger entry begun, no
report) is completed by the next command that opens the store, unless it is still running in another
process (the erasure lock); after a restore of an older backup, the erasures the ledger recorded since
are applied again to what the backup brought back (erasure.py runs both, as it runs a new erasure)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..facts import timestamps
from . import compaction, erasure_ledger, erasure_lock, erasure_scrub, legal_holds
from .erasure import execute
from .erasure_proof import load_list, stored_reports
from .erasure_selection import Plan

if TYPE_CHECKING:
    from ..facts.store import Store


def interrupted(data_dir: Path) -> list[dict[str, Any]]:
    """The erasures the ledger says were begun and not reported, unless an erasure is running right now
    (its own entry is among them: it is not interrupted, and the rest wait for a later command)."""
    entries = erasure_ledger.interrupted(data_dir)
    return [] if not entries or erasure_lock.running(data_dir) else entries


def complete_interrupted(store: Store) -> list[dict[str, Any]]:
    """Finish every erasure the ledger says was begun and not reported (killed mid-way): delete what is
    left, compact, scrub, scan, and store its report under its own request id. Returns the reports."""
    if not erasure_ledger.interrupted(store.data_dir):
        return []
    done = []
    with erasure_lock.held_if_free(store.data_dir) as free, store.writer_lock():
        if not free:  # an erasure is running in another process: its entry is not interrupted
            return []
        store.refresh()
        for entry in erasure_ledger.interrupted(store.data_dir):
            rid = entry["request_id"]
            stored = [r for r in stored_reports(store.db) if r.get("request_id") == rid]
            if stored:  # killed after the report was stored, before the ledger said so
                report = {k: v for k, v in stored[-1].items() if k != "_fact_id"}
                erased, _ = load_list(store.db, report, "erased_facts")
                needles, _ = load_list(store.db, report, "needles")
                erasure_ledger.finish(store.data_dir, report, entry.get("documents_tenant"), erased,
                                      [dict(zip(("fact_id", "form", "length", "anchor", "blake3"), n))
                                       for n in needles])
                done.append(report)
                continue
            plan, gone = Plan(), []
            for fid in entry["fact_ids"]:
                row = store.db.execute("SELECT deleted FROM facts WHERE fact_id = ?", (fid,)).fetchone()
                if row is None:
                    gone.append(fid)
                else:
                    (plan.already_deleted if row[0] else plan.to_delete).append(fid)
            # Facts it had selected that are gone from the view, with no "erasing" line: deleted by it, then
            # compacted away by another process (or a Crux daemon) before it recorded them.
            resume = entry.get("erasing")
            try:
                report = execute(store, kind=entry["kind"], selection=entry["selection"], plan=plan,
                                 actor=entry["actor"], reason=entry["reason"], request_id=rid,
                                 documents_tenant=entry.get("documents_tenant"),
                                 requested_at=timestamps.parse_ns(entry["requested_at"]), resume=resume,
                                 gone=tuple(gone) if resume is None else ())
            except compaction.LegalHoldBlocked:
                # A held fact was deleted since (by another writer): compaction stays refused until an
                # operator releases the hold or overrides it; the erasure waits, pending, for that.
                continue
            if "outcome" in report:  # killed before its delete was durable: nothing was erased
                erasure_ledger.abandon(store.data_dir, rid)
            else:
                done.append(report)
    return done


def reapply(store: Store, entries: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    """Apply again, after a restore of an older backup, the erasures the ledger recorded after it: the
    facts each one erased that the backup brought back, and its tenant's documents. Returns the reports."""
    out = []
    with erasure_lock.held(store), store.writer_lock():
        store.refresh()
        for entry in entries:
            plan = Plan()
            for fid in entry.get("fact_ids", []):
                row = store.db.execute("SELECT deleted FROM facts WHERE fact_id = ?", (fid,)).fetchone()
                if row is not None:
                    (plan.already_deleted if row[0] else plan.to_delete).append(fid)
            tenant = entry.get("documents_tenant")
            if not plan.to_delete and not plan.already_deleted and not (
                    tenant and erasure_scrub.tenant_has_documents(store, tenant)):
                continue
            _refuse_if_held(store, entry["request_id"], plan.to_delete)
            rid = f"{entry['request_id']}-reapplied-{uuid.uuid4().hex[:8]}"
            report = execute(store, kind="reapplied_after_restore",
                             selection={"reapplies": entry["request_id"], "restored_from": source,
                                        "fact_ids": plan.to_delete + plan.already_deleted},
                             plan=plan, actor="restore", reason=f"erasure {entry['request_id']} re-applied after "
                             f"restoring {source}", request_id=rid, documents_tenant=tenant)
            out.append(report)
    return out


def _refuse_if_held(store: Store, request_id: str, fact_ids: list[str]) -> None:
    """Before deleting anything: an erasure applied again cannot delete a fact an active hold of the
    restored store covers (its compaction would be refused half-way). LegalHoldBlocked names them."""
    holds = legal_holds.active_holds(store.db)
    covered = []
    for fid in fact_ids:
        tenant, entity = store.db.execute("SELECT tenant_hash, entity FROM facts WHERE fact_id = ?", (fid,)).get
        hold_ids = legal_holds.covering_holds(holds, tenant, entity)
        if hold_ids:
            covered.append((fid, hold_ids))
    if covered:
        raise compaction.LegalHoldBlocked(
            f"erasure {request_id} erased {len(covered)} fact(s) that legal hold(s) "
            + ",".join(sorted({h for _, hs in covered for h in hs}))
            + " of the restored backup cover, and no ledger or source store says those holds were released "
            "since (pass the ledger that does with --erasure-ledger)", covered)
