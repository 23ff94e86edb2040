"""Ranking the view's chunks for a query: BM25, BM25 re-ranked by the dense lane, and fused retrieval.

Every function reads one consistent snapshot (a read transaction over the view and the cached corpus of
the segments it lists) and returns hits of one tenant only, or of all tenants for the admin
`search(tenant=None)`. Scores follow Crux: BM25 in f32, the dense re-rank 0.7/0.3 (query.rs).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from ..embeddings import Embedder
from ..errors import InvalidInput
from .bm25 import Bm25SearchResult
from .corpus_cache import CorpusCache, postings_lookup
from .dense import MERGE_WEIGHTED_LINEAR, SCORE_SPACE_DENSE_FUSED, Ranking, dense_rerank
from .fusion import FUSION_MODES, FusedResult, FusionWeights, Lanes, fuse
from .graph import DocumentGraph
from .tenants import concrete_tenant

BM25_DEPTH = 200          # fused search: how deep BM25 scores are looked up for the other lanes' candidates
COLD_START_THRESHOLD = 100  # fused search's default: fewer graph nodes than this and the graph lane sits out


def _check_limit(top_k: int) -> None:
    if top_k < 0:
        raise InvalidInput(f"limit {top_k} must not be negative")


def total_docs(cache: CorpusCache) -> int:
    """How many chunks the view's segments hold (all tenants)."""
    with cache.db:
        count = cache.snapshot()[0].total_docs
    return count


def search(cache: CorpusCache, query: str, tenant: Optional[str], top_k: int, min_score: Optional[float],
           tenant_statistics: bool) -> Bm25SearchResult:
    """Crux `bm25_search` over every segment; `tenant=None` searches all tenants (admin)."""
    _check_limit(top_k)
    tenant = None if tenant is None else concrete_tenant(tenant)
    with cache.db:
        corpus, rows = cache.snapshot(tenant if tenant_statistics else None)
        lookup = postings_lookup(cache.db, {seq: index for index, (seq, _) in enumerate(rows)})
        result = corpus.search(query, lookup, top_k, tenant, min_score)
    return result


def ranked_search(cache: CorpusCache, embedder: Optional[Embedder], query: str, tenant: str, top_k: int,
                  min_score: Optional[float], dense: bool, tenant_statistics: bool,
                  rerank_depth: Optional[int]) -> tuple[Bm25SearchResult, Ranking]:
    """BM25, then Crux's dense re-rank of the best `rerank_depth` hits (Crux's: `top_k`) when vectors
    of `embedder`'s profile exist; the first `top_k` are returned."""
    tenant = concrete_tenant(tenant)
    _check_limit(top_k)
    if rerank_depth is not None and rerank_depth < 1:
        raise InvalidInput(f"re-rank depth {rerank_depth} must be at least 1")
    profile = embedder.semantic_profile() if embedder is not None else None
    with cache.db:
        corpus, rows = cache.snapshot(tenant if tenant_statistics else None)
        lookup = postings_lookup(cache.db, {seq: index for index, (seq, _) in enumerate(rows)})
        index, skipped = cache.dense(embedder, corpus, rows) if dense else (None, ())
        depth = top_k if index is None or rerank_depth is None else max(top_k, rerank_depth)
        result = corpus.search(query, lookup, depth, tenant, min_score)
    if index is None or embedder is None or not result.hits:
        return result, Ranking(profile=profile, segments_skipped=skipped)
    gids = [int(corpus.bases[hit.segment_index]) + hit.doc_id for hit in result.hits]
    reranked = dense_rerank(result.hits, index.scores_of(embedder.embed_one(query), gids))[:top_k]
    return (replace(result, hits=reranked),
            Ranking(SCORE_SPACE_DENSE_FUSED, MERGE_WEIGHTED_LINEAR, profile, True, skipped))


def fused_search(cache: CorpusCache, embedder: Optional[Embedder], query: str, tenant: str, top_k: int,
                 mode: str, weights: FusionWeights, cold_start_threshold: int, dense: bool) -> FusedResult:
    """`fused_retrieve` over the BM25, dense and graph lanes (or RRF with `mode="rrf"`)."""
    tenant = concrete_tenant(tenant)
    _check_limit(top_k)
    if mode not in FUSION_MODES:
        raise InvalidInput(f"unknown fusion {mode!r}: choose one of {', '.join(FUSION_MODES)}")
    pool = top_k * 4
    with cache.db:
        corpus, rows = cache.snapshot()
        seq_to_index = {seq: index for index, (seq, _) in enumerate(rows)}
        lookup = postings_lookup(cache.db, seq_to_index)
        deep = corpus.search(query, lookup, max(pool, BM25_DEPTH), tenant).hits
        index, _ = cache.dense(embedder, corpus, rows) if dense else (None, ())
        all_scores: Optional[np.ndarray] = None
        dense_ranking: list[tuple[int, int]] = []
        if index is not None and embedder is not None:
            all_scores = index.scores(embedder.embed_one(query))
            mine = corpus.tenant_mask(tenant) & ~np.isnan(all_scores) & (all_scores > 0)
            gids = np.flatnonzero(mine)
            if len(gids) > pool:
                gids = gids[np.argpartition(-all_scores[gids], pool - 1)[:pool]]
            best = gids[np.lexsort((gids, -all_scores[gids]))][:pool]
            dense_ranking = [_chunk_key(corpus.bases, int(g)) for g in best]
        seeds = [(h.segment_index, h.doc_id) for h in deep[:10]]
        graph = DocumentGraph(cache.db, tenant, seq_to_index, lookup, corpus)
        boosts = graph.boosts(query, seeds)
        keys = set(dense_ranking) | set(boosts) | {(h.segment_index, h.doc_id) for h in deep[:pool]}
        gid_of = {key: int(corpus.bases[key[0]]) + key[1] for key in keys}
        lengths = {key: int(corpus.doc_lengths[gid]) for key, gid in gid_of.items()}
        dense_scores = {} if all_scores is None else {
            key: float(all_scores[gid]) for key, gid in gid_of.items() if not np.isnan(all_scores[gid])}
        node_count = graph.node_count()
    lanes = Lanes(deep, pool, dense_scores, dense_ranking, boosts, lengths, index is not None, corpus.total_docs)
    return fuse(lanes, top_k, weights, mode, node_count, cold_start_threshold)


def _chunk_key(bases: np.ndarray, gid: int) -> tuple[int, int]:
    segment_index = int(np.searchsorted(bases, gid, side="right")) - 1
    return segment_index, gid - int(bases[segment_index])
