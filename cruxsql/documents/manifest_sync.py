"""The view follows the manifest: MANIFEST.json lists the live segments, the view lists the same ones.

Files are the truth. Bringing the view up to date reads the manifest and indexes what the view lacks,
drops what the manifest no longer lists, and deletes segment files no manifest names (a killed ingest's
leftovers); a rebuild recreates the document tables from the files alone. In cluster mode the fleet's
manifest and files are pulled first. Every function here runs under the store's writer lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import apsw

from ..embeddings import Embedder
from ..facts.store import Progress
from . import verify
from .replica import SegmentReplica
from .segments import (
    Manifest,
    SegmentError,
    SegmentInfo,
    load_manifest,
    read_segment,
    remove_segment_file,
    save_manifest,
    stray_files,
)
from .segment_view import clear_view, drop_from_view, index_into_view, listed_segments
from .sidecars import with_vectors


def view_lags_manifest(db: apsw.Connection, directory: Path) -> bool:
    """Whether the view lists other segments than the manifest (SegmentError if it is unreadable)."""
    manifest = load_manifest(directory)
    return listed_segments(db) != [(i.segment_seq, i.segment_id) for i in manifest.segments]


def sync_view(db: apsw.Connection, directory: Path) -> None:
    """Make the view list the manifest's segments.

    A segment that fails its checksum stays out of the view (searches go on without it, as Crux skips
    a segment without a reader); verify() reports it and rebuild() refuses to run until it is repaired.
    """
    manifest = load_manifest(directory)
    for path in list(stray_files(directory, manifest)):
        remove_segment_file(directory, path.name)
    wanted = {info.segment_seq: info for info in manifest.segments}
    present = dict(listed_segments(db))
    for seq, segment_id in present.items():
        if seq not in wanted or wanted[seq].segment_id != segment_id:
            drop_from_view(db, seq)
    for seq, info in wanted.items():
        if present.get(seq) != info.segment_id:
            try:
                sealed = read_segment(directory, info)
            except SegmentError:
                continue
            index_into_view(db, sealed, None)


def catch_up(db: apsw.Connection, directory: Path, replica: Optional[SegmentReplica]) -> None:
    """Make the view list the manifest's segments, in cluster mode after taking the fleet's manifest
    and files."""
    if replica is None:
        sync_view(db, directory)
        return
    try:
        dropped = replica.pull(directory)
    finally:
        sync_view(db, directory)
    if dropped:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # the dropped rows' WAL frames


def rebuild(db: apsw.Connection, directory: Path, embedder: Optional[Embedder], progress: Progress) -> int:
    """Recreate the document tables from the segment files; returns the number of segments indexed.

    Refuses (SegmentError) while a listed file is missing or fails its checksum. A segment sealed before
    vectors existed is embedded now, and the manifest then names its new sidecars."""
    manifest = load_manifest(directory)
    problems = [problem for info in manifest.segments if (problem := verify.check_file(directory, info))]
    if problems:
        raise SegmentError("; ".join(problems))
    clear_view(db)
    total = sum(info.chunk_count for info in manifest.segments)
    done = 0
    embedded: list[SegmentInfo] = []
    for info in manifest.segments:
        sealed = read_segment(directory, info)
        if info.vectors is None and embedder is not None:
            sealed = with_vectors(directory, embedder, sealed)     # sealed before vectors existed: embed it now
        embedded.append(sealed.info)
        index_into_view(db, sealed, None)
        done += info.chunk_count
        if progress:
            progress(done, total)
    if embedded != manifest.segments:
        save_manifest(directory, Manifest(manifest.next_seq, embedded))
    return len(manifest.segments)
