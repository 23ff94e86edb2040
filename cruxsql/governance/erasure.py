"""Erasure that reaches every copy: select, delete, compact, scrub, scan, report.

`erase(store, selection, ...)`: select facts (tenant / entity prefixes / fact ids / older than),
leave out what an active legal hold covers, undo consolidations the selection is part of, delete
(one durable append), compact (the values are not copied forward), then make every other copy go:
the recall index is re-synced (its generation changed), SQLite's WAL is checkpointed and truncated
(`secure_delete` already zeroed the freed cells and pages), quarantined torn tails and temp files that
hold erased content are removed, and audit exports cruxsql wrote into the data directory are
re-exported. Finally every file of the data directory is scanned for what was erased.

The report (`erasure_proof`) keeps no values, only hashes and the scan needles of `erasure_scan`;
values shorter than 8 bytes, and values a retained fact still holds, cannot be proven absent and are
marked so in the report. The selection and its plan are erasure_selection.py's; the scrub of the other
copies, erasure_scrub.py's; `execute` runs the steps, each a function of the `_Erasure` they share.
erasure_recovery.py completes an interrupted erasure and applies erasures again after a restore.
"""

from __future__ import annotations

import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Union, cast

import blake3

from ..errors import Conflict, InvalidInput
from ..facts import timestamps, view_file
from ..facts.codec import ConsolidateUndoEvent, DeleteEvent
from ..facts.faults import crash_point
from . import compaction, erasure_ledger, erasure_lock, erasure_scrub, legal_holds
from .copies import outside_reach, unaccounted
from .erasure_proof import (
    ERASURE_REPORT_PREFIX,
    REPORT_KEY,
    REPORT_SCHEMA,
    report_hash,
    spill,
    store_report,
    stored_reports,
)
from .erasure_scan import (
    MIN_NEEDLE_BYTES,
    SCAN_SCHEME,
    ScanResult,
    held_by_retained,
    needles_for,
    prefix_needles,
    scan_directory,
)
from .erasure_selection import Plan, Selection, plan_selection

if TYPE_CHECKING:
    from ..facts.store import Store


# --- the erasure -----------------------------------------------------------------------------------


def _consolidation_undos(db, fact_ids: set[str], now_text: str) -> list[ConsolidateUndoEvent]:
    """Undo events for every active consolidation a fact to delete belongs to (as canonical or source)."""
    if not fact_ids:
        return []
    canon: set[str] = set()
    for cid, sid in db.execute(
            "SELECT cs.canonical_fact_id, cs.source_fact_id FROM consolidation_sources cs "
            "JOIN facts c ON c.fact_id = cs.canonical_fact_id AND c.deleted = 0 "
            "JOIN facts s ON s.fact_id = cs.source_fact_id AND s.superseded_by = cs.canonical_fact_id"):
        if cid in fact_ids or sid in fact_ids:
            canon.add(cid)
    events = []
    for cid in sorted(canon):
        ids = [r[0] for r in db.execute(
            "SELECT source_fact_id FROM consolidation_sources WHERE canonical_fact_id = ? ORDER BY position", (cid,))]
        events.append(ConsolidateUndoEvent(cid, ids, now_text))
    return events


def _append(store: Store, events: list) -> None:
    if events:
        store.commit(lambda: events)


def delete_facts(store: Store, fact_ids: list[str]) -> tuple[list[str], list[dict[str, Any]], int]:
    """Delete facts in one durable append (undoing consolidations they belong to first).

    Returns (deleted ids, [{fact_id, reason}] not deleted, consolidations undone).
    """
    if not fact_ids:
        return [], [], 0
    now_text = timestamps.format_event_time(timestamps.now_ns())
    wanted = set(fact_ids)
    undos = _consolidation_undos(store.db, wanted, now_text)
    _append(store, undos)
    pending = [fid for fid in sorted(wanted) if store.db.execute(
        "SELECT 1 FROM facts WHERE fact_id = ? AND deleted = 0", (fid,)).fetchone()]
    _append(store, [DeleteEvent(fid, now_text) for fid in pending])
    deleted, refused = [], []
    for fid in sorted(wanted):
        row = store.db.execute("SELECT deleted FROM facts WHERE fact_id = ?", (fid,)).fetchone()
        if row is not None and row[0]:
            deleted.append(fid)
        else:
            refused.append({"fact_id": fid, "reason": "consolidation member (undo refused)"
                            if row is not None else "unknown fact_id"})
    return deleted, refused, len(undos)


