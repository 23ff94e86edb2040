"""The record of the audit exports cruxsql wrote (`audit-exports.json`): an erasure re-exports those inside
the data directory without the erased content (audit_export.py) and names those outside it, which it
cannot rewrite, while they hold erased values (copies.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..facts.files import write_file_durably

MANIFEST_NAME = "audit-exports.json"


def inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
        return True
    except ValueError:
        return False


def recorded_exports(data_dir: Path) -> list[dict[str, Any]]:
    """Exports cruxsql wrote (from `audit-exports.json`), each `path` made absolute: the manifest keeps
    paths inside the data directory relative to it, so a moved or restored data directory still finds
    them; exports outside it (`outside_data_dir`) keep their absolute path."""
    path = Path(data_dir) / MANIFEST_NAME
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return []
    return [{**e, "path": str(Path(data_dir).resolve() / e["path"])}
            for e in entries if isinstance(e, dict) and isinstance(e.get("path"), str)]


def record_export(data_dir: Path, entry: dict[str, Any]) -> None:
    """Add (or replace, by path) an export's entry, durably."""
    home = Path(data_dir).resolve()
    if not entry.get("outside_data_dir"):
        entry = {**entry, "path": str(Path(entry["path"]).resolve().relative_to(home))}
    entries = [{**e, "path": str(Path(e["path"]).resolve().relative_to(home))} if inside(Path(e["path"]), home)
               else e for e in recorded_exports(data_dir)]
    entries = [e for e in entries if e["path"] != entry["path"]]
    entries.append(entry)
    write_file_durably(Path(data_dir) / MANIFEST_NAME,
                       (json.dumps(entries, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
