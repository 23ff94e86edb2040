"""Verifying the document lane: the manifest, the files it names, and the view's document tables agree.

Files are the truth: every segment and vector sidecar the manifest lists must exist with the BLAKE3
the manifest records, no segment file may lie outside it (a killed ingest's leftovers), and the view's
`document_segments` / `document_chunks` must match the manifest entry by entry. Each disagreement is
one line of the report; the view's ones are mended by a rebuild, never by editing the files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import apsw

from ..facts.files import file_blake3
from .dense import VectorSidecar
from .segments import SegmentError, SegmentInfo, load_manifest, stray_files


def check_file(directory: Path, info: SegmentInfo) -> Optional[str]:
    """The problem with one manifest entry's file (missing, or a checksum mismatch), or None."""
    path = directory / info.file_name
    if not path.exists():
        return f"segment {info.file_name} is listed in the manifest but missing"
    digest = file_blake3(path)
    if digest != info.blake3:
        return f"segment {info.file_name}: BLAKE3 {digest} does not match the manifest ({info.blake3})"
    return None

def _check_sidecars(directory: Path, info: SegmentInfo) -> list[str]:
    """Problems with a segment's vector and profile files against the manifest's checksums."""
    if info.vectors is None:
        return []
    sidecar = VectorSidecar.from_json(info.vectors)
    problems = []
    for name, expected in ((sidecar.file_name, sidecar.blake3), (sidecar.profile_file_name, sidecar.profile_blake3)):
        path = directory / name
        if not path.exists():
            problems.append(f"vector file {name} of segment {info.file_name} is listed in the manifest but missing")
        elif file_blake3(path) != expected:
            problems.append(f"vector file {name}: BLAKE3 {file_blake3(path)} does not match the manifest "
                            f"({expected})")
    return problems

def lane_problems(directory: Path, db: apsw.Connection) -> list[str]:
    """Problems between manifest, segment files and view; an empty list means consistent."""
    problems: list[str] = []
    try:
        manifest = load_manifest(directory)
    except SegmentError as exc:
        return [str(exc)]
    problems.extend(problem for problem in (check_file(directory, info) for info in manifest.segments) if problem)
    problems.extend(problem for info in manifest.segments for problem in _check_sidecars(directory, info))
    for path in stray_files(directory, manifest):
        problems.append(f"segment file {path.name} is not in the manifest")
    view = {seq: (segment_id, chunks, digest) for seq, segment_id, chunks, digest in db.execute(
        "SELECT segment_seq, segment_id, chunk_count, blake3 FROM document_segments")}
    for info in manifest.segments:
        if view.get(info.segment_seq) != (info.segment_id, info.chunk_count, info.blake3):
            problems.append(f"view does not match segment {info.file_name} (run rebuild)")
    for seq in sorted(set(view) - {info.segment_seq for info in manifest.segments}):
        problems.append(f"view lists segment_seq {seq}, which the manifest does not (run rebuild)")
    for seq, expected, actual in db.execute(
            "SELECT s.segment_seq, s.chunk_count, COUNT(c.doc_id) FROM document_segments s "
            "LEFT JOIN document_chunks c USING (segment_seq) GROUP BY s.segment_seq"):
        if expected != actual:
            problems.append(f"view has {actual} chunks for segment_seq {seq}, expected {expected} (run rebuild)")
    return problems
