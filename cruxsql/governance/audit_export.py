"""Audit export: every journal event that touched a selection of facts, in order, with the state it produced.

Formats:
* `jsonl` — one object per event: line number, byte offset/length, op, event time, whether replay applied
  it (and why not), BLAKE3 of the journal line, a running hash chain over the exported events, and for
  each selected fact the event named: its role and its full state after the event, written exactly as
  the journal writes a fact (Crux's field order; absent optional fields omitted), or null when the
  event removed it.
* `csv` — one row per (event, fact) with the same columns flattened (booleans 0/1, NULL empty).
* `sqlite` — a standalone database built with sqlite-utils, ready for Datasette: `events` (pk
  `line_no`), `facts` (pk `fact_id`, final state), `event_facts` (pk `line_no, fact_id, role`, foreign
  keys to both, the fact's state after the event), `export_info`; indexes on the usual lookups.
  sqlite-utils (Python's sqlite3) only ever opens this export file, never cruxsql.db.

Private facts are left out unless `include_private`. An export written inside the data directory is
recorded in `audit-exports.json` so that an erasure can re-export it without the erased content.
"""

from __future__ import annotations

import csv
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from functools import partial
from json.encoder import encode_basestring as _jstr
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, TextIO

import blake3

from ..errors import InvalidInput
from ..facts import codec, timestamps, view_file
from ..facts.codec import Fact
from ..facts.journal import JOURNAL_NAME, Record
from .durations import parse_cutoff
from .erasure_proof import ERASURE_REPORT_PREFIX
from .export_manifest import inside, record_export

if TYPE_CHECKING:
    from ..facts.store import Store

FORMATS = ("jsonl", "csv", "sqlite")
_LATEST_ONLY_PREFIXES = ("__repo_registry__::", "__repo_scan__::", "__workspace_scan__::")
STATE_COLUMNS = ("tenant_hash", "entity", "key", "value", "version", "deleted", "supersedes", "superseded_by",
                 "private", "confidence", "stored_at", "horizon_class", "valid_from", "valid_to", "reverified_at",
                 "actor", "source_receipt", "access_count", "last_accessed_at")
EVENT_COLUMNS = ("line_no", "byte_offset", "byte_length", "op", "event_at", "applied", "skip_reason",
                 "line_blake3", "chain_blake3")


@dataclass
class AuditQuery:
    tenant: Optional[str] = None
    entity_prefixes: tuple[str, ...] = ()
    since: Optional[str] = None
    until: Optional[str] = None
    include_private: bool = False
    since_ns: Optional[int] = field(default=None, init=False)
    until_ns: Optional[int] = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.entity_prefixes = tuple(p for p in (self.entity_prefixes or ()) if p)
        self.since_ns = parse_cutoff(self.since) if self.since else None
        self.until_ns = parse_cutoff(self.until) if self.until else None
        if self.since_ns is not None and self.until_ns is not None and self.until_ns < self.since_ns:
            raise InvalidInput(f"--until {self.until!r} is before --since {self.since!r}")

    def selects(self, fact: Fact) -> bool:
        if self.tenant is not None and fact.tenant_hash != self.tenant:
            return False
        if self.entity_prefixes and not fact.entity.startswith(self.entity_prefixes):
            return False
        # Erasure reports are private facts but hold only hashes: their tenant's auditors see them.
        return self.include_private or not fact.private or fact.entity.startswith(ERASURE_REPORT_PREFIX)

    def params(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "entity_prefixes": list(self.entity_prefixes), "since": self.since,
                "until": self.until, "include_private": self.include_private}


@dataclass
class ExportSummary:
    path: str
    format: str
    events: int = 0
    event_facts: int = 0
    facts: int = 0
    journal_lines_read: int = 0
    bytes_written: int = 0
    chain_head: Optional[str] = None
    recorded_in_manifest: bool = False
    outside_data_dir: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def flat_state(fact: Optional[Fact]) -> list[Any]:
    """A fact's state as STATE_COLUMNS values (all None for a fact the event removed)."""
    if fact is None:
        return [None] * len(STATE_COLUMNS)
    opt = timestamps.format_optional_fact_time
    return [fact.tenant_hash, fact.entity, fact.key, fact.value, fact.version, fact.deleted, fact.supersedes,
            fact.superseded_by, fact.private, fact.confidence, timestamps.format_fact_time(fact.stored_at),
            fact.horizon_class, opt(fact.valid_from), opt(fact.valid_to), opt(fact.reverified_at), fact.actor,
            fact.source_receipt, fact.access_count, opt(fact.last_accessed_at)]


