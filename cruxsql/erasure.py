"""Erasure that reaches every copy, its hash-chained report, and `verify --erasure`.

`erase(store, selection, ...)`: select facts (tenant / entity prefixes / fact ids / older than),
leave out what an active legal hold covers, undo consolidations the selection is part of, delete
(one durable append), compact (the values are not copied forward), then make every other copy go:
the recall index is re-synced (its generation changed), SQLite's WAL is checkpointed and truncated
(`secure_delete` already zeroed the freed cells and pages), quarantined torn tails and temp files that
hold erased content are removed, and audit exports cruxsql wrote into the data directory are
re-exported. Finally every file of the data directory is scanned for what was erased.

The report keeps no values: per erased fact a BLAKE3 content hash and length, and scan "needles" —
for each form a value can take on disk (raw UTF-8, JSON-escaped, lowercased, CSV-quoted, and
256-byte chunks of long values, which SQLite may split across overflow pages) its length, a 32-bit
anchor (a multiplicative hash) of its first 8 bytes, and its BLAKE3. The scanner slides an 8-byte window
over every file (vectorised with numpy), looks anchors up, and confirms a candidate with BLAKE3.
Values shorter than 8 bytes, and values a retained fact still holds, cannot be proven absent and are
marked so in the report.

Reports are stored as facts (`__erasure_report__::<request_id>`, key `report`, private) and each one
carries the hash of the previous one.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import blake3
import numpy as np

from . import compaction, legal_holds, timestamps, view
from .codec import ConsolidateUndoEvent, DeleteEvent
from .errors import Conflict, InvalidInput
from .faults import crash_point
from .journal import JOURNAL_NAME

REPORT_SCHEMA = "cruxsql.erasure_report.v1"
ERASURE_REPORT_PREFIX = "__erasure_report__::"
REPORT_KEY = "report"
GOVERNANCE_PREFIXES = (legal_holds.LEGAL_HOLD_ENTITY_PREFIX, legal_holds.LEGAL_HOLD_RECEIPT_ENTITY_PREFIX,
                       ERASURE_REPORT_PREFIX)
MIN_NEEDLE_BYTES = 8
CHUNK_BYTES = 256
CHUNK_FROM_BYTES = 2048
MAX_CHUNKS_PER_VALUE = 4096
SCAN_SCHEME = "anchor8-mulhash-hi32+blake3-128"
_SCAN_BLOCK = 1 << 23
_M64 = (1 << 64) - 1
_SALT = 0x5EED_C0FF_EE15_A11D
_MULT = 0x9E3779B97F4A7C15  # 2^64 / golden ratio (odd): multiplicative hashing


# --- needles ---------------------------------------------------------------------------------------


def _mix_int(x: int) -> int:
    """Anchor of an 8-byte little-endian word: the top 32 bits of (word ^ salt) * odd constant mod 2^64."""
    return (((x ^ _SALT) * _MULT) & _M64) >> 32


def _mix_array(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return ((x ^ np.uint64(_SALT)) * np.uint64(_MULT)) >> np.uint64(32)


def _digest(data: bytes) -> str:
    return blake3.blake3(data).hexdigest()[:32]


def _lower(value: str) -> str:
    try:
        from .scope import rust_lower  # the recall lane's lowercasing, when present
        return rust_lower(value)
    except Exception:  # pragma: no cover - recall lane not installed
        return value.lower()


def value_forms(value: str) -> dict[str, bytes]:
    """The byte forms an erased value can take in the data directory's files."""
    raw = value.encode("utf-8")
    forms = {"utf8": raw}
    escaped = json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8")
    if escaped != raw:
        forms["json"] = escaped
    lowered = _lower(value).encode("utf-8")
    if lowered != raw:
        forms["lower"] = lowered
    if '"' in value:
        forms["csv"] = value.replace('"', '""').encode("utf-8")
    return forms


