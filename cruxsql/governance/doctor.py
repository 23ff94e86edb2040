"""`cruxsql doctor`: a health check for cron and monitoring that notices silent failures.

It changes nothing: the view is opened read-only and never caught up, so a lagging or stale view is
reported rather than repaired. Each check has a status — ok, warning or critical — and the worst one
is the exit status (0, 1, 2). `to_prometheus` renders the same results in Prometheus' text format.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional, TypeGuard, cast

import apsw

from ..errors import InvalidInput
from ..facts import replay_position, timestamps, view_file
from ..facts.journal import Journal
from . import legal_holds, retention
from .durations import parse_cutoff, parse_duration_ns
from .copies import recorded_copies
from .erasure_proof import stored_reports

OK, WARNING, CRITICAL = 0, 1, 2
STATUS_NAMES = {OK: "ok", WARNING: "warning", CRITICAL: "critical"}
WAL_WARNING_BYTES = 64 << 20
WAL_CRITICAL_BYTES = 1 << 30
DISK_CRITICAL_BYTES = 100 << 20
HOLD_LOOKAHEAD = "7d"
TOOL_ERROR_WINDOW_NS = 24 * 3600 * 10**9  # without --since, MCP tool errors of the last day
_TAIL_BYTES = 64 << 10


@dataclass
class Check:
    name: str
    status: int
    message: str
    value: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.name, "status": STATUS_NAMES[self.status], "message": self.message,
                "value": self.value}


@dataclass
class Health:
    data_dir: str
    checks: list[Check] = field(default_factory=list)

    @property
    def status(self) -> int:
        return max((c.status for c in self.checks), default=OK)

    def to_dict(self) -> dict[str, Any]:
        return {"data_dir": self.data_dir, "status": STATUS_NAMES[self.status],
                "checks": [c.to_dict() for c in self.checks]}


def diagnose(data_dir: Path | str, *, since: Optional[str] = None, max_idle: Optional[str] = "7d",
             retention_window: Optional[str] = None, now_ns: Optional[int] = None) -> Health:
    """Run every check against `data_dir` without changing anything in it."""
    data_dir = Path(data_dir)
    now = timestamps.now_ns() if now_ns is None else now_ns
    since_ns = parse_cutoff(since, now) if since else None
    health = Health(str(data_dir))
    journal = Journal(data_dir)
    db = _open_readonly(data_dir / view_file.DB_NAME)
    try:
        health.checks.append(_in_step(journal, db))
        events = _journal_span(journal)
        health.checks.append(_last_write(events, now, max_idle))
        health.checks.append(_torn_tails(journal, since_ns))
        health.checks.append(_corrupt_lines(db, since_ns))
        health.checks.append(_lines_crux_skips(db))
        health.checks.append(_disk_space(data_dir, journal, events))
        health.checks.append(_lock_holders(journal))
        health.checks.append(_wal_size(data_dir))
        health.checks.append(_erasure_verifications(db))
        health.checks.append(_erasure_copies(data_dir, db))
        if retention_window:
            health.checks.append(_holds_blocking_retention(db, retention_window, now))
        if _has_table(db, "tool_errors"):
            health.checks.append(_tool_errors(db, since_ns if since_ns is not None else now - TOOL_ERROR_WINDOW_NS))
    finally:
        if db is not None:
            db.close()
    return health


def _open_readonly(path: Path) -> Optional[apsw.Connection]:
    if not path.exists():
        return None
    # Without a WAL file there is nothing beyond the main file to read: open it immutable, which
    # creates no -wal/-shm file, so the check leaves the directory exactly as it found it.
    wal = path.with_name(path.name + "-wal")
    uri = f"file:{path}?mode=ro" + ("" if wal.exists() else "&immutable=1")
    db = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    db.setbusytimeout(5_000)
    return db


def _has_table(db: Optional[apsw.Connection], name: str) -> TypeGuard[apsw.Connection]:
    return db is not None and db.execute(
        "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?", (name,)).fetchone() is not None


def _in_step(journal: Journal, db: Optional[apsw.Connection]) -> Check:
    st = journal.stat()
    size = st.st_size if st else 0
    if db is None or not _has_table(db, "journal_checkpoint"):
        return Check("view_in_step", WARNING if size else OK,
                     "no view yet: the next command rebuilds it from the journal" if size else "empty store",
                     float(size))
    cp = replay_position.read_checkpoint(db)
    offset = cp.byte_offset if cp else 0
    if cp is not None and st is not None and cp.byte_offset <= size and cp.inode == st.st_ino \
            and journal.fingerprint(cp.byte_offset).tail_hash == cp.tail_hash:
        lag = size - offset
        if lag == 0:
            return Check("view_in_step", OK, f"view is at the journal's end (byte {size:,})", 0.0)
        return Check("view_in_step", WARNING, f"view lags the journal by {lag:,} bytes (the next command catches up)",
                     float(lag))
    if cp is None and size == 0:
        return Check("view_in_step", OK, "empty store", 0.0)
    return Check("view_in_step", WARNING, "the journal was rewritten or replaced since the view was built "
                 "(the next command rebuilds the view)", float(size))


@dataclass
class _Span:
    first_ns: Optional[int] = None
    last_ns: Optional[int] = None
    unterminated: bool = False


def _event_ns(raw: bytes) -> Optional[int]:
    """The time of one journal line: its event's own `*_at` field, or the stored fact's `stored_at`."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(obj, dict) or "op" not in obj:
        return None
    candidates = [v for k, v in obj.items() if k.endswith("_at") and isinstance(v, str)]
    fact = obj.get("fact")
    if isinstance(fact, dict) and isinstance(fact.get("stored_at"), str):
        candidates.append(fact["stored_at"])
    for text in candidates:
        try:
            return timestamps.parse_ns(text)
        except Exception:
            continue
    return None