def _event_ns(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    try:
        return timestamps.parse_ns(text)
    except InvalidInput:
        return None


def iter_audit_events(store: Store, query: AuditQuery, stats: Optional[ExportSummary] = None) -> Iterator[dict[str, Any]]:
    """Stream the export's events (the caller holds the writer lock so the journal does not move).

    Each event's `facts` is a list of (fact_id, role, Fact after the event, or None when removed).
    Only facts a later event touches again are kept in memory (the view's journal_event_facts says
    which), so memory follows the number of changed facts, not the journal's size.
    """
    store.refresh()
    db = store.db
    extension_lines = list(_extension_lines(store))
    revisited = {r[0] for r in db.execute(
        "SELECT fact_id FROM journal_event_facts GROUP BY fact_id HAVING count(*) > 1")}
    revisited.update(event.fact_id for _, event in extension_lines)
    states = _FactStates(query, store.policy, revisited)
    chain = ""
    need_ns = query.since_ns is not None or query.until_ns is not None
    for rec, event, applied, skip_reason in _events(store, db, extension_lines, stats):
        touched, at_ns = states.apply(event, applied)
        if not touched:
            continue
        event_at = codec.event_time_text(event)
        if at_ns is None and (need_ns or event_at is not None):
            at_ns = _event_ns(event_at)
        if query.since_ns is not None and (at_ns is None or at_ns < query.since_ns):
            continue
        if query.until_ns is not None and (at_ns is None or at_ns > query.until_ns):
            continue
        line_hash = blake3.blake3(rec.raw).hexdigest()
        chain = blake3.blake3((chain + line_hash).encode("ascii")).hexdigest()
        yield {"line_no": rec.line_no, "byte_offset": rec.offset, "byte_length": rec.length, "op": event.op,
               "event_at": event_at, "event_at_ns": timestamps.column_ns(at_ns), "applied": applied, "skip_reason": skip_reason,
               "line_blake3": line_hash, "chain_blake3": chain, "facts": _first_of_each(touched)}


Touched = tuple[str, str, Optional[Fact]]  # (fact_id, role, the fact after the event, or None when removed)


@dataclass
class _FactStates:
    """The selected facts' states as the export's walk over the journal changes them, replaying each
    event as the view did (`applied`). Only the facts a later event touches again (`revisited`) are
    kept."""

    query: AuditQuery
    policy: Any
    revisited: set[str]
    tracked: dict[str, Fact] = field(default_factory=dict)

    def apply(self, event: Any, applied: bool) -> tuple[list[Touched], Optional[int]]:
        """What the event did to the selected facts, in order, and the time its stored facts give it."""
        touched: list[Touched] = []
        change = partial(self._change, touched, applied)
        op = event.op
        if op in ("store", "store_batch", "replace_latest", "consolidate"):
            at_ns = self._store(event, applied, touched)
            if op == "consolidate":
                for sid in event.superseded_fact_ids:
                    change(sid, "source", superseded_by=event.canonical.fact_id)
            return touched, at_ns
        if op == "delete":
            change(event.fact_id, "deleted", deleted=True)
        elif op == "supersede":
            change(event.fact_id, "superseded", superseded_by=event.by_fact_id)
            change(event.by_fact_id, "superseding")
        elif op == "clear_supersede":
            change(event.fact_id, "cleared", superseded_by=None)
        elif op == "set_validity":
            change(event.fact_id, "validity", valid_from=event.valid_from, valid_to=event.valid_to)
        elif op == "set_horizon":
            change(event.fact_id, "horizon", horizon_class=event.horizon_class)
        elif op == "reverify":
            change(event.fact_id, "reverified", reverified_at=event.reverified_at)
        elif op == "consolidation_provenance":
            change(event.canonical_fact_id, "canonical")
            for sid in event.source_fact_ids:
                change(sid, "source")
        elif op == "consolidate_undo":
            self._undo_consolidation(event, change)
        return touched, None

    def _change(self, touched: list[Touched], applied: bool, fid: str, role: str, **changes: Any) -> None:
        """A followed fact the event names, changed as replay changed it when the view applied it."""
        fact = self.tracked.get(fid)
        if fact is None:
            return
        if applied and changes:
            fact = self.tracked[fid] = fact.copy(**changes)
        touched.append((fid, role, fact))

    def _store(self, event: Any, applied: bool, touched: list[Touched]) -> Optional[int]:
        """The facts a store-like event stores (and those it replaces); the stored time of the last
        selected one (not for a consolidation's canonical)."""
        at_ns: Optional[int] = None
        op, tracked = event.op, self.tracked
        if op == "replace_latest":
            for rid in event.replaced_fact_ids:
                if tracked.pop(rid, None) is not None:
                    touched.append((rid, "replaced", None))
        for fact in codec.event_facts(event):
            private = self.policy.enforce(fact.entity, fact.private)
            if private != fact.private or not fact.tenant_hash:
                fact = fact.copy(private=private, tenant_hash=fact.tenant_hash or "default")
            if fact.private and fact.key == "content" and fact.entity.startswith(_LATEST_ONLY_PREFIXES):
                for fid in [f for f, t in tracked.items() if (t.tenant_hash, t.entity, t.key)
                            == (fact.tenant_hash, fact.entity, fact.key)]:
                    tracked.pop(fid)
                    touched.append((fid, "replaced", None))
            if applied and fact.fact_id not in tracked and self.query.selects(fact):
                if fact.fact_id in self.revisited:
                    tracked[fact.fact_id] = fact
                touched.append((fact.fact_id, "canonical" if op == "consolidate" else "stored", fact))
                if op != "consolidate":
                    at_ns = fact.stored_at
        return at_ns

    def _undo_consolidation(self, event: Any, change: Callable[..., None]) -> None:
        """The canonical deleted (unless it already was) and the sources it superseded restored."""
        cid = event.canonical_fact_id
        canonical = self.tracked.get(cid)
        if canonical is not None and not canonical.deleted:
            change(cid, "canonical", deleted=True)
        else:
            change(cid, "canonical")
        for sid in event.restored_fact_ids:
            src = self.tracked.get(sid)
            if src is not None and src.superseded_by == cid:
                change(sid, "restored", superseded_by=None)
            else:
                change(sid, "restored")


def _first_of_each(touched: list[Touched]) -> list[Touched]:
    """The first of each (fact_id, role) the event touched, in order."""
    seen: set[tuple[str, str]] = set()
    facts = []
    for fid, role, state in touched:
        if (fid, role) not in seen:
            seen.add((fid, role))
            facts.append((fid, role, state))
    return facts


def _extension_lines(store: Store) -> Iterator[tuple[Any, codec.ExtensionEvent]]:
    """(Record, event) of each set_horizon / reverify line in cruxsql-fact-events.jsonl."""
    for offset, raw in store.extensions.lines():
        try:
            event = codec.decode_event(raw)
        except codec.CorruptLine:
            continue
        if isinstance(event, (codec.SetHorizonEvent, codec.ReverifyEvent)):  # extension_events.EXTENSION_OPS
            yield Record(0, offset, len(raw) + 1, raw), event


def _events(store: Store, db, extension_lines: list, stats: Optional[ExportSummary]) -> Iterator[tuple]:
    """(Record, event, applied, skip_reason) in replay's order: facts.jsonl's events, then those of
    cruxsql-fact-events.jsonl (extension_events.py), numbered on after the journal's last line (their
    byte offsets are in that file); one of those is applied when the view holds its fact."""
    status = db.execute("SELECT line_no, applied, skip_reason FROM journal_events ORDER BY line_no")
    pending = next(status, None)
    last = 0
    for rec in store.journal.records():
        last = rec.line_no
        if stats is not None:
            stats.journal_lines_read += 1
        while pending is not None and pending[0] < rec.line_no:
            pending = next(status, None)
        if pending is None or pending[0] != rec.line_no:
            continue  # blank or corrupt line: not an event
        try:
            event = codec.decode_event(rec.raw)
        except codec.CorruptLine:
            continue
        yield rec, event, bool(pending[1]), pending[2]
    for n, (rec, event) in enumerate(extension_lines, 1):
        held = db.execute("SELECT 1 FROM facts WHERE fact_id = ?", (event.fact_id,)).fetchone() is not None
        yield (Record(last + n, rec.offset, rec.length, rec.raw), event, held,
               None if held else "unknown fact_id")


def _json_value(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    return _jstr(v)


def _write_jsonl(events: Iterator[dict], fh: TextIO, summary: ExportSummary) -> None:
    """One line per event; each fact's `state` is the fact exactly as the journal format writes it."""
    for ev in events:
        head = ",".join(f'"{k}":{_json_value(ev[k])}' for k in EVENT_COLUMNS)
        facts = ",".join('{"fact_id":' + _jstr(fid) + ',"role":' + _jstr(role) + ',"state":'
                         + ("null" if fact is None else fact.to_json()) + "}" for fid, role, fact in ev["facts"])
        fh.write("{" + head + ',"facts":[' + facts + "]}\n")
        summary.events += 1
        summary.event_facts += len(ev["facts"])
        summary.chain_head = ev["chain_blake3"]


def _csv_cell(value: Any) -> Any:
    """A CSV cell as every cruxsql CSV writes it: NULL as empty, booleans as 0/1."""
    if value is None:
        return ""
    return int(value) if isinstance(value, bool) else value


def _write_csv(events: Iterator[dict], fh: TextIO, summary: ExportSummary) -> None:
    writer = csv.writer(fh, lineterminator="\n")
    writer.writerow(list(EVENT_COLUMNS) + ["fact_id", "role"] + list(STATE_COLUMNS))
    for ev in events:
        head = [ev[c] for c in EVENT_COLUMNS]
        for fid, role, fact in ev["facts"]:
            writer.writerow([_csv_cell(v) for v in head + [fid, role] + flat_state(fact)])
            summary.event_facts += 1
        summary.events += 1
        summary.chain_head = ev["chain_blake3"]


_TEXT_WRITERS: dict[str, Callable[[Iterator[dict], TextIO, ExportSummary], None]] = {
    "jsonl": _write_jsonl, "csv": _write_csv}


def _write_text_file(fmt: str, events: Iterator[dict], path: Path, summary: ExportSummary) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        _TEXT_WRITERS[fmt](events, fh, summary)
        fh.flush()
        os.fsync(fh.fileno())


def export_audit_stream(store: Store, query: AuditQuery, fmt: str, stream: TextIO) -> ExportSummary:
    """Write the audit export (jsonl or csv) to an open text stream, e.g. stdout; nothing is recorded."""
    if fmt not in _TEXT_WRITERS:
        raise InvalidInput(f"--format {fmt} cannot be written to stdout (`--output -`): it is a database file; "
                           f"name a file")
    summary = ExportSummary(path="-", format=fmt)
    with store.writer_lock():
        _TEXT_WRITERS[fmt](iter_audit_events(store, query, summary), stream, summary)
    stream.flush()
    return summary


def _write_sqlite(events: Iterator[dict], path: Path, summary: ExportSummary, info: dict[str, Any]) -> None:
    """Schema (primary keys, foreign keys, indexes) by sqlite-utils; rows in batches on its connection."""
    import sqlite_utils  # only ever opens the standalone export file

    db = sqlite_utils.Database(str(path))
    try:
        state_types = {"tenant_hash": str, "entity": str, "key": str, "value": str, "version": int, "deleted": bool,
                       "supersedes": str, "superseded_by": str, "private": bool, "confidence": float,
                       "stored_at": str, "horizon_class": str, "valid_from": str, "valid_to": str,
                       "reverified_at": str, "actor": str, "source_receipt": str, "access_count": int,
                       "last_accessed_at": str}
        event_cols = ("line_no", "byte_offset", "byte_length", "op", "event_at", "event_at_ns", "applied",
                      "skip_reason", "line_blake3", "chain_blake3")
        db.table("events").create({"line_no": int, "byte_offset": int, "byte_length": int, "op": str, "event_at": str,
                             "event_at_ns": int, "applied": bool, "skip_reason": str, "line_blake3": str,
                             "chain_blake3": str}, pk="line_no")
        db.table("facts").create({"fact_id": str, **state_types}, pk="fact_id")
        db.table("event_facts").create({"line_no": int, "fact_id": str, "role": str, **state_types},
                                 pk=("line_no", "fact_id", "role"),
                                 foreign_keys=[("line_no", "events", "line_no"), ("fact_id", "facts", "fact_id")])
        conn = db.conn
        ph = lambda n: ",".join("?" * n)  # noqa: E731
        ins_event = f"INSERT INTO events ({','.join(event_cols)}) VALUES ({ph(len(event_cols))})"
        ins_ef = (f"INSERT INTO event_facts (line_no, fact_id, role, {','.join(STATE_COLUMNS)}) "
                  f"VALUES ({ph(3 + len(STATE_COLUMNS))})")
        ins_fact = (f"INSERT INTO facts (fact_id, {','.join(STATE_COLUMNS)}) VALUES ({ph(1 + len(STATE_COLUMNS))}) "
                    f"ON CONFLICT (fact_id) DO UPDATE SET "
                    + ", ".join(f"{c} = coalesce(excluded.{c}, {c})" if c in ("tenant_hash", "entity", "key", "value")
                                else f"{c} = excluded.{c}" for c in STATE_COLUMNS))
        ev_rows: list[list] = []
        ef_rows: list[list] = []
        fact_rows: list[list] = []

        def flush() -> None:
            conn.executemany(ins_event, ev_rows)
            conn.executemany(ins_ef, ef_rows)
            conn.executemany(ins_fact, fact_rows)
            ev_rows.clear()
            ef_rows.clear()
            fact_rows.clear()

        conn.execute("BEGIN")
        for ev in events:
            summary.events += 1
            summary.chain_head = ev["chain_blake3"]
            ev_rows.append([ev[c] for c in event_cols])
            for fid, role, fact in ev["facts"]:
                state = flat_state(fact)
                ef_rows.append([ev["line_no"], fid, role] + state)
                if fact is not None:
                    fact_rows.append([fid] + state)
                else:
                    fact_rows.append([fid] + [None] * 4 + state[4:])
                summary.event_facts += 1
            if len(ev_rows) >= 10_000:
                flush()
        flush()
        conn.execute("COMMIT")
        db.table("events").create_index(["op"])
        db.table("events").create_index(["event_at_ns"])
        db.table("event_facts").create_index(["fact_id"])
        db.table("facts").create_index(["tenant_hash", "entity", "key"])
        db.table("export_info").insert_all([{"key": k, "value": json.dumps(v, ensure_ascii=False)} for k, v in info.items()],
                                     pk="key")
    finally:
        db.close()


def export_audit(store: Store, query: AuditQuery, fmt: str, output: Path | str, record: bool = True) -> ExportSummary:
    """Write the audit export to `output` (atomically: temp file, fsync, rename)."""
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r} (expected one of {', '.join(FORMATS)})")
    output = Path(output)
    if output.exists() and output.is_dir():
        raise InvalidInput(f"--output {str(output)!r} is a directory")
    if output.resolve() == (Path(store.data_dir) / view_file.DB_NAME).resolve() or output.name == JOURNAL_NAME \
            and output.parent.resolve() == Path(store.data_dir).resolve():
        raise InvalidInput(f"--output {str(output)!r} would overwrite the store itself")
    if not output.parent.is_dir():
        raise InvalidInput(f"--output {str(output)!r}: directory {str(output.parent)!r} does not exist")
    tmp = output.with_name(f".{output.name}.{uuid.uuid4().hex}.tmp")
    summary = ExportSummary(path=str(output), format=fmt)
    try:
        with store.writer_lock():
            events = iter_audit_events(store, query, summary)
            if fmt in _TEXT_WRITERS:
                _write_text_file(fmt, events, tmp, summary)
            else:
                cp = store.db.execute("SELECT byte_offset, line_count, generation FROM journal_checkpoint").fetchone()
                info = {"query": query.params(), "exported_at": timestamps.format_fact_time(timestamps.now_ns()),
                        "journal_bytes": cp[0] if cp else 0, "journal_lines": cp[1] if cp else 0,
                        "view_generation": cp[2] if cp else None, "tool": "cruxsql export audit"}
                _write_sqlite(events, tmp, summary, info)
            os.replace(tmp, output)
            from ..facts.files import fsync_dir
            fsync_dir(output.parent)
    except BaseException:
        tmp.unlink(missing_ok=True)
        for suffix in ("-journal", "-wal", "-shm"):
            Path(str(tmp) + suffix).unlink(missing_ok=True)
        raise
    summary.bytes_written = output.stat().st_size
    if fmt == "sqlite":
        summary.facts = _count_sqlite_facts(output)
    summary.outside_data_dir = not inside(output, Path(store.data_dir))
    if record:
        # Outside the data directory too: erasure cannot rewrite such a file, but names it while it holds
        # erased values (`copies.outside_reach`).
        record_export(Path(store.data_dir), {"path": str(output.resolve()), "format": fmt, "query": query.params(),
                                       "written_at": timestamps.format_fact_time(timestamps.now_ns()),
                                       **({"outside_data_dir": True} if summary.outside_data_dir else {})})
        summary.recorded_in_manifest = True
    return summary


def _count_sqlite_facts(path: Path) -> int:
    import sqlite_utils
    db = sqlite_utils.Database(str(path))
    try:
        return db["facts"].count
    finally:
        db.close()


def rerun_export(store: Store, entry: dict[str, Any]) -> ExportSummary:
    """Re-write a recorded export with its original parameters (used by erasure)."""
    q = entry.get("query", {})
    query = AuditQuery(tenant=q.get("tenant"), entity_prefixes=tuple(q.get("entity_prefixes") or ()),
                       since=q.get("since"), until=q.get("until"), include_private=bool(q.get("include_private")))
    return export_audit(store, query, entry["format"], Path(entry["path"]), record=False)
