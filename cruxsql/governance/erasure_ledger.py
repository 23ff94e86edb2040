"""The erasure ledger: cruxsql's own record of every erasure, which a restore does not roll back.

`erasure-ledger.jsonl` in the data directory (mode 0600), one JSON object per line, appended and
fsynced. It is not the journal: facts.jsonl is shared with Crux daemons and carries only ops Crux
replays, while the ledger is cruxsql's alone. It holds no values, only fact ids, the selection, and
the scan needles (hashes) of each erasure.

* `begin` is appended before an erasure deletes anything (state "pending": what it will delete, why);
* `erasing` is appended after the delete, before compaction (the erased facts' hashes and needles);
* `finish` is appended once its report is stored (state "done": the report's hash, its needles);
* `hold_released` is appended when a legal hold is released (state "hold_released", the release
  receipt's id as request id): a restore of a backup taken while the hold was active keeps it released.

An erasure with a "pending" line and no "done" line was interrupted: the next command that opens the
store for writing completes it (`interrupted`), so the values go and the report exists. A restore
carries the ledger of the directory it replaces into the restored one and re-applies every erasure the
ledger records after the backup was taken (`governance/backup.py`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..facts.files import fsync_dir

LEDGER_NAME = "erasure-ledger.jsonl"


def ledger_path(data_dir: Path) -> Path:
    return Path(data_dir) / LEDGER_NAME


def read_ledger(data_dir: Path) -> list[dict[str, Any]]:
    """Every ledger line of a data directory, oldest first."""
    return parse_file(ledger_path(data_dir))


def parse_file(path: Path) -> list[dict[str, Any]]:
    """Every line of a ledger file (a torn last line, from a crash while appending, is skipped)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in raw.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("request_id"), str):
            out.append(entry)
    return out


def append(data_dir: Path, entry: dict[str, Any]) -> None:
    """Append one line durably (a torn previous line is ended first so this one parses)."""
    path = ledger_path(data_dir)
    new = not path.exists()
    line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)


def begin(data_dir: Path, *, request_id: str, kind: str, selection: dict[str, Any], fact_ids: list[str],
          documents_tenant: Any, actor: str, reason: str, requested_at: str) -> None:
    append(data_dir, {"state": "pending", "request_id": request_id, "kind": kind, "selection": selection,
                      "fact_ids": sorted(fact_ids), "documents_tenant": documents_tenant, "actor": actor,
                      "reason": reason, "requested_at": requested_at})


def erasing(data_dir: Path, request_id: str, erased: list[dict[str, Any]], needles: list[dict[str, Any]],
            fragments: list[dict[str, Any]]) -> None:
    """After the delete, before compaction: what the erasure takes out, as hashes and needles, so an
    erasure killed after compaction (the values already gone from the journal) can still be reported."""
    # (a needle's `tail` anchor only speeds up this process's scans: left out, the ledger keeps its format)
    append(data_dir, {"state": "erasing", "request_id": request_id, "erased_facts": erased,
                      "needles": [_without_tail(n) for n in needles], "fragments": [_without_tail(n) for n in fragments]})


def _without_tail(needle: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in needle.items() if k != "tail"}


def finish(data_dir: Path, report: dict[str, Any], documents_tenant: Any, erased: list[dict[str, Any]],
           needles: list[dict[str, Any]]) -> None:
    append(data_dir, {"state": "done", "request_id": report["request_id"], "kind": report["kind"],
                      "executed_at": report["executed_at"], "report_hash": report.get("report_hash"),
                      "fact_ids": sorted(e["fact_id"] for e in erased), "documents_tenant": documents_tenant,
                      "needles": [[n["fact_id"], n["form"], n["length"], n["anchor"], n["blake3"]] for n in needles]})


def abandon(data_dir: Path, request_id: str) -> None:
    """An interrupted erasure that had deleted nothing yet, found so by the next command."""
    append(data_dir, {"state": "abandoned", "request_id": request_id})


def hold_released(data_dir: Path, *, receipt_id: str, hold_id: str, released_at: str, released_by: str,
                  reason: str) -> None:
    append(data_dir, {"state": "hold_released", "request_id": receipt_id, "hold_id": hold_id,
                      "released_at": released_at, "released_by": released_by, "reason": reason})


def done(data_dir: Path) -> list[dict[str, Any]]:
    """The completed erasures, oldest first (one per request id)."""
    return done_in(read_ledger(data_dir))


def done_in(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The completed erasures among ledger lines, oldest first (one per request id)."""
    seen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.get("state") == "done":
            seen.setdefault(entry["request_id"], entry)
    return list(seen.values())


def releases_in(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The legal-hold releases among ledger lines (one per hold)."""
    seen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if entry.get("state") == "hold_released" and isinstance(entry.get("hold_id"), str):
            seen.setdefault(entry["hold_id"], entry)
    return list(seen.values())


_HEAD = re.compile(rb'^\{"state":"([a-z]+)","request_id":("(?:[^"\\]|\\.)*")')


def interrupted(data_dir: Path) -> list[dict[str, Any]]:
    """Pending erasures with no "done" line: begun, then killed before their report was recorded. Each
    carries its "erasing" line, when it got that far, under `erasing`.

    Every command asks (repair on open), so only the head of each line is read (lines start with their
    state and request id) until an interruption is found: "done" lines carry every needle."""
    try:
        raw = ledger_path(data_dir).read_bytes()
    except FileNotFoundError:
        return []
    heads = []
    for line in raw.splitlines():
        match = _HEAD.match(line[:512])
        if match:
            heads.append((match.group(1).decode(), json.loads(match.group(2)), line))
    finished = {rid for state, rid, _ in heads if state in ("done", "abandoned")}
    pending: dict[str, dict[str, Any]] = {}
    for state, rid, line in heads:
        if rid in finished or state not in ("pending", "erasing"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:  # a torn last line
            continue
        if state == "pending":
            pending.setdefault(rid, entry)
        elif rid in pending:
            pending[rid]["erasing"] = entry
    return list(pending.values())


def merged(*ledgers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The union of ledgers (lines equal in every field kept once), in the order first seen."""
    out, seen = [], set()
    for ledger in ledgers:
        for entry in ledger:
            key = json.dumps(entry, sort_keys=True)
            if key not in seen:
                seen.add(key)
                out.append(entry)
    return out


def write_all(data_dir: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the ledger with `entries` (used by restore, on the staging directory)."""
    from ..facts.files import write_file_durably
    data = b"".join(json.dumps(e, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
                    for e in entries)
    write_file_durably(ledger_path(data_dir), data, mode=0o600)
