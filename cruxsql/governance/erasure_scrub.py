"""An erasure's scrub of the other copies the store keeps once the journal no longer holds the values
(erasure.py): the tenant's document chunks' needles, the recall index re-synced, quarantine files rewritten
without the erased content, temp files holding it removed, recorded exports inside the data directory
re-exported, `tool_errors` messages replaced, and SQLite's WAL folded in (or the whole file vacuumed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from ..facts.journal import JOURNAL_NAME
from . import compaction, export_manifest, quarantine
from .erasure_scan import Scanner, content_digest, needles_for, prefix_needles

if TYPE_CHECKING:
    from ..facts.store import Store


def document_needles(store: Store, tenant: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Needles (and fragment needles) for the chunk texts a tenant's documents hold, before they go.

    Texts another tenant also holds are left out (they stay, legitimately)."""
    from ..documents.segments import load_manifest, read_segment, segments_dir

    directory = segments_dir(store.data_dir)
    if not directory.exists():
        return [], [], 0
    mine: dict[str, str] = {}
    others: set[str] = set()
    for info in load_manifest(directory).segments:
        for rec in read_segment(directory, info).records:
            digest = content_digest(rec.text.encode("utf-8"))
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


def scrub_sqlite(store: Store, vacuum: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"wal_checkpointed": False, "vacuumed": False}
    db = store.db
    if vacuum:
        # VACUUM copies the whole database through a temp database: keep it in memory, not in /tmp.
        previous = db.execute("PRAGMA temp_store").get
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


def sync_derived_indexes(store: Store) -> list[str]:
    """Let the recall lane drop its copies of erased text now (it starts over on a new generation)."""
    done: list[str] = []
    try:
        from ..recall.text_index import TextIndex
    except ImportError:  # pragma: no cover
        return done
    try:
        TextIndex(store.db).sync()
        done.append("recall_text_index")
    except Exception as exc:  # a missing table (migration not applied) must not block an erasure
        done.append(f"recall_text_index: {exc}")
    return done


def scrub_files(store: Store, needles: list[dict[str, Any]], fragments: list[dict[str, Any]],
                 errors: list[str]) -> dict[str, list]:
    """Rewrite quarantine files (torn tails, corrupt lines) without the erased content they hold, remove
    temp files holding it, and re-export recorded exports inside the data directory."""
    scanner = Scanner(needles + fragments)
    rewritten_quarantine, removed_tails, removed_tmp, rewritten = [], [], [], []
    data_dir = store.data_dir
    for path in store.journal.quarantined_tails() + sorted(data_dir.glob(f"{JOURNAL_NAME}.corrupt.*")):
        outcome = quarantine.rewrite_without(path, scanner)
        if outcome is None:
            continue
        if outcome["bytes_after"] == 0:
            removed_tails.append(path.name)
        rewritten_quarantine.append(outcome)
    for path in sorted(data_dir.rglob("*.tmp")):
        if path.is_file() and (path.name.startswith(f"{JOURNAL_NAME}.compact-") or scanner.scan_file(path, 1)[1]):
            path.unlink(missing_ok=True)
            removed_tmp.append(str(path.relative_to(data_dir)))
    from . import audit_export
    for entry in export_manifest.recorded_exports(data_dir):
        path = Path(entry["path"])
        if entry.get("outside_data_dir"):
            continue  # outside erasure's reach: named in the report (`copies.outside_reach`), never touched
        if path.is_file() and scanner.scan_file(path, max_hits=1)[1]:
            try:
                audit_export.rerun_export(store, entry)
                rewritten.append(str(path))
            except Exception as exc:  # never lose the report over one export: remove the file instead
                path.unlink(missing_ok=True)
                errors.append(f"re-exporting {path} failed ({exc}); the file was removed")
    if removed_tmp:
        from ..facts.files import fsync_dir
        fsync_dir(data_dir)
    return {"quarantined_tails_removed": removed_tails, "temp_files_removed": removed_tmp,
            "exports_rewritten": rewritten, "quarantine_rewritten": rewritten_quarantine}


TOOL_ERROR_SCRUBBED = "[message removed by erasure: it held erased content]"


def scrub_tool_errors(db, needles: list[dict[str, Any]]) -> int:
    """Replace every `tool_errors` message (MCP error texts kept for `doctor`) that holds erased content."""
    if not needles or not db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tool_errors'").fetchone():
        return 0
    scanner = Scanner(needles)
    dirty = [(tool, internal) for tool, internal, message in db.execute(
        "SELECT tool, internal, message FROM tool_errors") if scanner.scan_bytes((message or "").encode("utf-8"))]
    with db:
        for tool, internal in dirty:
            db.execute("UPDATE tool_errors SET message = ? WHERE tool = ? AND internal = ?",
                       (TOOL_ERROR_SCRUBBED, tool, internal))
    return len(dirty)


def tenant_has_documents(store: Store, tenant: str) -> bool:
    """Whether the tenant has ingested documents (the view's document lane lists them)."""
    try:
        row = store.db.execute("SELECT 1 FROM document_chunks WHERE tenant_id = ? LIMIT 1", (tenant,)).fetchone()
    except apsw.SQLError:  # no document lane in this view yet
        return False
    return row is not None
