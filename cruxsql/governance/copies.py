"""Copies cruxsql wrote outside the data directory, where erasure cannot reach: which still hold erased values.

cruxsql records every copy it writes outside the data directory before or as it writes it: backups (and
a backup's or a restore's staging while it is being written) in `backups.json`, audit exports in
`audit-exports.json`. Erasure cannot rewrite them (an operator's backup is the operator's), so an erasure
report and `verify --erasure` scan each recorded copy that still exists for the erased values and name
every one that holds them, with its date and the rule that applies to it (`RULES`). A recorded copy is
accounted for: it does not make an erasure "not verified" (`doctor` lists it as a warning). Copies
beside the data directory that a killed restore left (`DATA_DIR.restore-*`, `DATA_DIR.replaced-*`) are
scanned too; they are not accounted for. A compressed archive cannot be scanned: taken before an
erasure, it may hold what that erasure removed, and is named as such.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any, Optional

from ..facts import timestamps
from .erasure_scan import Scanner
from .export_manifest import recorded_exports

HOLDS = "holds erased content"
MAY_HOLD = "may hold erased content (a compressed archive cannot be scanned)"
RULES = {
    "backup": "a restore of it applies the erasure again; it goes when your backup retention deletes it",
    "backup staging": "becomes a backup: a restore of it applies the erasure again",
    "restore staging": "the restore applies the erasure again before it goes live",
    "export": "cruxsql never reads it back; it goes when your export retention deletes it",
}
LEFTOVER = ("a restore's staging or replaced copy beside the data directory; not accounted for (a killed "
            "restore's is completed or removed by the next command)")


def recorded_copies(data_dir: Path) -> list[dict[str, Any]]:
    """Every copy cruxsql recorded outside `data_dir`, with its kind, date and rule (it may be gone)."""
    from .backup import recorded_backups
    out = []
    for entry in recorded_backups(data_dir):
        if entry.get("kind") != "restore":
            out.append({"kind": "backup", "path": entry["path"], "created_at": entry["created_at"]})
        if entry.get("staging"):
            kind = "restore staging" if entry.get("kind") == "restore" else "backup staging"
            out.append({"kind": kind, "path": entry["staging"], "created_at": entry["created_at"]})
    for entry in recorded_exports(data_dir):
        if entry.get("outside_data_dir"):
            out.append({"kind": "export", "path": entry["path"], "created_at": entry.get("written_at")})
    return [{**copy, "rule": RULES[copy["kind"]], "accounted": True} for copy in out]


def _beside(data_dir: Path) -> list[dict[str, Any]]:
    """The staging and replaced directories of restores into `data_dir`, beside it."""
    data_dir = Path(data_dir).resolve()
    prefix = glob.escape(data_dir.name)
    found = sorted(data_dir.parent.glob(prefix + ".restore-*")) + sorted(data_dir.parent.glob(prefix + ".replaced-*"))
    return [{"kind": "restore leftover", "path": str(p), "created_at": None, "rule": LEFTOVER, "accounted": False}
            for p in found if p.is_dir()]


def _scan(scanner: Scanner, path: Path) -> Optional[int]:
    """Hits of erased content in a file or directory; None when it cannot be scanned (compressed)."""
    if path.is_dir():
        return sum(len(scanner.scan_file(p, max_hits=1)[1]) for p in sorted(path.rglob("*")) if p.is_file())
    if path.name.endswith((".tar.gz", ".tgz")):
        return None
    return len(scanner.scan_file(path, max_hits=1)[1])


def outside_reach(data_dir: Path, needles: list[dict[str, Any]], erased_at: Optional[str]) -> list[dict[str, Any]]:
    """Copies outside the data directory that hold (or, unscannable and older than `erased_at`, may
    hold) content the `needles` describe: [{kind, path, created_at, rule, accounted, state}]."""
    if not needles:
        return []
    scanner = Scanner(needles)
    cutoff = timestamps.parse_ns(erased_at) if erased_at else None
    out = []
    for copy in recorded_copies(data_dir) + _beside(data_dir):
        path = Path(copy["path"])
        if not path.exists():
            continue
        hits = _scan(scanner, path)
        if hits:
            out.append({**copy, "path": str(path), "state": HOLDS})
        elif hits is None and cutoff is not None and copy.get("created_at") \
                and timestamps.parse_ns(copy["created_at"]) < cutoff:
            out.append({**copy, "path": str(path), "state": MAY_HOLD})
    return out


def unaccounted(copies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The copies among `outside_reach`'s that no rule accounts for: they leave an erasure not verified."""
    return [c for c in copies if not c.get("accounted")]