_COMPACTED_AWAY_WHY = "compacted away by another process before this erasure recorded it"
COMPACTED_AWAY = "not scanned: " + _COMPACTED_AWAY_WHY


def _erased_entries(store: Store, plan: Plan) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(erased facts, scan needles, torn-fragment needles) for every deleted fact compaction will drop."""
    # Everything compaction will drop: the facts now deleted (ours and earlier deletions).
    erased_rows = cast(list[tuple[str, str, str]], store.db.execute(      # TEXT NOT NULL columns
        "SELECT fact_id, tenant_hash, value FROM facts WHERE deleted = 1 ORDER BY fact_id").fetchall())
    # Values a retained fact still holds, or holds inside its entity, key or value, cannot be proven
    # absent. Compared in Python (a SQL self-join would build a transient index of values in SQLite's
    # temp directory, outside the data directory).
    erased_values = {r[2] for r in erased_rows}
    still_held = {v for (v,) in store.db.execute("SELECT value FROM facts WHERE deleted = 0")
                  if v in erased_values}
    shared = {r[0] for r in erased_rows if r[2] in still_held}
    del erased_values, still_held
    candidates = [n for fid, _, value in erased_rows if fid not in shared for n in needles_for(fid, value)]
    # (a fact's three texts joined by NULs in SQL, as `held_by_retained` joins its batches: one row each)
    contained = held_by_retained((text for (text,) in store.db.execute(
        "SELECT entity || char(0) || key || char(0) || value FROM facts WHERE deleted = 0")),
        candidates) if candidates else set()
    del candidates
    selected = set(plan.to_delete) | set(plan.already_deleted)
    erased, needles, fragments = [], [], []
    for fid, tenant, value in erased_rows:
        raw = value.encode("utf-8")
        entry = {"fact_id": fid, "tenant_hash": tenant, "content_hash": "blake3:" + blake3.blake3(raw).hexdigest(),
                 "value_bytes": len(raw), "selected": fid in selected}
        if fid in shared:
            entry["scan"] = "not scanned: a retained fact holds the same value"
        elif fid in contained:
            entry["scan"] = "not scanned: a retained fact's entity, key or value contains it"
        elif len(raw) < MIN_NEEDLE_BYTES:
            entry["scan"] = f"not scanned: shorter than {MIN_NEEDLE_BYTES} bytes"
        else:
            entry["scan"] = "scanned"
            needles.extend(needles_for(fid, value))
            fragments.extend(prefix_needles(fid, value))
        erased.append(entry)
    del erased_rows
    return erased, needles, fragments


def nothing_to_erase(kind: str, selection: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """The outcome of an erasure that has nothing to erase: nothing is deleted, compacted or stored.

    `outcome` is "held_back" when legal holds covered every fact the selection matched, else
    "nothing_matched". (A stored erasure report never has an `outcome` key.)
    """
    holds = sorted({h for item in plan.held_back for h in item["hold_ids"]})
    return {
        "outcome": "held_back" if plan.held_back else "nothing_matched",
        "kind": kind,
        "selection": selection,
        "counts": {"facts_selected": 0, "facts_erased": 0, "facts_held_back": len(plan.held_back),
                   "facts_protected": len(plan.protected)},
        "held_back": plan.held_back,
        "protected": plan.protected,
        "holds_blocking": holds,
        "ok": True,
    }


def checked_request(reason: Optional[str], actor: Optional[str], request_id: Optional[str]) -> tuple[str, str, str]:
    """(reason, actor, request id) of an erasure, checked (InvalidInput) and defaulted: said before the
    erasure waits for anything."""
    why = (reason or "").strip()
    if not why:
        raise InvalidInput("reason is required for an erasure")
    who = (actor or "").strip() or legal_holds.DEFAULT_ACTOR
    rid = (request_id or "").strip() or "er_" + uuid.uuid4().hex
    if any(ch in rid for ch in "\n\r") or len(rid) > 200:
        raise InvalidInput(f"invalid request id {rid!r}")
    return why, who, rid


def execute(store: Store, *, kind: str, selection: dict[str, Any], plan: Union[Plan, Callable[[], Plan]],
            actor: Optional[str], reason: str, request_id: Optional[str] = None,
            override_receipt: Optional[legal_holds.LegalHoldReceipt] = None, documents_tenant: Optional[str] = None,
            vacuum: bool = False, progress=None, requested_at: Optional[int] = None,
            resume: Optional[dict[str, Any]] = None, gone: tuple[str, ...] = ()) -> dict[str, Any]:
    """Delete the plan's facts, compact, scrub every copy, scan, and store + return the report.

    The caller holds the erasure lock (`erasure_lock`). Writers wait only for short phases: the delete
    (under the writer lock); the compaction, whose snapshot is taken after the delete and without the
    lock, so that under it only what other writers appended meanwhile is carried over before the swap;
    the scrub of the other copies the store keeps (documents, derived tables, quarantine and temp files,
    exports, tool errors); and the report. The WAL checkpoint and the byte scan run without the lock;
    a scan that finds anything is made again under the lock, after a VACUUM when the view's file holds
    it. From the delete on, the writer lock is waited for without the store's timeout (a timeout then
    would leave the erasure half done). `plan`: a Plan, or a function that makes one under the writer
    lock once the view caught up (the selection read where no writer can change it). `resume` is the
    ledger's "erasing" line of an interrupted erasure (`complete_interrupted`): its erased facts and
    needles, which compaction may already have taken out of the journal. `gone`: facts an interrupted
    erasure had deleted that another process compacted away before the erasure recorded them (listed,
    not verified)."""
    why, who, request_id = checked_request(reason, actor, request_id)
    run = _Erasure(store, kind, selection, who, why, request_id, override_receipt, documents_tenant, vacuum,
                   progress, requested_at or timestamps.now_ns(), resume, gone)
    timeout = store.journal.lock_timeout
    try:
        with ExitStack() as snapshot:
            return _execute(run, snapshot, plan)
    finally:
        store.journal.lock_timeout = timeout


@dataclass
class _Erasure:
    """One erasure, from its delete to its report: the request, then what each step found for the next
    steps and for the report."""

    store: Store
    kind: str
    selection: dict[str, Any]
    who: str
    why: str
    request_id: str
    override_receipt: Optional[legal_holds.LegalHoldReceipt]
    documents_tenant: Optional[str]
    vacuum: bool
    progress: Any
    requested_at: int
    resume: Optional[dict[str, Any]]   # the ledger's "erasing" line of an interrupted erasure
    gone: tuple[str, ...]              # its deleted facts that another process compacted away
    plan: Plan = field(default_factory=Plan)
    covered: list[tuple[str, list[str]]] = field(default_factory=list)  # deleted facts a hold covers
    deleted: list[str] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    undone: int = 0                    # consolidations undone
    erased: list[dict[str, Any]] = field(default_factory=list)
    needles: list[dict[str, Any]] = field(default_factory=list)
    fragments: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # failures after the compaction, said in the report
    documents: Optional[dict[str, Any]] = None
    indexes: list[str] = field(default_factory=list)
    files: dict[str, list] = field(default_factory=dict)
    tool_errors_scrubbed: int = 0
    sqlite: dict[str, Any] = field(default_factory=lambda: {"wal_checkpointed": False, "vacuumed": False})


def _execute(run: _Erasure, snapshot: ExitStack, plan: Union[Plan, Callable[[], Plan]]) -> dict[str, Any]:
    """The steps of `execute`, in order; `snapshot` holds the view as the delete left it until the
    erased values are read from it."""
    nothing = _delete(run, snapshot, plan)
    if nothing is not None:
        return nothing
    _record_erased(run, snapshot)
    comp = _compact(run)
    crash_point("erase-after-compact")
    # From here on the journal no longer holds the values: record failures in the report, never
    # lose the report over them.
    if run.gone:
        run.errors.append(f"{len(run.gone)} fact(s) {_COMPACTED_AWAY_WHY}: their hashes and needles were never "
                          "recorded, so their other copies were neither scrubbed nor scanned")
    _scrub(run)
    verification = _verify(run)
    report = _store_report(run, comp, verification)
    erasure_ledger.finish(run.store.data_dir, report, run.documents_tenant, run.erased, run.needles)
    crash_point("erase-after-report")
    return report


def _delete(run: _Erasure, snapshot: ExitStack, plan: Union[Plan, Callable[[], Plan]]) -> Optional[dict[str, Any]]:
    """Under the writer lock: make the plan, refuse what compaction would refuse, tell the ledger, delete,
    and fix the view as the delete left it. The outcome when there is nothing to erase, else None."""
    store = run.store
    with store.writer_lock():
        store.refresh()
        if store.db.execute("SELECT 1 FROM facts WHERE entity = ? AND key = ?",
                            (ERASURE_REPORT_PREFIX + run.request_id, REPORT_KEY)).fetchone():
            raise Conflict(f"an erasure report with request id {run.request_id!r} already exists")
        run.plan = plan = plan() if callable(plan) else plan
        if run.resume is None and not run.gone and not plan.to_delete and not plan.already_deleted and not (
                run.documents_tenant is not None and erasure_scrub.tenant_has_documents(store, run.documents_tenant)):
            return nothing_to_erase(run.kind, run.selection, plan)
        _refuse_if_compaction_would(run)
        # The ledger knows of the erasure before anything is deleted: killed from here on, the next
        # command completes it (`complete_interrupted`), so the values go and the report exists.
        if run.resume is None:
            erasure_ledger.begin(store.data_dir, request_id=run.request_id, kind=run.kind, selection=run.selection,
                                 fact_ids=plan.to_delete + plan.already_deleted,
                                 documents_tenant=run.documents_tenant, actor=run.who, reason=run.why,
                                 requested_at=timestamps.format_fact_time(run.requested_at))
        run.deleted, run.refused, run.undone = delete_facts(store, plan.to_delete)
        crash_point("erase-after-delete")
        # Deleted: from here on a timeout would leave the erasure half done (for the next command to
        # complete), so the erasure waits for the writer lock as long as another writer holds it.
        store.journal.lock_timeout = None
        if run.resume is None:
            # The view as the delete left it, fixed by a first read before the lock is released: a
            # compaction that gets the lock next cannot take the deleted facts out of it.
            snapshot.enter_context(store.read_snapshot())
            store.db.execute("SELECT count(*) FROM facts WHERE deleted = 1").fetchall()
    return None


def _refuse_if_compaction_would(run: _Erasure) -> None:
    """Refuse before deleting anything when compaction would be refused anyway."""
    run.covered = covered = compaction.blocked_by_holds(run.store)
    if not covered:
        return
    if run.override_receipt is None:
        hold_ids = sorted({h for _, hs in covered for h in hs})
        raise compaction.LegalHoldBlocked(
            "hard erasure blocked by active legal hold(s): " + ",".join(hold_ids)
            + " (already-deleted facts they cover would be erased; pass a legal_hold_overridden receipt)",
            covered)
    compaction.check_override(run.override_receipt, covered)


def _record_erased(run: _Erasure, snapshot: ExitStack) -> None:
    """What the erasure takes (facts, content hashes, scan needles), read from the view as the delete left
    it and written to the ledger before compaction drops the values; an interrupted erasure's, from the
    ledger's "erasing" line."""
    if run.resume is not None:
        run.erased, run.needles, run.fragments = (run.resume["erased_facts"], run.resume["needles"],
                                                  run.resume["fragments"])
        return
    run.erased, run.needles, run.fragments = _erased_entries(run.store, run.plan)
    snapshot.close()
    run.erased += [{"fact_id": fid, "tenant_hash": None, "content_hash": None, "value_bytes": None,
                    "selected": True, "scan": COMPACTED_AWAY} for fid in run.gone]
    erasure_ledger.erasing(run.store.data_dir, run.request_id, run.erased, run.needles, run.fragments)