def _journal_span(journal: Journal) -> _Span:
    """Times of the first and last events (from the journal's head and tail, not the whole file)."""
    span = _Span()
    st = journal.stat()
    if st is None or st.st_size == 0:
        return span
    with open(journal.path, "rb") as fh:
        head = fh.read(_TAIL_BYTES)
        fh.seek(max(0, st.st_size - _TAIL_BYTES))
        tail = fh.read()
    span.unterminated = not tail.endswith(b"\n")
    for line in head.split(b"\n"):
        if (ns := _event_ns(line)) is not None:
            span.first_ns = ns
            break
    for line in reversed(tail.split(b"\n")[1 if st.st_size > _TAIL_BYTES else 0:]):
        if (ns := _event_ns(line)) is not None:
            span.last_ns = ns
            break
    return span


def _last_write(span: _Span, now: int, max_idle: Optional[str]) -> Check:
    if span.last_ns is None:
        return Check("last_write", OK, "no write yet")
    age_s = max(0, now - span.last_ns) / 1e9
    text = f"last write {timestamps.format_event_time(span.last_ns)} ({_ago(age_s)} ago)"
    if max_idle and max_idle != "0" and age_s * 1e9 > parse_duration_ns(max_idle):
        return Check("last_write", WARNING, text + f": nothing written for longer than {max_idle}", age_s)
    return Check("last_write", OK, text, age_s)


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def _torn_tails(journal: Journal, since_ns: Optional[int]) -> Check:
    tails = [p for p in journal.quarantined_tails()
             if since_ns is None or p.stat().st_mtime_ns >= since_ns]
    st = journal.stat()
    pending = bool(st and st.st_size and _journal_span(journal).unterminated)
    if not tails and not pending:
        return Check("torn_tails", OK, "no torn tail" + (" since the given date" if since_ns else ""), 0.0)
    parts = [f"{len(tails)} quarantined torn tail(s): " + ", ".join(p.name for p in tails)] if tails else []
    if pending:
        parts.append("the journal ends in an unterminated line (quarantined at the next open)")
    return Check("torn_tails", WARNING, "; ".join(parts), float(len(tails) + pending))


def _corrupt_lines(db: Optional[apsw.Connection], since_ns: Optional[int]) -> Check:
    if not _has_table(db, "journal_corrupt_lines"):
        return Check("corrupt_lines", OK, "no view to read corrupt lines from", 0.0)
    n = db.execute("SELECT count(*) FROM journal_corrupt_lines").get
    if not n:
        return Check("corrupt_lines", OK, "no corrupt journal line", 0.0)
    first = db.execute("SELECT line_no, reason FROM journal_corrupt_lines ORDER BY line_no LIMIT 1").get
    return Check("corrupt_lines", WARNING, f"{n} corrupt journal line(s), first at line {first[0]}: {first[1]} "
                 "(`cruxsql verify` lists them)", float(n))


