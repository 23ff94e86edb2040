"""What a search reads: the BM25 corpus statistics and the dense index of the segments the view lists.

Both are costly to build (every segment's document lengths; every vector sidecar), so they are cached,
keyed by the view's (segment_seq, segment_id) list (and the embedder's profile hash): a cached value
is used only while the view lists exactly the segments it was built from. Call inside a read
transaction, so the key and the rows agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import apsw

from ..embeddings import Embedder
from .bm25 import Bm25Corpus, SegmentDocs
from .dense import DenseIndex
from .postings import QueryPostings, decode_array
from .segment_view import listed_segments

TENANT_CORPORA = 8  # tenant-statistics corpora kept at once

SegmentRows = list[tuple[int, str]]
_Key = tuple[tuple[int, str], ...]


class CorpusCache:
    """The corpora (global, and per tenant for `--tenant-statistics`) and the dense index of one view."""

    def __init__(self, db: apsw.Connection, directory: Path) -> None:
        self.db = db
        self.directory = directory
        self._corpus: Optional[tuple[_Key, Bm25Corpus]] = None
        self._tenant_corpora: dict[str, tuple[_Key, Bm25Corpus]] = {}  # --tenant-statistics, per tenant
        self._dense: Optional[tuple[tuple[_Key, str], DenseIndex, tuple[str, ...]]] = None

    def invalidate(self) -> None:
        """Forget the global corpus (the segments changed)."""
        self._corpus = None

    def snapshot(self, statistics_tenant: Optional[str] = None) -> tuple[Bm25Corpus, SegmentRows]:
        """The corpus for the segments the view lists now, with global statistics or those of
        `statistics_tenant`, and the view's (segment_seq, segment_id) rows."""
        rows = listed_segments(self.db)
        key = tuple(rows)
        cached = self._corpus if statistics_tenant is None else self._tenant_corpora.get(statistics_tenant)
        if cached is None or cached[0] != key:
            segments = [
                SegmentDocs(seq, decode_array(lengths), tuple(json.loads(tenants)), decode_array(doc_tenants))
                for seq, lengths, tenants, doc_tenants in self.db.execute(
                    "SELECT segment_seq, doc_lengths, tenants, doc_tenants FROM document_segments ORDER BY segment_seq")
            ]
            cached = (key, Bm25Corpus(segments, statistics_tenant=statistics_tenant))
            if statistics_tenant is None:
                self._corpus = cached
            else:
                if len(self._tenant_corpora) >= TENANT_CORPORA:
                    self._tenant_corpora.pop(next(iter(self._tenant_corpora)))
                self._tenant_corpora[statistics_tenant] = cached
        return cached[1], rows

    def dense(self, embedder: Optional[Embedder], corpus: Bm25Corpus, rows: Sequence[tuple[int, str]]
              ) -> tuple[Optional[DenseIndex], tuple[str, ...]]:
        """The dense index of the segments whose vectors `embedder` can query, and the others' file names."""
        if embedder is None:
            return None, ()
        profile = embedder.semantic_profile()
        key = (tuple(rows), profile.hash)
        if self._dense is None or self._dense[0] != key:
            index = DenseIndex(corpus.total_docs, profile.dimensions)
            skipped: list[str] = []
            vectors = {seq: (name, profile_hash) for seq, name, profile_hash in self.db.execute(
                "SELECT segment_seq, file_name, profile_hash FROM document_vectors")}
            for position, (seq, _) in enumerate(rows):
                if seq not in vectors:
                    continue
                name, profile_hash = vectors[seq]
                if profile_hash != profile.hash:
                    skipped.append(name)
                    continue
                try:
                    index.add_segment(int(corpus.bases[position]), self.directory / name)
                except (OSError, ValueError):
                    skipped.append(name)        # unreadable: verify() names the problem
            self._dense = (key, index, tuple(skipped))
        _, index, skipped_names = self._dense
        return (None if index.empty else index), skipped_names


def postings_lookup(db: apsw.Connection, seq_to_index: Mapping[int, int]) -> Callable[[Sequence[str]], QueryPostings]:
    """Query terms' postings in the view, with each segment_seq mapped to its segment index."""
    def lookup(terms: Sequence[str]) -> QueryPostings:
        placeholders = ",".join("?" * len(terms))
        cursor = db.execute(
            "SELECT term, segment_seq, doc_count, doc_ids, tfs FROM document_postings "
            f"WHERE term IN ({placeholders}) ORDER BY term, segment_seq", tuple(terms))
        rows = [(term, seq_to_index[seq], count, doc_ids, tfs) for term, seq, count, doc_ids, tfs in cursor]
        return QueryPostings.from_rows(rows)
    return lookup
