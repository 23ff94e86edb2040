"""Per-segment postings built at seal time: document lengths, tenants and one (doc ids, tfs) pair per term.

In the view, a segment is one `document_segments` row (doc lengths and tenant codes as blobs) and a term
is one `document_postings` row per segment holding two blobs: ascending uint32 doc ids and their term
frequencies (uint16, or uint32 when a frequency does not fit). A query reads only its terms' rows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

from .analyzer import TokenCache, analyze

@dataclass(frozen=True)
class TermPostings:
    """The documents of one segment containing a term, ascending, with their term frequencies."""

    doc_ids: np.ndarray
    tfs: np.ndarray

    def encode(self) -> tuple[bytes, bytes]:
        tf_dtype = "<u2" if int(self.tfs.max(initial=0)) <= 0xFFFF else "<u4"
        return self.doc_ids.astype("<u4").tobytes(), self.tfs.astype(tf_dtype).tobytes()

    @classmethod
    def decode(cls, doc_ids: bytes, tfs: bytes) -> "TermPostings":
        ids = np.frombuffer(doc_ids, dtype="<u4")
        tf_dtype = "<u2" if len(tfs) == 2 * len(ids) else "<u4"
        return cls(ids, np.frombuffer(tfs, dtype=tf_dtype))


@dataclass(frozen=True)
class TermPostingsList:
    """One term's postings over several segments, concatenated in segment order (one block per segment)."""

    segment_indices: np.ndarray
    counts: np.ndarray
    doc_ids: np.ndarray
    tfs: np.ndarray

    @property
    def df(self) -> int:
        return len(self.doc_ids)

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[int, int, bytes, bytes]]) -> "TermPostingsList":
        """From (segment_index, doc_count, doc_ids blob, tfs blob) rows in segment order."""
        counts = np.array([row[1] for row in rows], dtype=np.int64)
        doc_ids = np.frombuffer(b"".join(row[2] for row in rows), dtype="<u4")
        if all(len(row[3]) == 2 * row[1] for row in rows):
            tfs = np.frombuffer(b"".join(row[3] for row in rows), dtype="<u2")
        else:
            tfs = np.concatenate([TermPostings.decode(row[2], row[3]).tfs.astype(np.uint32) for row in rows])
        return cls(np.array([row[0] for row in rows], dtype=np.int64), counts, doc_ids, tfs)


@dataclass(frozen=True)
class SegmentIndex:
    """What BM25 needs from one segment: per doc its length and tenant, per term its postings."""

    doc_lengths: np.ndarray
    tenants: tuple[str, ...]
    doc_tenants: np.ndarray
    postings: dict[str, TermPostings]

    @property
    def total_tokens(self) -> int:
        return int(self.doc_lengths.sum())


def index_segment(texts: Sequence[str], tenant_ids: Sequence[str],
                  progress: Optional[Callable[[int, int], None]] = None) -> SegmentIndex:
    """Analyze every chunk of a segment (doc_id = position) into lengths, tenant codes and postings."""
    cache = TokenCache()
    tenant_codes: dict[str, int] = {}
    doc_tenants = np.fromiter((tenant_codes.setdefault(t, len(tenant_codes)) for t in tenant_ids),
                              dtype=np.uint32, count=len(tenant_ids))
    lengths = np.zeros(len(texts), dtype=np.uint32)
    ids_by_term: dict[str, list[int]] = {}
    tfs_by_term: dict[str, list[int]] = {}
    for doc_id, text in enumerate(texts):
        tokens = analyze(text, cache)
        lengths[doc_id] = len(tokens)
        for term, tf in Counter(tokens).items():
            ids = ids_by_term.get(term)
            if ids is None:
                ids_by_term[term] = [doc_id]
                tfs_by_term[term] = [tf]
            else:
                ids.append(doc_id)
                tfs_by_term[term].append(tf)
        if progress and (doc_id + 1) % 1000 == 0:
            progress(doc_id + 1, len(texts))
    if progress:
        progress(len(texts), len(texts))
    postings = {
        term: TermPostings(np.array(ids, dtype=np.uint32), np.array(tfs_by_term[term], dtype=np.uint32))
        for term, ids in ids_by_term.items()
    }
    return SegmentIndex(lengths, tuple(tenant_codes), doc_tenants, postings)


def encode_array(values: np.ndarray) -> bytes:
    return values.astype("<u4").tobytes()


def decode_array(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<u4")


def postings_rows(segment_seq: int, index: SegmentIndex) -> Iterable[tuple[str, int, int, bytes, bytes]]:
    """`document_postings` rows (term, segment_seq, doc_count, doc_ids, tfs) of one segment."""
    for term, postings in index.postings.items():
        doc_ids, tfs = postings.encode()
        yield term, segment_seq, len(postings.doc_ids), doc_ids, tfs
