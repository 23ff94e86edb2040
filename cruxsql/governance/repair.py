"""Repair on open: what killed commands left behind, removed (and said) by the next command.

* `facts.jsonl.compact-*.tmp` of a killed compaction;
* segment files outside the manifest and `.*.partial` files of a killed ingest;
* the staging copy and view copy of a killed backup, and the staging copy of a killed restore of this
  store into another directory (recorded in `backups.json` with their pid);
* an erasure killed before its report was stored: completed (`erasure_recovery.complete_interrupted`).

A cheap look without the writer lock comes first; the lock is taken only when something is there.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..documents.segments import SegmentError, load_manifest, remove_segment_file, segments_dir, stray_files
from ..facts.journal import JOURNAL_NAME
from . import erasure_ledger, erasure_lock
from .backup import VIEW_COPY_PREFIX, recorded_backups, remove_dead_stagings

if TYPE_CHECKING:
    from ..facts.store import Store


def _stray_segments(data_dir: Path) -> list[Path]:
    directory = segments_dir(data_dir)
    if not directory.is_dir():
        return []
    try:
        return list(stray_files(directory, load_manifest(directory)))
    except SegmentError:  # an unreadable manifest: `verify` reports it, nothing is removed on a guess
        return []


def _anything_left(data_dir: Path) -> bool:
    return bool(any(data_dir.glob(f"{JOURNAL_NAME}.compact-*.tmp")) or any(data_dir.glob(f"{VIEW_COPY_PREFIX}*"))
                or any(e.get("staging") for e in recorded_backups(data_dir))
                or _stray_segments(data_dir) or _erasure_interrupted(data_dir))


def _erasure_interrupted(data_dir: Path) -> bool:
    """`erasure_recovery.interrupted`, without importing the erasure machinery every command's open would pay for."""
    return bool(erasure_ledger.interrupted(data_dir)) and not erasure_lock.running(data_dir)


def repair(store: Store) -> list[str]:
    """Remove what killed commands left in (or recorded for) the data directory; one line per repair."""
    data_dir = Path(store.data_dir)
    if store.read_only or not _anything_left(data_dir):
        return []
    from . import compaction, erasure_recovery   # only when something is left: most opens never load them
    done = []
    with store.writer_lock():
        for name in compaction.remove_stale_temp_files(store.journal):
            done.append(f"removed {name}, left by a killed compaction")
        for path in _stray_segments(data_dir):
            remove_segment_file(path.parent, path.name)
            done.append(f"removed segments/{path.name}, left by a killed ingest")
        for removed, kind in remove_dead_stagings(data_dir):
            done.append(f"removed {removed}, left by a killed {kind}")
        for report in erasure_recovery.complete_interrupted(store):
            done.append(f"completed the interrupted erasure {report['request_id']}: "
                        f"{report['counts']['facts_erased']} fact(s) erased, report stored"
                        + ("" if report["ok"] else " (ERASURE NOT VERIFIED: run verify --erasure)"))
    return done