def _lines_crux_skips(db: Optional[apsw.Connection]) -> Check:
    """cruxsql's own ops in facts.jsonl: a Crux daemon has no variant for them, skips each as a parse
    error and sets journal_replay_corruption_detected (crates/corecrux-memory/src/fact_store.rs); only
    its compaction clears that, rewriting the journal from its memory without them. Reported, not a
    warning: cruxsql cannot tell whether a Crux daemon shares the directory."""
    if not _has_table(db, "journal_events"):
        return Check("lines_crux_skips", OK, "no view to count journal ops from", 0.0)
    rows = cast(list[tuple[str, int]], db.execute(
        "SELECT op, count(*) FROM journal_events WHERE op IN ('set_horizon', 'reverify') GROUP BY op ORDER BY op"
    ).fetchall())
    if not rows:
        return Check("lines_crux_skips", OK, "every journal line is one a Crux daemon replays", 0.0)
    n = sum(count for _, count in rows)
    ops = ", ".join(f"{count} {op}" for op, count in rows)
    return Check("lines_crux_skips", OK, f"{n} journal line(s) a Crux daemon would skip as corrupt ({ops}); "
                 "they matter only if a Crux daemon shares this directory", float(n))


def _disk_space(data_dir: Path, journal: Journal, span: _Span) -> Check:
    free = shutil.disk_usage(data_dir).free
    st = journal.stat()
    size = st.st_size if st else 0
    text = f"{free / (1 << 20):,.0f} MiB free"  # a growth rate needs a day of history to mean anything
    days_left = None
    if span.first_ns is not None and span.last_ns is not None and span.last_ns - span.first_ns >= 86400e9 and size:
        rate = size / ((span.last_ns - span.first_ns) / 86400e9)  # journal bytes per day
        days_left = free / rate if rate else None
        text += f"; the journal grows {rate / (1 << 20):,.2f} MiB/day"
        if days_left is not None:
            text += f", full in {days_left:,.0f} days at that rate"
    if free < DISK_CRITICAL_BYTES or (days_left is not None and days_left < 7):
        return Check("disk_space", CRITICAL, text, float(free))
    if days_left is not None and days_left < 30:
        return Check("disk_space", WARNING, text, float(free))
    return Check("disk_space", OK, text, float(free))


def _lock_holders(journal: Journal) -> Check:
    pids = journal.current_lock_holders()
    if not pids:
        return Check("writer_lock", OK, "the writer lock is free", 0.0)
    return Check("writer_lock", WARNING, "the writer lock is held by pid " + ", ".join(map(str, pids)),
                 float(len(pids)))


def _wal_size(data_dir: Path) -> Check:
    try:
        size = os.stat(data_dir / (view_file.DB_NAME + "-wal")).st_size
    except FileNotFoundError:
        size = 0
    text = f"WAL {size / (1 << 20):,.1f} MiB"
    if size >= WAL_CRITICAL_BYTES:
        return Check("wal_size", CRITICAL, text + " (checkpoints are not keeping up)", float(size))
    if size >= WAL_WARNING_BYTES:
        return Check("wal_size", WARNING, text + " (a long-running reader may be blocking checkpoints)", float(size))
    return Check("wal_size", OK, text, float(size))


def _erasure_verifications(db: Optional[apsw.Connection]) -> Check:
    """Critical when an erasure is not verified in the data directory itself (or a copy no rule accounts
    for holds what it erased); recorded copies outside are `_erasure_copies`' warning, not this."""
    if not _has_table(db, "facts"):
        return Check("erasure_verifications", OK, "no view", 0.0)
    pending = [r.get("request_id", r.get("unparsable")) for r in stored_reports(db) if _not_verified(r)]
    if pending:
        return Check("erasure_verifications", CRITICAL, f"{len(pending)} erasure(s) not verified: "
                     + ", ".join(map(str, pending[:5])) + " (run `cruxsql verify --erasure`)", float(len(pending)))
    return Check("erasure_verifications", OK, "every erasure report verified", 0.0)


def _not_verified(report: dict[str, Any]) -> bool:
    # (a report from before copies were accounted for says ok=false for a recorded backup alone: its
    # scan of the data directory and its errors decide)
    return "unparsable" in report or not (report.get("verification") or {}).get("ok") or bool(report.get("errors")) \
        or any(c.get("accounted") is False and Path(str(c.get("path"))).exists()
               for c in report.get("outside_reach") or [])  # (a leftover since removed holds nothing)


def _taken_after(created_at: Optional[str], executed_at: Optional[str]) -> bool:
    if not created_at or not executed_at:
        return False
    try:
        return timestamps.parse_ns(created_at) > timestamps.parse_ns(executed_at)
    except InvalidInput:
        return False


