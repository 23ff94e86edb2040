"""Per-segment postings built at seal time: document lengths, tenants and one (doc ids, tfs) pair per term.

In the view, a segment is one `document_segments` row (doc lengths and tenant codes as blobs) and a term
is one `document_postings` row per segment holding two blobs: ascending uint32 doc ids and their term
frequencies (uint16, or uint32 when a frequency does not fit). A query reads only its terms' rows.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import numpy as np

from .analyzer import is_dropped, normalize, split_words

U16_MAX = 0xFFFF


def decode_tfs(blob: bytes, count: int) -> np.ndarray:
    """Term frequencies of a postings row: uint16 when the blob holds 2 bytes per doc, else uint32."""
    return np.frombuffer(blob, dtype="<u2" if len(blob) == 2 * count else "<u4")


@dataclass(frozen=True)
class QueryPostings:
    """The postings of a query's terms, concatenated term by term, and within a term segment by segment.

    Term i (`terms[i]`) owns `doc_ids[term_bounds[i]:term_bounds[i+1]]` and the same slice of `tfs`; each
    stored row (one term in one segment) contributes `row_counts[r]` entries from segment `row_segments[r]`.
    Doc ids are per segment, as stored.
    """

    terms: list[str]
    term_bounds: np.ndarray
    row_segments: np.ndarray
    row_counts: np.ndarray
    doc_ids: np.ndarray
    tfs: np.ndarray

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[str, int, int, bytes, bytes]]) -> "QueryPostings":
        """From (term, segment_index, doc_count, doc_ids blob, tfs blob) rows ordered by term, then segment."""
        terms: list[str] = []
        starts: list[int] = []
        position = 0
        for term, _, count, _, _ in rows:
            if not terms or terms[-1] != term:
                terms.append(term)
                starts.append(position)
            position += count
        starts.append(position)
        counts = np.array([row[2] for row in rows], dtype=np.int64)
        doc_ids = np.frombuffer(b"".join(row[3] for row in rows), dtype="<u4")
        if all(len(row[4]) == 2 * row[2] for row in rows):
            tfs = np.frombuffer(b"".join(row[4] for row in rows), dtype="<u2")
        else:
            tfs = np.concatenate([decode_tfs(row[4], row[2]).astype(np.uint32) for row in rows])
        return cls(terms, np.array(starts, dtype=np.int64), np.array([row[1] for row in rows], dtype=np.int64),
                   counts, doc_ids, tfs)


@dataclass(frozen=True)
class SegmentIndex:
    """What BM25 needs from one segment: per doc its length and tenant; per term (sorted) its postings.

    Term i's postings are `doc_ids[bounds[i]:bounds[i+1]]` (ascending) with `tfs` alongside.
    """

    doc_lengths: np.ndarray
    tenants: tuple[str, ...]
    doc_tenants: np.ndarray
    terms: list[str]
    bounds: np.ndarray
    doc_ids: np.ndarray
    tfs: np.ndarray

    @property
    def total_tokens(self) -> int:
        return int(self.doc_lengths.sum(dtype=np.uint64))

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(doc ids, tfs) of one term; empty arrays if the segment does not contain it."""
        index = bisect.bisect_left(self.terms, term)
        if index == len(self.terms) or self.terms[index] != term:
            return self.doc_ids[:0], self.tfs[:0]
        start, end = self.bounds[index], self.bounds[index + 1]
        return self.doc_ids[start:end], self.tfs[start:end]


class _TermNumbers(dict):
    """Surface piece → term number (−1 for a dropped piece); `tokens` lists each term once, by number."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[str] = []
        self._by_token: dict[str, int] = {}

    def __missing__(self, piece: str) -> int:
        number = -1
        if not is_dropped(piece):
            token = normalize(piece)
            number = self._by_token.setdefault(token, len(self.tokens))
            if number == len(self.tokens):
                self.tokens.append(token)
        self[piece] = number
        return number


def index_segment(texts: Sequence[str], tenant_ids: Sequence[str],
                  progress: Optional[Callable[[int, int], None]] = None) -> SegmentIndex:
    """Analyze every chunk of a segment (doc_id = position) into lengths, tenant codes and postings."""
    n_docs = len(texts)
    tenant_codes: dict[str, int] = {}
    doc_tenants = np.fromiter((tenant_codes.setdefault(t, len(tenant_codes)) for t in tenant_ids),
                              dtype=np.uint32, count=n_docs)
    numbers = _TermNumbers()
    per_doc: list[np.ndarray] = []
    for doc_id, text in enumerate(texts):
        pieces = split_words(text)
        per_doc.append(np.fromiter(map(numbers.__getitem__, pieces), dtype=np.int64, count=len(pieces)))
        if progress and (doc_id + 1) % 1000 == 0:
            progress(doc_id + 1, n_docs)
    piece_counts = np.fromiter(map(len, per_doc), dtype=np.int64, count=n_docs)
    flat = np.concatenate(per_doc) if per_doc else np.zeros(0, dtype=np.int64)
    docs = np.repeat(np.arange(n_docs, dtype=np.int64), piece_counts)
    kept = flat >= 0                     # one-byte pieces map to -1
    flat, docs = flat[kept], docs[kept]
    lengths = np.bincount(docs, minlength=n_docs).astype(np.uint32)
    # Renumber terms in alphabetical order, then one sort of (term, doc) keys yields every posting and tf.
    order = sorted(range(len(numbers.tokens)), key=numbers.tokens.__getitem__)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    keys, tfs = np.unique(rank[flat] * max(n_docs, 1) + docs, return_counts=True)
    term_of = keys // max(n_docs, 1)
    bounds = np.searchsorted(term_of, np.arange(len(order) + 1, dtype=np.int64))
    if progress:
        progress(n_docs, n_docs)
    return SegmentIndex(lengths, tuple(tenant_codes), doc_tenants, [numbers.tokens[i] for i in order], bounds,
                        (keys % max(n_docs, 1)).astype(np.uint32), tfs.astype(np.uint32))


def encode_array(values: np.ndarray) -> bytes:
    return values.astype("<u4").tobytes()


def decode_array(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<u4")


def postings_rows(segment_seq: int, index: SegmentIndex) -> Iterator[tuple[str, int, int, bytes, bytes]]:
    """`document_postings` rows (term, segment_seq, doc_count, doc_ids, tfs) of one segment, in term order."""
    doc_ids = index.doc_ids.astype("<u4")
    narrow = int(index.tfs.max(initial=0)) <= U16_MAX
    tfs = index.tfs.astype("<u2" if narrow else "<u4")
    bounds = index.bounds.tolist()
    for i, term in enumerate(index.terms):
        start, end = bounds[i], bounds[i + 1]
        term_tfs = tfs[start:end]
        if not narrow and int(term_tfs.max()) <= U16_MAX:
            term_tfs = term_tfs.astype("<u2")
        yield term, segment_seq, end - start, doc_ids[start:end].tobytes(), term_tfs.tobytes()
