"""BM25 exactly as Crux's `bm25_search` (spec §5), vectorised with numpy in IEEE f32.

    idf     = ln((N − df + 0.5) / (df + 0.5) + 1)
    tf_norm = tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avg_dl))
    score  += idf · tf_norm          (per query token, in query order, duplicates included)

N, avg_dl and df are global over every segment and every tenant; the tenant filter drops documents
one by one. Coverage counts a query token as matched when any segment's vocabulary holds it, whoever
owns the documents. Hits are ordered by score descending, ties by segment index then doc id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from .analyzer import analyze, surface_words
from .postings import TermPostings

F32 = np.float32


@dataclass(frozen=True)
class Bm25Params:
    k1: float = 1.2
    b: float = 0.75


@dataclass(frozen=True)
class SegmentDocs:
    """Per-document data of one segment: token counts and tenant codes into `tenants`."""

    segment_seq: int
    doc_lengths: np.ndarray
    tenants: tuple[str, ...]
    doc_tenants: np.ndarray


@dataclass(frozen=True)
class Bm25Hit:
    segment_index: int
    doc_id: int
    score: float
    doc_length_tokens: int

    @property
    def result_id(self) -> str:
        return f"{self.segment_index}:{self.doc_id}"


@dataclass(frozen=True)
class Coverage:
    """`score` = matched query tokens / query tokens (f32); `missing_tokens` in the query's original case."""

    score: float
    missing_tokens: list[str]
    below_floor: int


@dataclass(frozen=True)
class Bm25SearchResult:
    hits: list[Bm25Hit]
    coverage: Coverage
    total_candidates: int


# Given distinct terms, their postings as (segment_index, postings) pairs in segment order.
PostingsLookup = Callable[[Sequence[str]], Mapping[str, Sequence[tuple[int, TermPostings]]]]

# Accumulate into a dense per-corpus score array when the query touches more than 1/DENSE_RATIO of it.
DENSE_RATIO = 16


