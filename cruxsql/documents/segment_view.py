"""The view's document tables: one sealed segment indexed in, or dropped out, in a single transaction.

`document_segments` and its child tables (`document_chunks`, `document_postings`, `document_vectors`,
`document_links`) are derived from the segment files alone: a segment is either wholly in the view or
wholly absent, and rows are deleted children first, so none ever points at a removed segment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import apsw

from ..facts.store import Progress
from .dense import VectorSidecar
from .graph import document_links
from .postings import encode_array, index_segment, postings_rows
from .segments import SealedSegment

# Children first, so a DELETE never leaves a row pointing at a removed segment.
VIEW_TABLES = ("document_links", "document_vectors", "document_postings", "document_chunks", "document_segments")


@dataclass(frozen=True)
class SegmentSummary:
    """A live segment as `segments list` shows it; `segment_index` is its position in seq order."""

    segment_index: int
    segment_seq: int
    segment_id: str
    file_name: str
    chunk_count: int
    total_tokens: int
    byte_size: int
    blake3: str
    sealed_at: str
    tenants: str
    """The tenants whose chunks the segment holds, comma-separated in order."""


def listed_segments(db: apsw.Connection) -> list[tuple[int, str]]:
    """(segment_seq, segment_id) of every segment the view lists, in seq order."""
    return list(db.execute("SELECT segment_seq, segment_id FROM document_segments ORDER BY segment_seq"))


def index_into_view(db: apsw.Connection, sealed: SealedSegment, progress: Progress) -> None:
    """Index one sealed segment into the view in a single transaction."""
    records = sealed.records
    index = index_segment([r.text for r in records], [r.tenant_id for r in records], progress)
    info = sealed.info
    with db:
        db.execute(
            "INSERT INTO document_segments (segment_seq, segment_id, file_name, blake3, byte_size, chunk_count, "
            "total_tokens, sealed_at, tenants, doc_lengths, doc_tenants) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (info.segment_seq, info.segment_id, info.file_name, info.blake3, info.byte_size, info.chunk_count,
             index.total_tokens, info.sealed_at, json.dumps(list(index.tenants), ensure_ascii=False),
             encode_array(index.doc_lengths), encode_array(index.doc_tenants)))
        db.executemany(
            "INSERT INTO document_chunks (segment_seq, doc_id, tenant_id, corpus_id, document_id, chunk_id, "
            "frame_offset, doc_length_tokens, ingested_at) VALUES (?,?,?,?,?,?,?,?,?)",
            [(info.segment_seq, doc_id, r.tenant_id, r.corpus_id, r.document_id, r.chunk_id, offset,
              int(index.doc_lengths[doc_id]), r.ingested_at)
             for doc_id, (r, offset) in enumerate(zip(records, sealed.offsets))])
        db.executemany(
            "INSERT INTO document_postings (term, segment_seq, doc_count, doc_ids, tfs) VALUES (?,?,?,?,?)",
            postings_rows(info.segment_seq, index))
        if info.vectors is not None:
            v = VectorSidecar.from_json(info.vectors)
            db.execute(
                "INSERT INTO document_vectors (segment_seq, file_name, blake3, profile_hash, model, dimensions) "
                "VALUES (?,?,?,?,?,?)", (info.segment_seq, v.file_name, v.blake3, v.profile_hash, v.model,
                                        v.dimensions))
        db.executemany(
            "INSERT OR IGNORE INTO document_links (segment_seq, doc_id, target_document_id) VALUES (?,?,?)",
            [(info.segment_seq, doc_id, target) for doc_id, r in enumerate(records)
             for target in document_links(r.document_id, r.text)])


def drop_from_view(db: apsw.Connection, segment_seq: int) -> None:
    """Delete one segment's rows from every document table, in one transaction."""
    with db:
        for table in VIEW_TABLES:
            db.execute(f"DELETE FROM {table} WHERE segment_seq = ?", (segment_seq,))


def clear_view(db: apsw.Connection) -> None:
    """Delete every document table's rows, in one transaction."""
    with db:
        for table in VIEW_TABLES:
            db.execute(f"DELETE FROM {table}")


def summaries(db: apsw.Connection) -> list[SegmentSummary]:
    """Every live segment with the tenants its chunks belong to, in seq order."""
    rows = db.execute(
        "SELECT s.segment_seq, s.segment_id, s.file_name, s.chunk_count, s.total_tokens, s.byte_size, s.blake3, "
        "s.sealed_at, (SELECT group_concat(tenant_id, ',') FROM (SELECT DISTINCT tenant_id FROM document_chunks "
        "WHERE segment_seq = s.segment_seq ORDER BY tenant_id)) "
        "FROM document_segments s ORDER BY s.segment_seq")
    return [SegmentSummary(index, seq, segment_id, file_name, chunks, tokens, size, digest, sealed_at, tenants or "")
            for index, (seq, segment_id, file_name, chunks, tokens, size, digest, sealed_at, tenants)
            in enumerate(rows)]
