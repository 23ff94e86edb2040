"""Document ingest: an already-chunked request sealed into one new segment (Crux's local-ingest).

A chunk id is the idempotency key within (tenant, corpus): re-sent ids are counted as duplicates and
never stored twice. What is new goes into one segment file, with its vector sidecars, written durably
and listed in MANIFEST.json (in cluster mode, the fleet's manifest first) before the view indexes it;
a request over the limits below is refused whole, before anything is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import apsw

from ..embeddings import Embedder
from ..errors import InvalidInput
from ..facts import timestamps
from .replica import ReplicaMoved, SegmentReplica
from .segments import (
    ChunkRecord,
    Manifest,
    SealedSegment,
    load_manifest,
    remove_segment_file,
    save_manifest,
    segment_files,
    write_segment,
)
from .sidecars import with_vectors

DEFAULT_CORPUS = "default"
MAX_DOCUMENTS = 4096
MAX_CHUNKS = 65_536
MAX_TEXT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class ChunkInput:
    chunk_id: str
    text: str


@dataclass(frozen=True)
class DocumentInput:
    """One document of an ingest request, already chunked (Crux's local-ingest shape)."""

    doc_id: str
    chunks: Sequence[ChunkInput]


@dataclass(frozen=True)
class IngestReport:
    """Outcome of one ingest call (Crux's local-ingest response fields, plus cruxsql's)."""

    ingested: int
    duplicates: int
    documents: int
    sealed: bool
    segment_seq: Optional[int]
    segment_id: Optional[str]
    file_name: Optional[str]
    blake3: Optional[str]

    def to_json(self) -> dict[str, Any]:
        return {"ingested": self.ingested, "documents": self.documents, "frame_count": self.ingested,
                "duplicates": self.duplicates, "sealed": self.sealed, "segment_seq": self.segment_seq,
                "segment_id": self.segment_id, "file_name": self.file_name, "blake3": self.blake3}


def validate(documents: Sequence[DocumentInput], corpus: str) -> None:
    """InvalidInput naming the first problem of the request: empty names or texts, or over a limit."""
    if not corpus.strip():
        raise InvalidInput("corpus_id must not be empty")
    if not documents:
        raise InvalidInput("documents must not be empty")
    if len(documents) > MAX_DOCUMENTS:
        raise InvalidInput(f"{len(documents)} documents in one ingest; at most {MAX_DOCUMENTS}")
    total = 0
    for document in documents:
        if not document.doc_id:
            raise InvalidInput("doc_id must not be empty")
        if not document.chunks:
            raise InvalidInput(f"document {document.doc_id!r} has no chunks")
        for chunk in document.chunks:
            if not chunk.chunk_id:
                raise InvalidInput(f"document {document.doc_id!r}: chunk_id must not be empty")
            if not chunk.text.strip():
                raise InvalidInput(f"chunk {chunk.chunk_id!r}: text must not be empty")
            if len(chunk.text.encode("utf-8")) > MAX_TEXT_BYTES:
                raise InvalidInput(f"chunk {chunk.chunk_id!r}: text exceeds {MAX_TEXT_BYTES} bytes")
        total += len(document.chunks)
    if total > MAX_CHUNKS:
        raise InvalidInput(f"{total} chunks in one ingest; at most {MAX_CHUNKS}")


def _stored_chunk_ids(db: apsw.Connection, tenant: str, corpus: str, chunk_ids: Sequence[str]) -> set[str]:
    """The subset of `chunk_ids` already stored for (tenant, corpus)."""
    stored: set[str] = set()
    for start in range(0, len(chunk_ids), 500):
        part = chunk_ids[start:start + 500]
        stored.update(row[0] for row in db.execute(
            "SELECT chunk_id FROM document_chunks WHERE tenant_id = ? AND corpus_id = ? "
            f"AND chunk_id IN ({','.join('?' * len(part))})", (tenant, corpus, *part)))
    return stored


def seal_new_chunks(db: apsw.Connection, directory: Path, embedder: Optional[Embedder],
                    replica: Optional[SegmentReplica], documents: Sequence[DocumentInput], tenant: str,
                    corpus: str) -> tuple[Optional[SealedSegment], IngestReport]:
    """Write the chunks the view does not hold yet as one segment and list it in the manifest; the
    segment is for the caller to index (None when every chunk was a duplicate). The caller holds the
    writer lock with the view caught up; ReplicaMoved (its files removed) when the fleet moved on."""
    now = timestamps.format_event_time(time.time_ns())
    records: list[ChunkRecord] = []
    seen = _stored_chunk_ids(db, tenant, corpus, [c.chunk_id for d in documents for c in d.chunks])
    duplicates = 0
    for document in documents:
        for chunk in document.chunks:
            if chunk.chunk_id in seen:
                duplicates += 1
                continue
            seen.add(chunk.chunk_id)
            records.append(ChunkRecord(tenant, corpus, document.doc_id, chunk.chunk_id, chunk.text, now))
    if not records:
        return None, IngestReport(0, duplicates, len(documents), False, None, None, None, None)
    manifest = load_manifest(directory)
    sealed = with_vectors(directory, embedder, write_segment(directory, manifest.next_seq, now, records))
    sealed_manifest = Manifest(manifest.next_seq + 1, [*manifest.segments, sealed.info])
    if replica is not None:
        try:
            replica.push(directory, sealed_manifest, [sealed.info], [])
        except ReplicaMoved:
            for name in segment_files(sealed.info):
                remove_segment_file(directory, name)
            raise
    save_manifest(directory, sealed_manifest)
    info = sealed.info
    return sealed, IngestReport(len(records), duplicates, len(documents), True, info.segment_seq, info.segment_id,
                                info.file_name, info.blake3)