class Bm25Corpus:
    """Global statistics and per-document arrays of a fixed list of segments, ready to score queries."""

    def __init__(self, segments: Sequence[SegmentDocs], params: Bm25Params = Bm25Params()) -> None:
        self.segments = tuple(segments)
        self.params = params
        counts = [len(segment.doc_lengths) for segment in self.segments]
        self.bases = np.cumsum([0, *counts], dtype=np.int64)
        self.total_docs = int(self.bases[-1])
        lengths = (np.concatenate([s.doc_lengths for s in self.segments]) if self.segments
                   else np.zeros(0, dtype=np.uint32)).astype(np.uint32)
        self.doc_lengths = lengths
        self.total_tokens = int(lengths.sum(dtype=np.uint64))
        self.avg_dl = F32(self.total_tokens) / F32(self.total_docs) if self.total_docs else F32(0.0)
        k1, b = F32(params.k1), F32(params.b)
        self._k1_plus_1 = k1 + F32(1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            # k1·(1 − b + b·dl/avg_dl), in Rust's operation order.
            self._length_norm = k1 * ((F32(1.0) - b) + (b * lengths.astype(F32)) / self.avg_dl)
        self._tenant_codes: dict[str, int] = {}
        per_segment = []
        for segment in self.segments:
            remap = np.array([self._tenant_codes.setdefault(t, len(self._tenant_codes)) for t in segment.tenants],
                             dtype=np.int32)
            per_segment.append(remap[segment.doc_tenants] if len(remap) else np.zeros(0, dtype=np.int32))
        self.doc_tenants = np.concatenate(per_segment) if per_segment else np.zeros(0, dtype=np.int32)
        self._tenant_masks: dict[str, np.ndarray] = {}

    def idf(self, df: int) -> np.float32:
        n, d = F32(self.total_docs), F32(df)
        return F32(math.log(float((n - d + F32(0.5)) / (d + F32(0.5)) + F32(1.0))))

    def tenant_mask(self, tenant: str) -> np.ndarray:
        mask = self._tenant_masks.get(tenant)
        if mask is None:
            code = self._tenant_codes.get(tenant, -1)
            mask = self.doc_tenants == code
            self._tenant_masks[tenant] = mask
        return mask

    def locate(self, gid: int) -> tuple[int, int]:
        """(segment_index, doc_id) of a corpus-wide document number."""
        segment_index = int(np.searchsorted(self.bases, gid, side="right")) - 1
        return segment_index, gid - int(self.bases[segment_index])

    def search(
        self,
        query: str,
        lookup: PostingsLookup,
        top_k: int,
        tenant: Optional[str] = None,
        min_score: Optional[float] = None,
    ) -> Bm25SearchResult:
        """Crux `bm25_search`: hits for `tenant` (None = every tenant), floor, coverage, candidates."""
        tokens = analyze(query)
        if not tokens:
            return Bm25SearchResult([], Coverage(0.0, [], 0), 0)
        terms = list(dict.fromkeys(tokens))
        found = lookup(terms)
        scored: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term in terms:
            entries = [(index, postings) for index, postings in found.get(term, ()) if len(postings.doc_ids)]
            if entries:
                scored[term] = self._term_contributions(entries)
        matched = [token in scored for token in tokens]
        candidates, scores = self._accumulate(tokens, scored)
        keep = scores > 0
        if tenant is not None:
            keep &= self.tenant_mask(tenant)[candidates]
        candidates, scores = candidates[keep], scores[keep]
        total_candidates = len(candidates)
        below_floor = 0
        if min_score is not None:
            above = scores >= F32(min_score)
            below_floor = total_candidates - int(above.sum())
            candidates, scores = candidates[above], scores[above]
        candidates, scores = _top_k(candidates, scores, top_k)
        hits = []
        for gid, score in zip(candidates.tolist(), scores.tolist()):
            segment_index, doc_id = self.locate(gid)
            hits.append(Bm25Hit(segment_index, doc_id, score, int(self.doc_lengths[gid])))
        words = surface_words(query)
        coverage = Coverage(
            score=float(F32(sum(matched)) / F32(len(tokens))),
            missing_tokens=[word for word, hit in zip(words, matched) if not hit],
            below_floor=below_floor,
        )
        return Bm25SearchResult(hits, coverage, total_candidates)

    def _term_contributions(self, entries: Sequence[tuple[int, TermPostings]]) -> tuple[np.ndarray, np.ndarray]:
        """Corpus-wide doc numbers of a term's postings and idf·tf_norm for each (f32)."""
        df = sum(len(postings.doc_ids) for _, postings in entries)
        idf = self.idf(df)
        gids = np.concatenate([self.bases[index] + postings.doc_ids for index, postings in entries])
        tfs = np.concatenate([postings.tfs for _, postings in entries]).astype(F32)
        tf_norm = (tfs * self._k1_plus_1) / (tfs + self._length_norm[gids])
        return gids, idf * tf_norm

    def _accumulate(
        self, tokens: Sequence[str], scored: Mapping[str, tuple[np.ndarray, np.ndarray]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sum contributions token by token (query order, so f32 rounding matches Crux); (docs, scores)."""
        touched = sum(len(scored[token][0]) for token in tokens if token in scored)
        if touched == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=F32)
        if touched * DENSE_RATIO >= self.total_docs:
            dense = np.zeros(self.total_docs, dtype=F32)
            for token in tokens:
                if token in scored:
                    gids, contributions = scored[token]
                    dense[gids] += contributions
            candidates = np.flatnonzero(dense)
            return candidates, dense[candidates]
        union = np.unique(np.concatenate([gids for gids, _ in scored.values()]))
        positions = {term: np.searchsorted(union, gids) for term, (gids, _) in scored.items()}
        sparse = np.zeros(len(union), dtype=F32)
        for token in tokens:
            if token in scored:
                sparse[positions[token]] += scored[token][1]
        return union, sparse


def _top_k(candidates: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best by score descending, ties by corpus order (segment index, then doc id)."""
    if k < len(candidates):
        if k <= 0:
            return candidates[:0], scores[:0]
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        at_least = scores >= kth
        candidates, scores = candidates[at_least], scores[at_least]
    order = np.lexsort((candidates, -scores))[:k]
    return candidates[order], scores[order]
