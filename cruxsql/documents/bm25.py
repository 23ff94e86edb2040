"""BM25 exactly as Crux's `bm25_search` (crates/corecrux-retrieval/src/bm25.rs), vectorised with numpy in IEEE f32.

    idf     = ln((N − df + 0.5) / (df + 0.5) + 1)
    tf_norm = tf·(k1 + 1) / (tf + k1·(1 − b + b·dl/avg_dl))
    score  += idf · tf_norm          (per query token, in query order, duplicates included)

N, avg_dl and df are global over every segment and every tenant (Crux's rule); the tenant filter drops
documents one by one. A corpus built with `statistics_tenant` computes N, avg_dl and df over that
tenant's documents only (`--tenant-statistics`), so scores reveal nothing about other tenants. Coverage
counts a query token as matched only when a document of the searching tenant holds it (Crux looks at
every tenant's vocabulary, which leaks). Hits are ordered by score descending, ties by segment index
then doc id.

A term's idf·tf_norm per document depends only on the corpus snapshot (the list of segments), so a
`Bm25Corpus` keeps the most recently used terms' scores (TERM_CACHE_BYTES); a new segment means a new
snapshot and an empty cache.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from .analyzer import analyze, surface_words
from .postings import QueryPostings

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


def result_id(segment_index: int, doc_id: int) -> str:
    """A chunk's result id, `"{segment_index}:{doc_id}"` (what `query_expand` takes back)."""
    return f"{segment_index}:{doc_id}"


@dataclass(frozen=True)
class Bm25Hit:
    """A scored chunk; `score` is the f32 score widened to a Python float (as serde_json prints it)."""

    segment_index: int
    doc_id: int
    score: float
    doc_length_tokens: int

    @property
    def result_id(self) -> str:
        return result_id(self.segment_index, self.doc_id)


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


# Given distinct terms, the postings of those that occur in any segment.
PostingsLookup = Callable[[Sequence[str]], QueryPostings]

# Accumulate into a dense per-corpus score array when the query touches more than 1/DENSE_RATIO of it.
DENSE_RATIO = 16
# A term in at least 1/DENSE_TERM_RATIO of the documents also keeps its contributions as a per-corpus vector,
# added with one contiguous vector add (adding 0.0 elsewhere leaves every other f32 sum unchanged).
DENSE_TERM_RATIO = 8
# Memory for per-term contributions kept between queries (least recently used first out).
TERM_CACHE_BYTES = 96 * 1024 * 1024
# Tenants whose per-document filter arrays are kept per corpus snapshot.
TENANT_CACHE_SIZE = 8


@dataclass(frozen=True)
class TermScores:
    """idf·tf_norm of one term for every document containing it (valid for one corpus snapshot)."""

    gids: np.ndarray
    contributions: np.ndarray
    vector: Optional[np.ndarray]

    @property
    def nbytes(self) -> int:
        return self.gids.nbytes + self.contributions.nbytes + (0 if self.vector is None else self.vector.nbytes)