def _compact(run: _Erasure) -> compaction.CompactionReport:
    """The compaction that drops the deleted facts' values from the journal. Corrupt lines are not
    dropped silently: compaction keeps them in a quarantine file (named in the report), where the byte
    scan still looks for erased values."""
    try:
        return compaction.compact(run.store, override_receipt=run.override_receipt if run.covered else None,
                                  progress=run.progress, hash_before=True, drop_corrupt=True, for_erasure=True)
    except compaction.LegalHoldBlocked as exc:  # another writer deleted a held fact since the delete
        raise compaction.LegalHoldBlocked(
            f"{exc}; a fact the hold covers was deleted by another writer while this erasure ran. Its own "
            "deletions are made: the next command completes it once compaction is allowed again", exc.covered
        ) from None


def _scrub(run: _Erasure) -> None:
    """Under the writer lock, the other copies the store keeps: the tenant's documents, the derived
    indexes, quarantine and temp files and exports, tool errors; with `vacuum`, the view's file."""
    store = run.store
    with store.writer_lock():
        if run.documents_tenant is not None:
            _erase_documents(run, run.documents_tenant)
        run.indexes = erasure_scrub.sync_derived_indexes(store)
        run.files = erasure_scrub.scrub_files(store, run.needles, run.fragments, run.errors)
        run.tool_errors_scrubbed = erasure_scrub.scrub_tool_errors(store.db, run.needles + run.fragments)
        if run.vacuum:
            run.sqlite.update(erasure_scrub.scrub_sqlite(store, True))


