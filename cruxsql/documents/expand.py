"""Expanding result ids: `"{segment_index}:{doc_id}"` pointers resolved to their chunks' text.

A result id addresses a chunk by its segment's position in the view's seq order and its doc_id in that
segment, as Crux's do. Each id resolves on its own: to the chunk, read from its segment file at its
frame offset, or to one typed error (bad format, evicted, another tenant's) without failing the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import apsw

from .response_shapes import ExpandedChunk, ExpandError
from .segment_view import listed_segments
from .segments import read_record
from .tenants import concrete_tenant


def expand(db: apsw.Connection, directory: Path, result_ids: Sequence[str], tenant: str
           ) -> tuple[list[ExpandedChunk], list[ExpandError]]:
    """Resolve `"{segment_index}:{doc_id}"` ids to chunks with text, or typed per-id errors."""
    tenant = concrete_tenant(tenant)
    chunks: list[ExpandedChunk] = []
    errors: list[ExpandError] = []
    with db:
        rows = listed_segments(db)
        files = dict(db.execute("SELECT segment_seq, file_name FROM document_segments"))
        for result_id in result_ids:
            parts = result_id.split(":")
            if len(parts) != 2:
                errors.append(ExpandError(result_id, "invalid result_id format", "invalid_format"))
                continue
            segment_index, doc_id = (_parse_unsigned(part) for part in parts)
            if segment_index is None or segment_index >= len(rows):
                errors.append(ExpandError(result_id, "segment not found", "evicted"))
                continue
            seq = rows[segment_index][0]
            row = None if doc_id is None else db.execute(
                "SELECT tenant_id, frame_offset, doc_length_tokens FROM document_chunks "
                "WHERE segment_seq = ? AND doc_id = ?", (seq, doc_id)).fetchone()
            if doc_id is None or row is None:
                errors.append(ExpandError(result_id, "doc_id out of range", "evicted"))
                continue
            owner, offset, length = row
            if owner != tenant:
                errors.append(ExpandError(result_id, "tenant mismatch", "tenant_mismatch"))
                continue
            record = read_record(directory, files[seq], offset)
            chunks.append(ExpandedChunk(segment_index, seq, doc_id, offset, length, record.tenant_id,
                                        record.corpus_id, record.document_id, record.chunk_id, record.text))
    return chunks, errors


def _parse_unsigned(text: str) -> Optional[int]:
    """Rust's `str::parse::<usize>`: ASCII digits with an optional leading `+`; None on failure."""
    digits = text[1:] if text.startswith("+") else text
    return int(digits) if digits.isascii() and digits.isdigit() else None