def _erasure_copies(data_dir: Path, db: Optional[apsw.Connection]) -> Check:
    """Recorded backups and exports that still hold values an erasure took out of the data directory."""
    if not _has_table(db, "facts"):
        return Check("erasure_copies", OK, "no view", 0.0)
    recorded = {c["path"]: c for c in recorded_copies(data_dir)}
    holding: dict[str, dict[str, Any]] = {}
    for report in stored_reports(db):
        for copy in report.get("outside_reach") or []:
            now = recorded.get(copy.get("path"))
            if now is None or not Path(now["path"]).exists() or copy.get("accounted") is False \
                    or _taken_after(now.get("created_at"), report.get("executed_at")):
                continue  # gone, not recorded (the other check's), or taken again since the erasure
            holding.setdefault(now["path"], now)
    if not holding:
        return Check("erasure_copies", OK, "no recorded backup or export holds erased values", 0.0)
    listed = "; ".join(f"{c['kind']} {c['path']} (taken {c.get('created_at') or '?'}): {c['rule']}"
                       for c in list(holding.values())[:5])
    return Check("erasure_copies", WARNING, f"{len(holding)} recorded cop(ies) outside the data directory still "
                 f"hold erased values: {listed}", float(len(holding)))


def _holds_blocking_retention(db: Optional[apsw.Connection], window: str, now: int) -> Check:
    if not _has_table(db, "facts"):
        return Check("holds_blocking_retention", OK, "no view", 0.0)
    cutoff = parse_cutoff(window, now) + parse_duration_ns(HOLD_LOOKAHEAD)
    # doctor has a read-only connection, no Store; classify reads only `.db`
    held = [p for p in retention.classify(SimpleNamespace(db=db), cutoff).protected  # type: ignore[arg-type]
            if p["reason"] == "legal hold"]
    if not held:
        return Check("holds_blocking_retention", OK,
                     f"no legal hold blocks a {window} retention run within {HOLD_LOOKAHEAD}", 0.0)
    holds = sorted({h for p in held for h in p.get("hold_ids", [])})
    names = {h.hold_id: h.reason for h in legal_holds.active_holds(db)}
    return Check("holds_blocking_retention", WARNING,
                 f"{len(held)} fact(s) due for a {window} retention run within {HOLD_LOOKAHEAD} are held by "
                 + ", ".join(f"{h} ({names.get(h, '?')})" for h in holds), float(len(held)))


def _tool_errors(db: apsw.Connection, since_ns: int) -> Check:
    """The last error of each MCP tool since `since_ns`: internal failures warn, refused input is listed."""
    rows = db.execute("SELECT tool, internal, at, message, errors FROM tool_errors WHERE at_ns >= ? "
                      "ORDER BY internal DESC, at_ns DESC", (since_ns,)).fetchall()
    if not rows:
        return Check("mcp_tool_errors", OK, "no MCP tool error in the window", 0.0)
    internal = [r for r in rows if r[1]]
    lines = "; ".join(f"{tool}{' (internal)' if kind else ''} at {at}: {message}"
                      for tool, kind, at, message, _ in rows[:5])
    if internal:
        return Check("mcp_tool_errors", WARNING, f"{len(internal)} MCP tool(s) failed inside the server: {lines}",
                     float(len(internal)))
    return Check("mcp_tool_errors", OK, f"{len(rows)} MCP tool(s) refused input (last: {lines})", 0.0)


def to_prometheus(health: Health) -> str:
    """The checks as Prometheus text-format gauges."""
    lines = ["# HELP cruxsql_doctor_status Worst check status: 0 ok, 1 warning, 2 critical.",
             "# TYPE cruxsql_doctor_status gauge",
             f'cruxsql_doctor_status{{data_dir="{_label(health.data_dir)}"}} {health.status}',
             "# HELP cruxsql_doctor_check_status Status of one check: 0 ok, 1 warning, 2 critical.",
             "# TYPE cruxsql_doctor_check_status gauge"]
    lines += [f'cruxsql_doctor_check_status{{data_dir="{_label(health.data_dir)}",check="{c.name}"}} {c.status}'
              for c in health.checks]
    lines += ["# HELP cruxsql_doctor_check_value The measured value behind a check (bytes, seconds or a count).",
              "# TYPE cruxsql_doctor_check_value gauge"]
    lines += [f'cruxsql_doctor_check_value{{data_dir="{_label(health.data_dir)}",check="{c.name}"}} {c.value:.17g}'
              for c in health.checks if c.value is not None]
    lines.append(f"cruxsql_doctor_timestamp_seconds {time.time():.3f}")
    return "\n".join(lines) + "\n"


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
