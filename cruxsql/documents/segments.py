"""Sealed segment files and their checksummed manifest: the source of truth of the document lane.

Layout under `<data_dir>/segments/`:

    seg-{segment_seq:020}-{segment_id}.jsonl   one immutable file per sealed ingest
    MANIFEST.json                              every live segment with its BLAKE3 checksum

A segment file is JSON Lines: a header object, then one record per chunk in doc_id order. A chunk's
`frame_offset` is the byte offset of its line, so a single chunk is read without parsing the rest.
Files are written to a temporary name, fsynced, renamed into place, and the directory fsynced; the
manifest is replaced the same way, after the segment file it names.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import blake3

from ..errors import CruxsqlError
from ..facts.files import fsync_dir, write_file_durably

SEGMENT_FORMAT = "cruxsql-segment-v1"
MANIFEST_FORMAT = "cruxsql-segment-manifest-v1"
MANIFEST_NAME = "MANIFEST.json"
SEGMENTS_DIR_NAME = "segments"


class SegmentError(CruxsqlError):
    """A segment file or the manifest is missing, unreadable or does not match its checksum."""


@dataclass(frozen=True)
class ChunkRecord:
    """One chunk (a Crux frame): `chunk_id` is the idempotency key within (tenant_id, corpus_id)."""

    tenant_id: str
    corpus_id: str
    document_id: str
    chunk_id: str
    text: str
    ingested_at: str


@dataclass(frozen=True)
class SegmentInfo:
    """A manifest entry: one sealed segment file."""

    segment_seq: int
    segment_id: str
    file_name: str
    blake3: str
    byte_size: int
    chunk_count: int
    sealed_at: str
    vectors: Optional[dict[str, Any]] = None    # the vector sidecars (`dense.VectorSidecar` fields), if any


@dataclass(frozen=True)
class SealedSegment:
    """A segment file just written (or read back): its manifest entry, records and their byte offsets."""

    info: SegmentInfo
    records: list[ChunkRecord]
    offsets: list[int]


@dataclass(frozen=True)
class Manifest:
    """The live segments in ascending `segment_seq` order, and the next sequence number to hand out."""

    next_seq: int
    segments: list[SegmentInfo]


def segments_dir(data_dir: Path) -> Path:
    return data_dir / SEGMENTS_DIR_NAME


def _write_atomically(path: Path, data: bytes) -> None:
    """Durably, via a hidden `.<name>.<8hex>.partial` temp file (`stray_files` sweeps those a crash leaves)."""
    write_file_durably(path, data, mode=0o666, temp=path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial"))


def write_sidecar(directory: Path, file_name: str, data: bytes) -> None:
    """Write a file beside the segments (vectors, profile) durably, before the manifest names it."""
    _write_atomically(directory / file_name, data)


def _json_line(value: dict) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def encode_segment(
    segment_seq: int, segment_id: str, sealed_at: str, records: Sequence[ChunkRecord]
) -> tuple[bytes, list[int]]:
    """The bytes of a segment file and the byte offset of each record line."""
    header = {"format": SEGMENT_FORMAT, "segment_seq": segment_seq, "segment_id": segment_id,
              "sealed_at": sealed_at, "chunk_count": len(records)}
    parts = [_json_line(header)]
    offsets: list[int] = []
    position = len(parts[0])
    for record in records:
        line = _json_line({"tenant_id": record.tenant_id, "corpus_id": record.corpus_id,
                           "document_id": record.document_id, "chunk_id": record.chunk_id, "text": record.text,
                           "ingested_at": record.ingested_at})
        offsets.append(position)
        position += len(line)
        parts.append(line)
    return b"".join(parts), offsets


def write_segment(directory: Path, segment_seq: int, sealed_at: str, records: Sequence[ChunkRecord]) -> SealedSegment:
    """Seal `records` into a new immutable segment file (durable when this returns)."""
    directory.mkdir(parents=True, exist_ok=True)
    segment_id = secrets.token_hex(16)
    data, offsets = encode_segment(segment_seq, segment_id, sealed_at, records)
    file_name = f"seg-{segment_seq:020d}-{segment_id}.jsonl"
    _write_atomically(directory / file_name, data)
    info = SegmentInfo(segment_seq, segment_id, file_name, blake3.blake3(data).hexdigest(), len(data),
                       len(records), sealed_at)
    return SealedSegment(info, list(records), offsets)


def _parse_segment(data: bytes, name: str) -> tuple[dict, list[ChunkRecord], list[int]]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    try:
        header = json.loads(lines[0])
        if header.get("format") != SEGMENT_FORMAT:
            raise SegmentError(f"segment {name}: unknown format {header.get('format')!r}")
        records: list[ChunkRecord] = []
        offsets: list[int] = []
        position = len(lines[0]) + 1
        for line in lines[1:]:
            offsets.append(position)
            records.append(ChunkRecord(**json.loads(line)))
            position += len(line) + 1
    except (IndexError, ValueError, TypeError) as exc:
        raise SegmentError(f"segment {name} is malformed: {exc}") from None
    if header.get("chunk_count") != len(records):
        raise SegmentError(f"segment {name}: header says {header.get('chunk_count')} chunks, file has {len(records)}")
    return header, records, offsets


def read_segment(directory: Path, info: SegmentInfo) -> SealedSegment:
    """Read and checksum-verify a segment named by the manifest."""
    path = directory / info.file_name
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SegmentError(f"segment {info.file_name} cannot be read: {exc.strerror}") from None
    digest = blake3.blake3(data).hexdigest()
    if digest != info.blake3:
        raise SegmentError(f"segment {info.file_name}: BLAKE3 {digest} does not match the manifest ({info.blake3})")
    _, records, offsets = _parse_segment(data, info.file_name)
    return SealedSegment(info, records, offsets)


def read_record(directory: Path, file_name: str, frame_offset: int) -> ChunkRecord:
    """The chunk whose line starts at `frame_offset` in a segment file."""
    try:
        with open(directory / file_name, "rb") as handle:
            handle.seek(frame_offset)
            line = handle.readline()
        return ChunkRecord(**json.loads(line))
    except (OSError, ValueError, TypeError) as exc:
        raise SegmentError(f"segment {file_name}: no chunk at byte {frame_offset}: {exc}") from None


def load_manifest(directory: Path) -> Manifest:
    """The manifest, or an empty one if the lane has never sealed a segment."""
    path = directory / MANIFEST_NAME
    if not path.exists():
        return Manifest(next_seq=1, segments=[])
    return parse_manifest(path.read_bytes(), str(path))


def parse_manifest(data: bytes, where: str) -> Manifest:
    """A manifest from its bytes (`where` names their origin in the error)."""
    try:
        raw = json.loads(data)
        if raw.get("format") != MANIFEST_FORMAT:
            raise SegmentError(f"{where}: unknown manifest format {raw.get('format')!r}")
        segments = sorted((SegmentInfo(**entry) for entry in raw["segments"]), key=lambda s: s.segment_seq)
        return Manifest(next_seq=int(raw["next_seq"]), segments=segments)
    except (KeyError, ValueError, TypeError, AttributeError) as exc:
        raise SegmentError(f"{where} is malformed: {exc}") from None


def _entry(info: SegmentInfo) -> dict[str, Any]:
    entry = asdict(info)
    if entry["vectors"] is None:
        del entry["vectors"]
    return entry


def save_manifest(directory: Path, manifest: Manifest) -> None:
    """Replace the manifest atomically (the commit point of a seal, a rewrite or a removal)."""
    directory.mkdir(parents=True, exist_ok=True)
    _write_atomically(directory / MANIFEST_NAME, encode_manifest(manifest))


def encode_manifest(manifest: Manifest) -> bytes:
    body = {"format": MANIFEST_FORMAT, "next_seq": manifest.next_seq,
            "segments": [_entry(info) for info in sorted(manifest.segments, key=lambda s: s.segment_seq)]}
    return json.dumps(body, indent=2).encode("utf-8") + b"\n"


def segment_files(info: SegmentInfo) -> dict[str, str]:
    """Every file a manifest entry names (the segment and its vector sidecars) -> its BLAKE3."""
    files = {info.file_name: info.blake3}
    if info.vectors:
        files[info.vectors["file_name"]] = info.vectors["blake3"]
        files[info.vectors["profile_file_name"]] = info.vectors["profile_blake3"]
    return files


def remove_segment_file(directory: Path, file_name: str) -> None:
    """Delete a segment file no longer in the manifest (missing is fine: a crash may have removed it)."""
    try:
        (directory / file_name).unlink()
    except FileNotFoundError:
        return
    fsync_dir(directory)


def stray_files(directory: Path, manifest: Manifest) -> Iterator[Path]:
    """Files a crash left behind: segments the manifest does not list, and unfinished temporary files."""
    listed = {info.file_name for info in manifest.segments}
    for info in manifest.segments:
        if info.vectors:
            listed.update((info.vectors["file_name"], info.vectors["profile_file_name"]))
    if directory.exists():
        for path in sorted(p for pattern in ("seg-*.jsonl", "seg-*.ccxv", "seg-*.ccxp") for p in directory.glob(pattern)):
            if path.name not in listed:
                yield path
        yield from sorted(directory.glob(".*.partial"))
