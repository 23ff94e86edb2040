"""Erasing a tenant's chunks: every segment holding them is rewritten without them, or removed.

Segment files are immutable, so erasure writes a new file (same seq, new id, the survivors' vectors
carried over), makes the manifest name it (in cluster mode the fleet's first), and only then drops the
old file and its sidecars. A crash in between leaves the old manifest with its files or the new one
with its; the other's files are strays the next open deletes, and no manifest names a file that is gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import apsw

from .replica import SegmentReplica
from .segment_view import drop_from_view, index_into_view
from .segments import (
    Manifest,
    SealedSegment,
    SegmentInfo,
    load_manifest,
    read_segment,
    remove_segment_file,
    save_manifest,
    write_segment,
)
from .sidecars import carry_vectors


def erase_tenant(db: apsw.Connection, directory: Path, replica: Optional[SegmentReplica],
                 tenant: str) -> dict[str, int]:
    """Rewrite every segment holding `tenant`'s chunks without them (new file, old removed); the caller
    holds the writer lock with the view caught up. Returns the segments rewritten and removed, and the
    chunks erased."""
    counts = {"segments_rewritten": 0, "segments_removed": 0, "chunks_erased": 0}
    manifest = load_manifest(directory)
    affected = {row[0] for row in db.execute(
        "SELECT DISTINCT segment_seq FROM document_chunks WHERE tenant_id = ?", (tenant,))}
    kept: list[SegmentInfo] = []
    replaced: list[tuple[SegmentInfo, Optional[SealedSegment]]] = []
    for info in manifest.segments:
        if info.segment_seq not in affected:
            kept.append(info)
            continue
        old = read_segment(directory, info)
        keep = [i for i, r in enumerate(old.records) if r.tenant_id != tenant]
        survivors = [old.records[i] for i in keep]
        counts["chunks_erased"] += len(old.records) - len(survivors)
        new = write_segment(directory, info.segment_seq, info.sealed_at, survivors) if survivors else None
        if new is not None and info.vectors is not None:
            new = carry_vectors(directory, info, new, keep)
        if new is not None:
            kept.append(new.info)
        replaced.append((info, new))
    if not replaced:
        return counts
    if replica is not None:   # a node meanwhile: nothing changed here; the caller runs it again
        replica.push(directory, Manifest(manifest.next_seq, kept),
                     [new.info for _, new in replaced if new is not None], [old for old, _ in replaced])
    save_manifest(directory, Manifest(manifest.next_seq, kept))
    for old_info, new in replaced:
        drop_from_view(db, old_info.segment_seq)
        if new is None:
            counts["segments_removed"] += 1
        else:
            index_into_view(db, new, None)
            counts["segments_rewritten"] += 1
        remove_segment_file(directory, old_info.file_name)
        if old_info.vectors is not None:
            remove_segment_file(directory, old_info.vectors["file_name"])
            remove_segment_file(directory, old_info.vectors["profile_file_name"])
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return counts