def _erase_documents(run: _Erasure, tenant: str) -> None:
    """The tenant's documents, their chunk texts added to what the scan looks for."""
    try:
        from ..documents.lane import DocumentLane
        doc_needles, doc_fragments, _ = erasure_scrub.document_needles(run.store, tenant.strip())
        run.documents = documents = dict(DocumentLane(run.store).erase_tenant(tenant))
        documents["chunk_needles"] = len(doc_needles)
        run.needles.extend(doc_needles)
        run.fragments.extend(doc_fragments)
    except Exception as exc:
        run.errors.append(f"document erasure failed: {exc}")


def _verify(run: _Erasure) -> ScanResult:
    """The WAL folded in, then every file as it is now scanned: a value another writer stored again
    meanwhile is found, and said."""
    store, sqlite = run.store, run.sqlite
    sqlite["wal_checkpointed"] = compaction.checkpoint_wal(store.db)
    verification = scan_directory(store.data_dir, run.needles)
    if not verification.ok:
        # Look again where no writer adds to the files meanwhile. secure_delete zeroes deleted cells, but
        # a B-tree rebalance can leave old bytes in a live page's unused space; VACUUM rewrites every
        # page, so run it when the scan finds any in the view's files.
        with store.writer_lock():
            if not sqlite["vacuumed"] and any(hit["file"].startswith(view_file.DB_NAME) for hit in verification.hits):
                sqlite.update(erasure_scrub.scrub_sqlite(store, True))
                sqlite["vacuumed_after_scan"] = True
            else:
                sqlite["wal_checkpointed"] = compaction.checkpoint_wal(store.db)
            verification = scan_directory(store.data_dir, run.needles)
    return verification