def needles_for(fact_id: str, value: str) -> list[dict[str, Any]]:
    """Scan needles for one value (empty when it is shorter than MIN_NEEDLE_BYTES)."""
    out = []
    for form, data in value_forms(value).items():
        if len(data) < MIN_NEEDLE_BYTES:
            continue
        pieces = [(form, data)]
        if form == "utf8" and len(data) > CHUNK_FROM_BYTES:
            n = len(data) // CHUNK_BYTES
            step = max(1, -(-n // MAX_CHUNKS_PER_VALUE))
            pieces += [(f"chunk{i}", data[i * CHUNK_BYTES:(i + 1) * CHUNK_BYTES]) for i in range(0, n, step)]
        seen = set()
        for name, piece in pieces:
            key = (len(piece), _digest(piece))
            if key in seen:
                continue
            seen.add(key)
            out.append({"fact_id": fact_id, "form": name, "length": len(piece),
                        "anchor": _mix_int(int.from_bytes(piece[:8], "little")), "blake3": key[1]})
    return out


# --- scanning --------------------------------------------------------------------------------------


@dataclass
class ScanResult:
    files_scanned: int = 0
    bytes_scanned: int = 0
    needles: int = 0
    hits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.hits

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "files_scanned": self.files_scanned, "bytes_scanned": self.bytes_scanned,
                "needles": self.needles, "hits": self.hits}


class Scanner:
    """Finds needles (length, anchor, BLAKE3) in files without knowing the values."""

    def __init__(self, needles: Iterable[dict[str, Any]]) -> None:
        self.by_anchor: dict[int, list[dict[str, Any]]] = {}
        count = 0
        for n in needles:
            self.by_anchor.setdefault(int(n["anchor"]), []).append(n)
            count += 1
        self.count = count
        self.anchors = np.array(sorted(self.by_anchor), dtype=np.uint64)
        # A 2^24-entry presence table on the anchors' top 24 bits screens windows before the exact lookup.
        self.screen = np.zeros(1 << 24, dtype=bool)
        self.screen[(self.anchors >> np.uint64(8)).astype(np.int64)] = True

    def scan_file(self, path: Path, max_hits: int = 100) -> tuple[int, list[dict[str, Any]]]:
        hits: list[dict[str, Any]] = []
        try:
            fh = open(path, "rb")
        except OSError:
            return 0, hits
        with fh:
            size = os.fstat(fh.fileno()).st_size
            if not self.count or size < MIN_NEEDLE_BYTES:
                return size, hits
            base = 0
            while base < size and len(hits) < max_hits:
                fh.seek(base)
                block = fh.read(_SCAN_BLOCK + 7)
                if len(block) < 8:
                    break
                limit = min(len(block) - 7, _SCAN_BLOCK)  # window starts owned by this block
                for pos in self._candidates(block, limit):
                    for needle in self.by_anchor.get(int(self._anchor_at(block, pos)), ()):
                        start = base + pos
                        fh.seek(start)
                        data = fh.read(needle["length"])
                        if len(data) == needle["length"] and _digest(data) == needle["blake3"]:
                            hits.append({"file": str(path), "offset": start, "fact_id": needle["fact_id"],
                                         "form": needle["form"], "request_id": needle.get("request_id")})
                base += _SCAN_BLOCK
            return size, hits

    @staticmethod
    def _anchor_at(block: bytes, pos: int) -> int:
        return _mix_int(int.from_bytes(block[pos:pos + 8], "little"))

    def _candidates(self, block: bytes, limit: int) -> list[int]:
        out: list[np.ndarray] = []
        anchors = self.anchors
        for k in range(8):
            n = (len(block) - k) // 8
            if n <= 0:
                continue
            words = np.frombuffer(block, dtype="<u8", count=n, offset=k)
            h = _mix_array(words)
            maybe = np.nonzero(self.screen[(h >> np.uint64(8)).astype(np.int64)])[0]
            if not maybe.size:
                continue
            hm = h[maybe]
            idx = np.searchsorted(anchors, hm)
            idx[idx >= len(anchors)] = len(anchors) - 1
            found = maybe[anchors[idx] == hm]
            if found.size:
                pos = k + 8 * found
                out.append(pos[pos < limit])
        if not out:
            return []
        return sorted(int(p) for p in np.concatenate(out))


def scan_directory(data_dir: Path, needles: list[dict[str, Any]]) -> ScanResult:
    """Scan every regular file under `data_dir` for the needles."""
    scanner = Scanner(needles)
    result = ScanResult(needles=scanner.count)
    for path in sorted(Path(data_dir).rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        size, hits = scanner.scan_file(path)
        result.files_scanned += 1
        result.bytes_scanned += size
        for hit in hits:
            hit["file"] = str(path.relative_to(data_dir))
        result.hits.extend(hits)
    return result


# --- selection -------------------------------------------------------------------------------------


@dataclass
class Selection:
    """Which facts an erasure targets: every given criterion must match (fact ids: any of them)."""

    tenant: Optional[str] = None
    entity_prefixes: tuple[str, ...] = ()
    fact_ids: tuple[str, ...] = ()
    older_than: Optional[str] = None
    cutoff_ns: Optional[int] = None

    def __post_init__(self) -> None:
        self.entity_prefixes = tuple(p for p in (self.entity_prefixes or ()) if p)
        self.fact_ids = tuple(f.strip() for f in (self.fact_ids or ()) if f and f.strip())
        if self.tenant is not None and not self.tenant.strip():
            raise InvalidInput("--tenant must not be empty")
        if self.older_than is not None and self.cutoff_ns is None:
            from .durations import parse_cutoff
            self.cutoff_ns = parse_cutoff(self.older_than)

    def is_empty(self) -> bool:
        return self.tenant is None and not self.entity_prefixes and not self.fact_ids and self.cutoff_ns is None

    def where(self) -> tuple[str, list]:
        clauses, params = [], []
        if self.tenant is not None:
            clauses.append("tenant_hash = ?")
            params.append(self.tenant)
        if self.entity_prefixes:
            clauses.append("(" + " OR ".join("substr(entity, 1, ?) = ?" for _ in self.entity_prefixes) + ")")
            params += [x for p in self.entity_prefixes for x in (len(p), p)]
        if self.fact_ids:
            clauses.append("fact_id IN (" + ",".join("?" * len(self.fact_ids)) + ")")
            params += list(self.fact_ids)
        if self.cutoff_ns is not None:
            clauses.append("stored_at_ns < ?")
            params.append(self.cutoff_ns)
        return " AND ".join(clauses) or "1", params

    def to_report(self) -> dict[str, Any]:
        """The selection as the report keeps it: entity prefixes only as hashes (they may name a person)."""
        return {
            "tenant": self.tenant,
            "entity_prefixes": [{"blake3": blake3.blake3(p.encode()).hexdigest(), "bytes": len(p.encode())}
                                for p in self.entity_prefixes],
            "fact_ids": list(self.fact_ids),
            "older_than": self.older_than,
            "cutoff": None if self.cutoff_ns is None else timestamps.format_fact_time(self.cutoff_ns),
        }


def _governance(entity: str) -> bool:
    return entity.startswith(GOVERNANCE_PREFIXES)


@dataclass
class Plan:
    """What an erasure will delete, and what it leaves and why."""

    to_delete: list[str] = field(default_factory=list)
    already_deleted: list[str] = field(default_factory=list)
    held_back: list[dict[str, Any]] = field(default_factory=list)
    protected: list[dict[str, Any]] = field(default_factory=list)


def plan_selection(store, selection: Selection) -> Plan:
    """Classify the facts a selection matches (the caller holds the writer lock, view caught up)."""
    if selection.is_empty():
        raise InvalidInput("an erasure needs a selection: --tenant, --entity-prefix, --fact-id or --older-than")
    holds = legal_holds.active_holds(store.db)
    where, params = selection.where()
    plan = Plan()
    for fid, tenant, entity, deleted in store.db.execute(
            f"SELECT fact_id, tenant_hash, entity, deleted FROM facts WHERE {where} ORDER BY fact_id", params):
        if _governance(entity):
            plan.protected.append({"fact_id": fid, "reason": "governance record (legal hold, receipt or report)"})
            continue
        hold_ids = legal_holds.covering_holds(holds, tenant, entity)
        if hold_ids:
            plan.held_back.append({"fact_id": fid, "hold_ids": hold_ids})
        elif deleted:
            plan.already_deleted.append(fid)
        else:
            plan.to_delete.append(fid)
    return plan


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


def _append(store, events: list) -> None:
    if events:
        store.commit(lambda: events)


def delete_facts(store, fact_ids: list[str]) -> tuple[list[str], list[dict[str, Any]], int]:
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


def _document_needles(store, tenant: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Needles (and fragment needles) for the chunk texts a tenant's documents hold, before they go.

    Texts another tenant also holds are left out (they stay, legitimately)."""
    from .documents.segments import load_manifest, read_segment, segments_dir

    directory = segments_dir(store.data_dir)
    if not directory.exists():
        return [], [], 0
    mine: dict[str, str] = {}
    others: set[str] = set()
    for info in load_manifest(directory).segments:
        for rec in read_segment(directory, info).records:
            digest = _digest(rec.text.encode("utf-8"))
            if rec.tenant_id == tenant:
                mine.setdefault(digest + "|" + rec.chunk_id, rec.text)
            else:
                others.add(digest)
    needles, fragments = [], []
    for key, text in mine.items():
        digest, chunk_id = key.split("|", 1)
        if digest in others:
            continue
        needles.extend(needles_for(f"chunk:{chunk_id}", text))
        fragments.extend(prefix_needles(f"chunk:{chunk_id}", text))
    return needles, fragments, len(mine)


def _scrub_sqlite(store, vacuum: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"wal_checkpointed": False, "vacuumed": False}
    db = store.db
    if vacuum:
        # VACUUM copies the whole database through a temp database: keep it in memory, not in /tmp.
        previous = db.execute("PRAGMA temp_store").fetchone()[0]
        try:
            db.execute("PRAGMA temp_store = MEMORY")
            db.execute("VACUUM")
            out["vacuumed"] = True
        except Exception as exc:  # busy readers elsewhere: reported, the scan below is the judge
            out["vacuum_error"] = str(exc)
        finally:
            db.execute(f"PRAGMA temp_store = {int(previous)}")
    out["wal_checkpointed"] = compaction.checkpoint_wal(db)
    return out


def _sync_derived_indexes(store) -> list[str]:
    """Let the recall lane drop its copies of erased text now (it starts over on a new generation)."""
    done = []
    try:
        from .fact_index import TextIndex
    except ImportError:  # pragma: no cover
        return done
    try:
        TextIndex(store.db).sync()
        done.append("recall_text_index")
    except Exception as exc:  # a missing table (migration not applied) must not block an erasure
        done.append(f"recall_text_index: {exc}")
    return done


def prefix_needles(fact_id: str, value: str) -> list[dict[str, Any]]:
    """Needles for the first 16 bytes of a value's forms: used only to find torn fragments to remove."""
    out = []
    for form, data in value_forms(value).items():
        if len(data) >= 16:
            piece = data[:16]
            out.append({"fact_id": fact_id, "form": form + "-prefix16", "length": 16,
                        "anchor": _mix_int(int.from_bytes(piece[:8], "little")), "blake3": _digest(piece)})
    return out


def _scrub_files(store, needles: list[dict[str, Any]], fragments: list[dict[str, Any]],
                 errors: list[str]) -> dict[str, list[str]]:
    """Remove quarantined tails and temp files holding erased content (or a torn fragment of it: the
    first 16 bytes); re-export recorded exports."""
    scanner = Scanner(needles + fragments)
    removed_tails, removed_tmp, rewritten = [], [], []
    data_dir = store.data_dir
    for path in store.journal.quarantined_tails():
        if scanner.scan_file(path, max_hits=1)[1]:
            path.unlink(missing_ok=True)
            removed_tails.append(path.name)
    for path in sorted(data_dir.rglob("*.tmp")):
        if path.is_file() and (path.name.startswith(f"{JOURNAL_NAME}.compact-") or scanner.scan_file(path, 1)[1]):
            path.unlink(missing_ok=True)
            removed_tmp.append(str(path.relative_to(data_dir)))
    from . import audit_export
    for entry in audit_export.recorded_exports(data_dir):
        path = Path(entry["path"])
        if path.is_file() and scanner.scan_file(path, max_hits=1)[1]:
            try:
                audit_export.rerun_export(store, entry)
                rewritten.append(str(path))
            except Exception as exc:  # never lose the report over one export: remove the file instead
                path.unlink(missing_ok=True)
                errors.append(f"re-exporting {path} failed ({exc}); the file was removed")
    if removed_tails or removed_tmp:
        from .journal import fsync_dir
        fsync_dir(data_dir)
    return {"quarantined_tails_removed": removed_tails, "temp_files_removed": removed_tmp,
            "exports_rewritten": rewritten}


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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _store_part(store, request_id: str, key: str, value: str, actor: str) -> None:
    store.store(ERASURE_REPORT_PREFIX + request_id, key, value, tenant="default", confidence=1.0,
                source_receipt=request_id, private=True, horizon_class="none", actor=actor)


def _spill(store, report: dict[str, Any]) -> None:
    """Move long lists into part facts (each well under the journal's 64 MiB record ceiling), stored
    before the report; the report keeps each part's key, count and BLAKE3, so its hash covers them."""
    for name in SPILLED_FIELDS:
        items = report[name]
        size = len(_dumps(items))
        if size <= SPILL_BYTES:
            continue
        per_part = max(1, len(items) * SPILL_BYTES // size)
        parts = []
        for i in range(0, len(items), per_part):
            text = _dumps(items[i:i + per_part])
            key = f"{name}-{len(parts)}"
            _store_part(store, report["request_id"], key, text, report["actor"])
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


def _store_report(store, report: dict[str, Any]) -> None:
    _store_part(store, report["request_id"], REPORT_KEY, _dumps(report), report["actor"])


def execute(store, *, kind: str, selection: dict[str, Any], plan: Plan, actor: Optional[str], reason: str,
            request_id: Optional[str] = None, override_receipt: Optional[legal_holds.LegalHoldReceipt] = None,
            documents_tenant: Optional[str] = None, vacuum: bool = False, progress=None,
            requested_at: Optional[int] = None) -> dict[str, Any]:
    """Delete `plan.to_delete`, compact, scrub every copy, scan, and store + return the report."""
    why = (reason or "").strip()
    if not why:
        raise InvalidInput("reason is required for an erasure")
    who = (actor or "").strip() or legal_holds.DEFAULT_ACTOR
    request_id = (request_id or "").strip() or "er_" + uuid.uuid4().hex
    if any(ch in request_id for ch in "\n\r") or len(request_id) > 200:
        raise InvalidInput(f"invalid request id {request_id!r}")
    requested_at = requested_at or timestamps.now_ns()
    with store.writer_lock():
        store.refresh()
        if store.db.execute("SELECT 1 FROM facts WHERE entity = ? AND key = ?",
                            (ERASURE_REPORT_PREFIX + request_id, REPORT_KEY)).fetchone():
            raise Conflict(f"an erasure report with request id {request_id!r} already exists")
        # Refuse before deleting anything when compaction would be refused anyway.
        covered = compaction.blocked_by_holds(store)
        if covered:
            if override_receipt is None:
                hold_ids = sorted({h for _, hs in covered for h in hs})
                raise compaction.LegalHoldBlocked(
                    "hard erasure blocked by active legal hold(s): " + ",".join(hold_ids)
                    + " (already-deleted facts they cover would be erased; pass a legal_hold_overridden receipt)",
                    covered)
            compaction.check_override(override_receipt, covered)
        deleted, refused, undone = delete_facts(store, plan.to_delete)
        crash_point("erase-after-delete")
        # Everything compaction will drop: the facts now deleted (ours and earlier deletions).
        erased_rows = store.db.execute(
            "SELECT fact_id, tenant_hash, value FROM facts WHERE deleted = 1 ORDER BY fact_id").fetchall()
        # Values a retained fact still holds cannot be proven absent. Compared in Python (a SQL self-join
        # would build a transient index of values in SQLite's temp directory, outside the data directory).
        erased_values = {r[2] for r in erased_rows}
        still_held = {v for (v,) in store.db.execute("SELECT value FROM facts WHERE deleted = 0")
                      if v in erased_values}
        shared = {r[0] for r in erased_rows if r[2] in still_held}
        del erased_values, still_held
        selected = set(plan.to_delete) | set(plan.already_deleted)
        erased, needles, fragments = [], [], []
        for fid, tenant, value in erased_rows:
            raw = value.encode("utf-8")
            entry = {"fact_id": fid, "tenant_hash": tenant, "content_hash": "blake3:" + blake3.blake3(raw).hexdigest(),
                     "value_bytes": len(raw), "selected": fid in selected}
            if fid in shared:
                entry["scan"] = "not scanned: a retained fact holds the same value"
            elif len(raw) < MIN_NEEDLE_BYTES:
                entry["scan"] = f"not scanned: shorter than {MIN_NEEDLE_BYTES} bytes"
            else:
                entry["scan"] = "scanned"
                needles.extend(needles_for(fid, value))
                fragments.extend(prefix_needles(fid, value))
            erased.append(entry)
        del erased_rows
        comp = compaction.compact(store, override_receipt=override_receipt if covered else None,
                                  progress=progress, hash_before=True)
        crash_point("erase-after-compact")
        # From here on the journal no longer holds the values: record failures in the report, never
        # lose the report over them.
        errors: list[str] = []
        documents = None
        if documents_tenant is not None:
            try:
                from .documents.lane import DocumentLane
                doc_needles, doc_fragments, chunks = _document_needles(store, documents_tenant.strip())
                documents = dict(DocumentLane(store).erase_tenant(documents_tenant))
                documents["chunk_needles"] = len(doc_needles)
                needles.extend(doc_needles)
                fragments.extend(doc_fragments)
            except Exception as exc:
                errors.append(f"document erasure failed: {exc}")
        indexes = _sync_derived_indexes(store)
        sqlite = _scrub_sqlite(store, vacuum)
        files = _scrub_files(store, needles, fragments, errors)
        sqlite["wal_checkpointed"] = _scrub_sqlite(store, False)["wal_checkpointed"]
        verification = scan_directory(store.data_dir, needles)
        if not sqlite["vacuumed"] and any(hit["file"].startswith(view.DB_NAME) for hit in verification.hits):
            # secure_delete zeroes deleted cells, but a B-tree rebalance can leave old bytes in a live
            # page's unused space; VACUUM rewrites every page, so run it when the scan finds any.
            sqlite.update(_scrub_sqlite(store, True))
            sqlite["vacuumed_after_scan"] = True
            verification = scan_directory(store.data_dir, needles)
        reports = stored_reports(store.db)
        prev = reports[-1].get("report_hash") if reports else None
        now = timestamps.now_ns()
        report: dict[str, Any] = {
            "schema": REPORT_SCHEMA,
            "request_id": request_id,
            "kind": kind,
            "requested_at": timestamps.format_fact_time(requested_at),
            "executed_at": timestamps.format_fact_time(now),
            "actor": who,
            "reason": why,
            "selection": selection,
            "counts": {
                "facts_selected": len(plan.to_delete) + len(plan.already_deleted),
                "facts_deleted_now": len(deleted),
                "facts_already_deleted": len(plan.already_deleted),
                "facts_erased": len(erased),
                "facts_held_back": len(plan.held_back),
                "facts_protected": len(plan.protected),
                "facts_not_deleted": len(refused),
                "consolidations_undone": undone,
            },
            "stores": {
                "journal": {"lines_before": comp.lines_before, "lines_after": comp.lines_after,
                            "bytes_before": comp.bytes_before, "bytes_after": comp.bytes_after,
                            "facts_dropped": comp.facts_dropped, "tombstones": comp.tombstones_kept,
                            "corrupt_lines_dropped": comp.corrupt_lines_dropped},
                "view": {"fact_rows_removed": comp.facts_dropped, "generation": comp.generation,
                         "derived_indexes_synced": indexes, **sqlite},
                "documents": documents,
                "quarantined_tails": {"removed": files["quarantined_tails_removed"]},
                "temp_files": {"removed": files["temp_files_removed"] + comp.stale_temp_files_removed},
                "exports": {"rewritten": files["exports_rewritten"]},
            },
            "erased_facts": erased,
            "not_erased": refused,
            "held_back": plan.held_back,
            "protected": plan.protected,
            "holds_blocking": sorted({h for item in plan.held_back for h in item["hold_ids"]}),
            "override_receipt_id": comp.override_receipt_id,
            "journal": {
                "before": {"blake3": comp.journal_blake3_before, "bytes": comp.bytes_before,
                           "inode": comp.inode_before},
                "after": {"blake3": comp.journal_blake3_after, "bytes": comp.bytes_after, "inode": comp.inode_after},
            },
            "scan_scheme": SCAN_SCHEME,
            "needles": [[n["fact_id"], n["form"], n["length"], n["anchor"], n["blake3"]] for n in needles],
            "verification": verification.to_dict(),
            "errors": errors,
            "ok": verification.ok and not errors,
            "prev_report_hash": prev,
        }
        _spill(store, report)
        report["report_hash"] = report_hash(report)
        _store_report(store, report)
        crash_point("erase-after-report")
        return report


def erase(store, selection: Selection, *, actor: Optional[str] = None, reason: str, request_id: Optional[str] = None,
          override_receipt: Optional[legal_holds.LegalHoldReceipt] = None, documents: bool = False,
          vacuum: bool = False, progress=None) -> dict[str, Any]:
    """Erase what `selection` matches (minus held facts) from every copy; returns the erasure report."""
    if documents and selection.tenant is None:
        raise InvalidInput("--documents needs --tenant (documents are erased per tenant)")
    requested_at = timestamps.now_ns()
    with store.writer_lock():
        store.refresh()
        plan = plan_selection(store, selection)
        return execute(store, kind="erasure", selection=selection.to_report(), plan=plan, actor=actor, reason=reason,
                       request_id=request_id, override_receipt=override_receipt,
                       documents_tenant=selection.tenant if documents else None, vacuum=vacuum, progress=progress,
                       requested_at=requested_at)


# --- verification ----------------------------------------------------------------------------------


def verify_erasure(store) -> dict[str, Any]:
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
    # Fold a checkpoint in first so the scan sees the database file, not stale WAL frames.
    compaction.checkpoint_wal(store.db, attempts=1)
    result = scan_directory(store.data_dir, needles)
    out = result.to_dict()
    out["reports"] = len(reports)
    out["chain_ok"] = not chain_errors
    out["chain_errors"] = chain_errors
    out["ok"] = result.ok and not chain_errors
    return out
