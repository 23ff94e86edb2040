"""Copies cruxsql wrote outside the data directory, where erasure cannot reach: which still hold erased values.

cruxsql records every copy it writes outside the data directory before or as it writes it: backups (and
a backup's staging while it is being written) in `backups.json`, audit exports in `audit-exports.json`.
Erasure cannot rewrite them (an operator's backup is the operator's), so an erasure report and
`verify --erasure` scan each recorded copy that still exists for the erased values and name every one
that holds them. A compressed archive cannot be scanned: taken before an erasure, it may hold what
that erasure removed, and is named as such.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ..facts import timestamps
from .erasure_scan import Scanner

HOLDS = "holds erased content"
MAY_HOLD = "may hold erased content (a compressed archive cannot be scanned)"


def _recorded(data_dir: Path) -> list[dict[str, Any]]:
    from . import audit_export
    from .backup import recorded_backups
    out = []
    for entry in recorded_backups(data_dir):
        out.append({"kind": "backup", "path": entry["path"], "created_at": entry["created_at"]})
        if entry.get("staging"):
            out.append({"kind": "backup staging", "path": entry["staging"], "created_at": entry["created_at"]})
    for entry in audit_export.recorded_exports(data_dir):
        if entry.get("outside_data_dir"):
            out.append({"kind": "export", "path": entry["path"], "created_at": entry.get("written_at")})
    return out


def _scan(scanner: Scanner, path: Path) -> Optional[int]:
    """Hits of erased content in a file or directory; None when it cannot be scanned (compressed)."""
    if path.is_dir():
        return sum(len(scanner.scan_file(p, max_hits=1)[1]) for p in sorted(path.rglob("*")) if p.is_file())
    if path.name.endswith((".tar.gz", ".tgz")):
        return None
    return len(scanner.scan_file(path, max_hits=1)[1])


def outside_reach(data_dir: Path, needles: list[dict[str, Any]], erased_at: Optional[str]) -> list[dict[str, Any]]:
    """Recorded copies outside the data directory that hold (or, unscannable and older than `erased_at`,
    may hold) content the `needles` describe: [{kind, path, state}]."""
    if not needles:
        return []
    scanner = Scanner(needles)
    cutoff = timestamps.parse_ns(erased_at) if erased_at else None
    out = []
    for copy in _recorded(data_dir):
        path = Path(copy["path"])
        if not path.exists():
            continue
        hits = _scan(scanner, path)
        if hits:
            out.append({"kind": copy["kind"], "path": str(path), "state": HOLDS})
        elif hits is None and cutoff is not None and copy.get("created_at") \
                and timestamps.parse_ns(copy["created_at"]) < cutoff:
            out.append({"kind": copy["kind"], "path": str(path), "state": MAY_HOLD})
    return out