def _store_report(run: _Erasure, comp: compaction.CompactionReport, verification: ScanResult) -> dict[str, Any]:
    """The report, stored as a fact under the writer lock (the report chain: the last report read and
    this one stored together); the recorded copies outside the data directory scanned first."""
    store = run.store
    now = timestamps.now_ns()
    outside = outside_reach(store.data_dir, run.needles, timestamps.format_event_time(now))
    with store.writer_lock():
        store.refresh()
        reports = stored_reports(store.db)
        report = _report(run, comp, verification, outside, now, reports[-1].get("report_hash") if reports else None)
        spill(store, report)
        report["report_hash"] = report_hash(report)
        store_report(store, report)
    return report


def _report(run: _Erasure, comp: compaction.CompactionReport, verification: ScanResult,
            outside: list[dict[str, Any]], now: int, prev: Optional[str]) -> dict[str, Any]:
    plan, errors = run.plan, run.errors
    return {
        "schema": REPORT_SCHEMA,
        "request_id": run.request_id,
        "kind": run.kind,
        "requested_at": timestamps.format_fact_time(run.requested_at),
        "executed_at": timestamps.format_fact_time(now),
        "actor": run.who,
        "reason": run.why,
        "selection": run.selection,
        "counts": {
            "facts_selected": len(plan.to_delete) + len(plan.already_deleted),
            "facts_deleted_now": len(run.deleted),
            "facts_already_deleted": len(plan.already_deleted),
            "facts_erased": len(run.erased),
            "facts_held_back": len(plan.held_back),
            "facts_protected": len(plan.protected),
            "facts_not_deleted": len(run.refused),
            "consolidations_undone": run.undone,
        },
        "stores": _stores_section(run, comp),
        "erased_facts": run.erased,
        "not_erased": run.refused,
        "held_back": plan.held_back,
        "protected": plan.protected,
        "holds_blocking": sorted({h for item in plan.held_back for h in item["hold_ids"]}),
        "backups_still_holding": [c["path"] for c in outside if c["kind"] == "backup"],
        "outside_reach": outside,
        "override_receipt_id": comp.override_receipt_id,
        "journal": {
            "before": {"blake3": comp.journal_blake3_before, "bytes": comp.bytes_before,
                       "inode": comp.inode_before},
            "after": {"blake3": comp.journal_blake3_after, "bytes": comp.bytes_after, "inode": comp.inode_after},
        },
        "scan_scheme": SCAN_SCHEME,
        "needles": [[n["fact_id"], n["form"], n["length"], n["anchor"], n["blake3"]] for n in run.needles],
        "verification": verification.to_dict(),
        "errors": errors,
        # (recorded backups and exports are accounted for: listed with their rule, `doctor` warns)
        "ok": verification.ok and not errors and not unaccounted(outside),
        "prev_report_hash": prev,
    }


