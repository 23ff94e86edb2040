"""The proof of an erasure: hash-chained reports stored as private facts, and `verify --erasure`.

Reports are stored as facts (`__erasure_report__::<request_id>`, key `report`, private) and each one
carries the hash of the previous one. They keep no values: per erased fact a BLAKE3 content hash and
length, and the scan needles of `erasure_scan`. `verify_erasure` scans every file of the data
directory with those needles and checks the chain.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import blake3

from ..facts.privacy import NamespaceOwner
from . import compaction, erasure_ledger, erasure_lock
from .copies import outside_reach, unaccounted
from .erasure_scan import scan_directory

if TYPE_CHECKING:
    from ..facts.store import Store

REPORT_SCHEMA = "cruxsql.erasure_report.v1"
ERASURE_REPORT_PREFIX = "__erasure_report__::"
# The one writer of erasure reports (the store refuses the namespace to everyone else).
OWNER = NamespaceOwner("erasure reports", (ERASURE_REPORT_PREFIX,))
REPORT_KEY = "report"


def report_hash(report: dict[str, Any]) -> str:
    body = {k: v for k, v in report.items() if k != "report_hash"}
    return "blake3:" + blake3.blake3(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                                ensure_ascii=False).encode("utf-8")).hexdigest()


def stored_reports(db) -> list[dict[str, Any]]:
    """Every erasure report fact, oldest first (unparsable ones as {"unparsable": fact_id})."""
    lo = ERASURE_REPORT_PREFIX
    hi = lo[:-1] + chr(ord(lo[-1]) + 1)
    out = []
    for fid, value in db.execute(
            "SELECT fact_id, value FROM facts WHERE entity >= ? AND entity < ? AND key = ? "
            "ORDER BY stored_at_ns, fact_id", (lo, hi, REPORT_KEY)):
        try:
            report = json.loads(value)
            report["_fact_id"] = fid
            out.append(report)
        except ValueError:
            out.append({"unparsable": fid})
    return out


SPILL_BYTES = 16 * 1024 * 1024  # lists longer than this (as JSON) go to part facts beside the report
SPILLED_FIELDS = ("erased_facts", "needles", "held_back", "protected", "not_erased")


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def report_tenant(report: dict[str, Any]) -> str:
    """The tenant a report is stored in: the one its selection named (so that tenant's audit export shows
    it; the report holds hashes, never values), else "default"."""
    selection = report.get("selection") or {}
    tenant = selection.get("tenant") if isinstance(selection, dict) else None
    return tenant if isinstance(tenant, str) and tenant.strip() else "default"


def store_part(store: Store, request_id: str, key: str, value: str, actor: str, tenant: str = "default") -> None:
    store.store(ERASURE_REPORT_PREFIX + request_id, key, value, tenant=tenant, confidence=1.0,
                source_receipt=request_id, private=True, horizon_class="none", actor=actor,
                owner=OWNER)


def spill(store: Store, report: dict[str, Any]) -> None:
    """Move long lists into part facts (each well under the journal's 64 MiB record ceiling), stored
    before the report; the report keeps each part's key, count and BLAKE3, so its hash covers them."""
    for name in SPILLED_FIELDS:
        items = report[name]
        size = len(dumps(items))
        if size <= SPILL_BYTES:
            continue
        per_part = max(1, len(items) * SPILL_BYTES // size)
        parts: list[dict[str, Any]] = []
        for i in range(0, len(items), per_part):
            text = dumps(items[i:i + per_part])
            key = f"{name}-{len(parts)}"
            store_part(store, report["request_id"], key, text, report["actor"], report_tenant(report))
            parts.append({"key": key, "count": len(items[i:i + per_part]),
                          "blake3": blake3.blake3(text.encode("utf-8")).hexdigest()})
        report[name] = []
        report[name + "_parts"] = parts


def load_list(db, report: dict[str, Any], name: str) -> tuple[list, list[str]]:
    """A report's list field, gathered from its part facts when it was spilled; (items, problems)."""
    parts = report.get(name + "_parts")
    if not parts:
        return list(report.get(name, [])), []
    items: list = []
    problems = []
    for part in parts:
        row = db.execute("SELECT value FROM facts WHERE entity = ? AND key = ? ORDER BY version DESC, "
                         "stored_at_ns DESC LIMIT 1",
                         (ERASURE_REPORT_PREFIX + report["request_id"], part["key"])).fetchone()
        if row is None:
            problems.append(f"report {report['request_id']}: part {part['key']} is missing")
            continue
        if blake3.blake3(row[0].encode("utf-8")).hexdigest() != part["blake3"]:
            problems.append(f"report {report['request_id']}: part {part['key']} does not match its hash")
            continue
        items.extend(json.loads(row[0]))
    return items, problems


def store_report(store: Store, report: dict[str, Any]) -> None:
    store_part(store, report["request_id"], REPORT_KEY, dumps(report), report["actor"], report_tenant(report))


def verify_erasure(store: Store) -> dict[str, Any]:
    """Scan every file of the data directory for content the stored erasure reports say is gone.

    Also checks the report chain (each report's hash, and that it names its predecessor's hash).
    `ok` is false on any hit or a broken chain.
    """
    store.refresh()
    reports = stored_reports(store.db)
    needles: list[dict[str, Any]] = []
    chain_errors: list[str] = []
    prev = None
    for report in reports:
        if "unparsable" in report:
            chain_errors.append(f"erasure report fact {report['unparsable']} does not parse")
            continue
        fid = report.pop("_fact_id")
        if report.get("report_hash") != report_hash(report):
            chain_errors.append(f"report {report.get('request_id')} ({fid}): hash does not match its content")
        if report.get("prev_report_hash") != prev:
            chain_errors.append(f"report {report.get('request_id')} ({fid}): does not chain to the previous report")
        prev = report.get("report_hash")
        report_needles, problems = load_list(store.db, report, "needles")
        chain_errors.extend(problems)
        for fact_id, form, length, anchor, digest in report_needles:
            needles.append({"fact_id": fact_id, "form": form, "length": length, "anchor": anchor, "blake3": digest,
                            "request_id": report.get("request_id")})
    # Erasures the ledger records whose report the journal no longer holds (a restore of an older backup
    # took it): their needles are scanned for too.
    reported = {r.get("request_id") for r in reports}
    ledger_only = [e for e in erasure_ledger.done(store.data_dir) if e["request_id"] not in reported]
    for entry in ledger_only:
        for fact_id, form, length, anchor, digest in entry.get("needles", []):
            needles.append({"fact_id": fact_id, "form": form, "length": length, "anchor": anchor, "blake3": digest,
                            "request_id": entry["request_id"]})
    # (an erasure running in another process now is not interrupted: its entry waits for its report)
    running = erasure_lock.running(store.data_dir)
    interrupted = [] if running else [e["request_id"] for e in erasure_ledger.interrupted(store.data_dir)]
    # Fold a checkpoint in first so the scan sees the database file, not stale WAL frames.
    compaction.checkpoint_wal(store.db, attempts=1)
    result = scan_directory(store.data_dir, needles)
    out = result.to_dict()
    out["reports"] = len(reports)
    out["chain_ok"] = not chain_errors
    out["chain_errors"] = chain_errors
    last = max([r.get("executed_at", "") for r in reports if "unparsable" not in r]
               + [e.get("executed_at", "") for e in ledger_only], default="")
    outside = outside_reach(store.data_dir, needles, last or None)
    out["ledger_only_reports"] = [e["request_id"] for e in ledger_only]
    out["interrupted_erasures"] = interrupted
    out["erasure_running"] = running
    out["outside_reach"] = outside
    out["backups_before_last_erasure"] = [c["path"] for c in outside if c["kind"] == "backup"]
    out["ok"] = result.ok and not chain_errors and not unaccounted(outside) and not interrupted
    return out