class Bm25Corpus:
    """Global statistics and per-document arrays of a fixed list of segments, ready to score queries."""

    def __init__(self, segments: Sequence[SegmentDocs], params: Bm25Params = Bm25Params(),
                 statistics_tenant: Optional[str] = None) -> None:
        self.segments = tuple(segments)
        self.params = params
        self.statistics_tenant = statistics_tenant
        counts = [len(segment.doc_lengths) for segment in self.segments]
        self.bases = np.cumsum([0, *counts], dtype=np.int64)
        self.total_docs = int(self.bases[-1])
        lengths = (np.concatenate([s.doc_lengths for s in self.segments]) if self.segments
                   else np.zeros(0, dtype=np.uint32)).astype(np.uint32)
        self.doc_lengths = lengths
        self._tenant_codes: dict[str, int] = {}
        per_segment = []
        for segment in self.segments:
            remap = np.array([self._tenant_codes.setdefault(t, len(self._tenant_codes)) for t in segment.tenants],
                             dtype=np.int32)
            per_segment.append(remap[segment.doc_tenants] if len(remap) else np.zeros(0, dtype=np.int32))
        self.doc_tenants = np.concatenate(per_segment) if per_segment else np.zeros(0, dtype=np.int32)
        # The documents N, avg_dl and df are counted over: all, or the statistics tenant's only.
        self._counted: Optional[np.ndarray] = None
        if statistics_tenant is not None:
            self._counted = self.doc_tenants == self._tenant_codes.get(statistics_tenant, -1)
        counted_lengths = lengths if self._counted is None else lengths[self._counted]
        self.statistics_docs = len(counted_lengths)
        self.total_tokens = int(counted_lengths.sum(dtype=np.uint64))
        self.avg_dl = F32(self.total_tokens) / F32(self.statistics_docs) if self.statistics_docs else F32(0.0)
        k1, b = F32(params.k1), F32(params.b)
        self._k1_plus_1 = k1 + F32(1.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            # k1·(1 − b + b·dl/avg_dl), in Rust's operation order.
            self._length_norm = k1 * ((F32(1.0) - b) + (b * lengths.astype(F32)) / self.avg_dl)
        self._tenant_weight_cache: dict[str, Optional[np.ndarray]] = {}
        self._term_cache: OrderedDict[str, TermScores] = OrderedDict()
        self._term_cache_bytes = 0

    def idf(self, df: np.ndarray) -> np.ndarray:
        """ln((N − df + 0.5) / (df + 0.5) + 1) per document frequency: f32 steps, logarithm rounded to f32."""
        n, d = F32(self.statistics_docs), df.astype(F32)
        ratio = (n - d + F32(0.5)) / (d + F32(0.5)) + F32(1.0)
        return np.log(ratio.astype(np.float64)).astype(F32)

    def search(
        self,
        query: str,
        lookup: PostingsLookup,
        top_k: int,
        tenant: Optional[str] = None,
        min_score: Optional[float] = None,
    ) -> Bm25SearchResult:
        """Crux `bm25_search`: hits for `tenant` (None = every tenant), floor, coverage, candidates.

        Coverage looks at `tenant`'s documents only (every tenant's when None)."""
        tokens = analyze(query)
        if not tokens:
            return Bm25SearchResult([], Coverage(0.0, [], 0), 0)
        scored = self._term_scores(list(dict.fromkeys(tokens)), lookup)
        covered = {term for term in scored if self._tenant_holds(tenant, scored[term].gids)}
        matched = [token in covered for token in tokens]
        candidates, scores, total_candidates, below_floor = self._select(tokens, scored, tenant, min_score, top_k)
        segment_indices = np.searchsorted(self.bases, candidates, side="right") - 1
        doc_ids = candidates - self.bases[segment_indices]
        hits = [Bm25Hit(segment_index, doc_id, score, length) for segment_index, doc_id, score, length in zip(
            segment_indices.tolist(), doc_ids.tolist(), scores.tolist(), self.doc_lengths[candidates].tolist())]
        words = surface_words(query)
        coverage = Coverage(
            score=float(F32(sum(matched)) / F32(len(tokens))),
            missing_tokens=[word for word, hit in zip(words, matched) if not hit],
            below_floor=below_floor,
        )
        return Bm25SearchResult(hits, coverage, total_candidates)

    def _tenant_holds(self, tenant: Optional[str], gids: np.ndarray) -> bool:
        """Whether any of these documents belongs to `tenant` (None: any tenant)."""
        if tenant is None or self._tenant_weights(tenant) is None:
            return len(gids) > 0
        return bool(np.any(self.doc_tenants[gids] == self._tenant_codes.get(tenant, -1)))

    def _term_scores(self, terms: Sequence[str], lookup: PostingsLookup) -> dict[str, TermScores]:
        """Scores of the terms present in any segment: from the cache, else computed from their postings."""
        scored: dict[str, TermScores] = {}
        missing = []
        for term in terms:
            cached = self._term_cache.get(term)
            if cached is None:
                missing.append(term)
            else:
                self._term_cache.move_to_end(term)
                scored[term] = cached
        if missing:
            for term, term_scores in self._contributions(lookup(missing)).items():
                scored[term] = term_scores
                self._remember(term, term_scores)
        return scored

    def _remember(self, term: str, term_scores: TermScores) -> None:
        if term_scores.nbytes > TERM_CACHE_BYTES:
            return
        self._term_cache[term] = term_scores
        self._term_cache_bytes += term_scores.nbytes
        while self._term_cache_bytes > TERM_CACHE_BYTES:
            _, evicted = self._term_cache.popitem(last=False)
            self._term_cache_bytes -= evicted.nbytes

    def _contributions(self, postings: QueryPostings) -> dict[str, TermScores]:
        """Per term: corpus-wide doc numbers of its postings and idf·tf_norm for each (f32, Crux's order)."""
        if not postings.terms:
            return {}
        gids = postings.doc_ids.astype(np.int64)
        gids += np.repeat(self.bases[postings.row_segments], postings.row_counts)
        dfs = np.diff(postings.term_bounds)
        tfs = postings.tfs
        if self._counted is not None:  # tenant statistics: only the tenant's postings exist
            keep = self._counted[gids]
            dfs = np.bincount(np.repeat(np.arange(len(dfs)), dfs)[keep], minlength=len(dfs))
            gids, tfs = gids[keep], tfs[keep]
        tfs = tfs.astype(F32)
        tf_norm = (tfs * self._k1_plus_1) / (tfs + self._length_norm[gids])
        contributions = np.repeat(self.idf(dfs), dfs) * tf_norm
        bounds = np.concatenate(([0], np.cumsum(dfs))).tolist()
        result = {}
        for i, term in enumerate(postings.terms):
            if bounds[i] == bounds[i + 1]:
                continue
            term_gids, term_contributions = gids[bounds[i]:bounds[i + 1]], contributions[bounds[i]:bounds[i + 1]]
            vector = None
            if len(term_gids) * DENSE_TERM_RATIO >= self.total_docs:
                vector = np.zeros(self.total_docs, dtype=F32)
                vector[term_gids] = term_contributions
            result[term] = TermScores(term_gids.copy(), term_contributions.copy(), vector)
        return result

    def _select(
        self, tokens: Sequence[str], scored: Mapping[str, TermScores], tenant: Optional[str],
        min_score: Optional[float], top_k: int,
    ) -> tuple[np.ndarray, np.ndarray, int, int]:
        """Sum contributions token by token (query order, so f32 rounding matches Crux), filter, take top k.

        Returns (doc numbers, scores) of the top k in order, total_candidates and below_floor.
        """
        touched = sum(len(scored[token].gids) for token in tokens if token in scored)
        if touched * DENSE_RATIO >= self.total_docs:
            return self._select_dense(tokens, scored, tenant, min_score, top_k)
        if touched == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=F32), 0, 0
        union = np.unique(np.concatenate([term.gids for term in scored.values()]))
        positions = {name: np.searchsorted(union, term.gids) for name, term in scored.items()}
        sums = np.zeros(len(union), dtype=F32)
        for token in tokens:
            if token in scored:
                sums[positions[token]] += scored[token].contributions
        keep = sums > 0
        if tenant is not None:
            keep &= self.doc_tenants[union] == self._tenant_codes.get(tenant, -1)
        candidates, scores = union[keep], sums[keep]
        total, below_floor = len(candidates), 0
        if min_score is not None:
            above = scores >= F32(min_score)
            below_floor = total - int(np.count_nonzero(above))
            candidates, scores = candidates[above], scores[above]
        candidates, scores = _top_k(candidates, scores, top_k)
        return candidates, scores, total, below_floor

    def _select_dense(
        self, tokens: Sequence[str], scored: Mapping[str, TermScores], tenant: Optional[str],
        min_score: Optional[float], top_k: int,
    ) -> tuple[np.ndarray, np.ndarray, int, int]:
        """`_select` over a per-corpus score array, for queries touching a large share of the documents."""
        dense = np.zeros(self.total_docs, dtype=F32)
        for token in tokens:
            term = scored.get(token)
            if term is None:
                continue
            if term.vector is not None:
                np.add(dense, term.vector, out=dense)
            else:
                dense[term.gids] += term.contributions
        if tenant is not None:
            weights = self._tenant_weights(tenant)
            if weights is not None:
                np.multiply(dense, weights, out=dense)
        eligible = dense > 0
        total = int(np.count_nonzero(eligible))
        count, below_floor = total, 0
        if min_score is not None:
            eligible &= dense >= F32(min_score)
            count = int(np.count_nonzero(eligible))
            below_floor = total - count
            if count < total:
                dense = np.where(eligible, dense, F32(0))
        if top_k <= 0 or count == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=F32), total, below_floor
        candidates = np.flatnonzero(eligible) if count <= top_k else _at_least_kth(dense, top_k)
        candidates, scores = _top_k(candidates, dense[candidates], top_k)
        return candidates, scores, total, below_floor

    def tenant_mask(self, tenant: str) -> np.ndarray:
        """True for every document (by global number) that `tenant` owns."""
        return self.doc_tenants == self._tenant_codes.get(tenant, -1)

    def _tenant_weights(self, tenant: str) -> Optional[np.ndarray]:
        """1.0 for the tenant's documents and 0.0 for the others (f32), or None when it owns every document."""
        if tenant not in self._tenant_weight_cache:
            if len(self._tenant_weight_cache) >= TENANT_CACHE_SIZE:
                self._tenant_weight_cache.pop(next(iter(self._tenant_weight_cache)))
            mine = self.doc_tenants == self._tenant_codes.get(tenant, -1)
            self._tenant_weight_cache[tenant] = None if mine.all() else mine.astype(F32)
        return self._tenant_weight_cache[tenant]


def _at_least_kth(dense: np.ndarray, k: int) -> np.ndarray:
    """Indices of every score ≥ the k-th largest (k ≥ 1 positive scores exist; the rest are 0).

    Halves a threshold from the maximum until at least k scores reach it, so the O(N) passes are
    vectorised comparisons and the selection itself runs over the few survivors.
    """
    threshold = dense.max() * F32(0.5)
    while True:
        survivors = np.flatnonzero(dense >= threshold)
        if len(survivors) >= k:
            return survivors
        threshold *= F32(0.25)


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