def _stores_section(run: _Erasure, comp: compaction.CompactionReport) -> dict[str, Any]:
    """The report's `stores`: what the erasure did to each copy the store keeps."""
    files = run.files
    return {
        "journal": {"lines_before": comp.lines_before, "lines_after": comp.lines_after,
                    "bytes_before": comp.bytes_before, "bytes_after": comp.bytes_after,
                    "facts_dropped": comp.facts_dropped, "tombstones": comp.tombstones_kept,
                    "corrupt_lines_dropped": comp.corrupt_lines_dropped,
                    "corrupt_lines_file": comp.corrupt_lines_file,
                    "lines_carried_over": comp.lines_carried_over},
        "view": {"fact_rows_removed": comp.facts_dropped, "generation": comp.generation,
                 "derived_indexes_synced": run.indexes, **run.sqlite},
        "documents": run.documents,
        "quarantined_tails": {"removed": files["quarantined_tails_removed"]},
        "quarantine_files": {"rewritten": files["quarantine_rewritten"]},
        "tool_errors": {"messages_scrubbed": run.tool_errors_scrubbed},
        "temp_files": {"removed": files["temp_files_removed"] + comp.stale_temp_files_removed},
        "exports": {"rewritten": files["exports_rewritten"]},
    }


def unmatched_fact_ids(store: Store, selection: Selection) -> list[str]:
    """The --fact-id values that name no fact the rest of the selection matches."""
    found = set()
    for fid in selection.fact_ids:
        where, params = Selection(tenant=selection.tenant, fact_ids=(fid,)).where()
        if store.db.execute(f"SELECT 1 FROM facts WHERE {where}", params).fetchone():
            found.add(fid)
    return [fid for fid in selection.fact_ids if fid not in found]


def dry_run(store: Store, selection: Selection, documents: bool = False) -> dict[str, Any]:
    """What `erase` would take, changing nothing: the facts (and those held back or protected), the
    tenant's documents, and the recorded copies outside the data directory that hold the values."""
    with store.writer_lock():
        store.refresh()
        plan = plan_selection(store, selection)
        needles = []
        for fid in plan.to_delete + plan.already_deleted:
            value = store.db.execute("SELECT value FROM facts WHERE fact_id = ?", (fid,)).get
            needles.extend(needles_for(fid, value))
        chunks = 0
        if documents and selection.tenant is not None:
            chunks = store.db.execute("SELECT count(*) FROM document_chunks WHERE tenant_id = ?",
                                      (selection.tenant,)).get if erasure_scrub.tenant_has_documents(
                                          store, selection.tenant) else 0
        return {"dry_run": True, "selection": selection.to_report(), "facts": plan.to_delete,
                "already_deleted": plan.already_deleted, "held_back": plan.held_back, "protected": plan.protected,
                "document_chunks": chunks,
                "copies_outside_reach": outside_reach(store.data_dir, needles, timestamps.format_event_time(
                    timestamps.now_ns()))}


def erase(store: Store, selection: Selection, *, actor: Optional[str] = None, reason: str, request_id: Optional[str] = None,
          override_receipt: Optional[legal_holds.LegalHoldReceipt] = None, documents: bool = False,
          vacuum: bool = False, progress=None) -> dict[str, Any]:
    """Erase what `selection` matches (minus held facts) from every copy; returns the erasure report."""
    if documents and selection.tenant is None:
        raise InvalidInput("--documents needs --tenant (documents are erased per tenant)")
    checked_request(reason, actor, request_id)
    requested_at = timestamps.now_ns()
    with erasure_lock.held(store):
        return execute(store, kind="erasure", selection=selection.to_report(),
                       plan=lambda: plan_selection(store, selection), actor=actor, reason=reason,
                       request_id=request_id, override_receipt=override_receipt,
                       documents_tenant=selection.tenant if documents else None, vacuum=vacuum, progress=progress,
                       requested_at=requested_at)
