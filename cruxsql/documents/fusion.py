"""Fused retrieval (`fused_retrieve`, corecrux-retrieval/src/fused.rs) wired into search, and reciprocal rank fusion.

Weighted fusion: `score = w.bm25·bm25/max_bm25 + w.graph·graph + w.dense·dense + w.sparse·0` with
weights {0.5, 0.3, 0.2, 0.0}; while the graph has fewer than `cold_start_threshold` nodes the graph weight
moves to BM25. Candidates are Crux's BM25 pool (top_k·4) and, beyond Crux, the dense lane's own top
top_k·4 by cosine over every chunk vector of the tenant and the chunks the graph reaches; a candidate
outside the BM25 pool keeps its BM25 score from a deeper BM25 list (0 if it matches no query word).

RRF: `score = Σ_lane 1/(k + rank)` with k = 60 over the BM25, dense and graph rankings (score space
`reciprocal_rank_fusion`). Each hit carries its per-lane breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .bm25 import Bm25Hit, result_id
from .graph import ChunkKey

F32 = np.float32
RRF_K = 60
FUSION_MODES = ("weighted", "rrf")
SCORE_SPACE_FUSED = "fused_retrieve"
SCORE_SPACE_RRF = "reciprocal_rank_fusion"


@dataclass(frozen=True)
class FusionWeights:
    bm25: float = 0.5
    graph: float = 0.3
    dense: float = 0.2
    sparse: float = 0.0


@dataclass(frozen=True)
class FusedHit:
    segment_index: int
    doc_id: int
    score: float
    breakdown: dict[str, float]
    hop_distance: int
    doc_length_tokens: int

    @property
    def result_id(self) -> str:
        return result_id(self.segment_index, self.doc_id)


@dataclass(frozen=True)
class FusedResult:
    hits: list[FusedHit]
    weights: FusionWeights
    mode: str
    stats: dict[str, Any]


def effective_weights(weights: FusionWeights, graph_node_count: int, cold_start_threshold: int) -> FusionWeights:
    """Crux's cold start: a graph smaller than the threshold gives its weight to BM25."""
    if graph_node_count < cold_start_threshold and weights.graph > 0:
        return FusionWeights(weights.bm25 + weights.graph, 0.0, weights.dense, weights.sparse)
    return weights


@dataclass(frozen=True)
class Lanes:
    """What each lane found for one query (keys are (segment_index, doc_id))."""

    bm25: Sequence[Bm25Hit]                     # deep BM25 list, best first; its first `pool` form Crux's pool
    pool: int
    dense: Mapping[ChunkKey, float]             # cosine clamped to [0, 1] of every candidate with a vector
    dense_ranking: Sequence[ChunkKey]           # the dense lane's own top candidates, best first
    graph: Mapping[ChunkKey, tuple[float, int]]  # (boost, hop) of chunks the graph reaches
    doc_lengths: Mapping[ChunkKey, int]
    dense_active: bool
    total_docs: int


def fuse(lanes: Lanes, top_k: int, weights: FusionWeights = FusionWeights(), mode: str = "weighted",
         graph_node_count: int = 0, cold_start_threshold: int = 100) -> FusedResult:
    """Rank the union of the lanes' candidates by weighted fusion (Crux) or RRF; truncate to `top_k`."""
    if mode not in FUSION_MODES:
        raise ValueError(f"unknown fusion {mode!r}")
    used = effective_weights(weights, graph_node_count, cold_start_threshold)
    pool = list(lanes.bm25[:lanes.pool])
    bm25_scores = {(h.segment_index, h.doc_id): h.score for h in lanes.bm25}
    graph_ranking = sorted((key for key, (boost, _) in lanes.graph.items() if boost > 0),
                           key=lambda key: -lanes.graph[key][0])
    candidates: dict[ChunkKey, None] = dict.fromkeys((h.segment_index, h.doc_id) for h in pool)
    candidates.update(dict.fromkeys(lanes.dense_ranking))
    if used.graph > 0 or mode == "rrf":
        candidates.update(dict.fromkeys(graph_ranking))
    if mode == "weighted":
        hits = _weighted(candidates, pool, bm25_scores, lanes, used)
    else:
        hits = _rrf(candidates, pool, lanes, graph_ranking)
    hits.sort(key=lambda hit: -hit.score)
    stats = {"docs_scanned": lanes.total_docs, "postings_decoded": len(pool),
             "graph_nodes_expanded": sum(1 for h in hits if h.breakdown["graph"] > 0) if used.graph > 0 else 0,
             "dense_lane_active": lanes.dense_active, "graph_node_count": graph_node_count,
             "graph_cold_start": used.graph == 0 and weights.graph > 0, "candidates": len(candidates)}
    return FusedResult(hits[:top_k], used, mode, stats)


def _weighted(candidates: Mapping[ChunkKey, None], pool: Sequence[Bm25Hit], bm25_scores: Mapping[ChunkKey, float],
              lanes: Lanes, w: FusionWeights) -> list[FusedHit]:
    top = max((F32(h.score) for h in pool), default=F32(0.0))
    norm = top if top > 0 else F32(1.0)
    hits = []
    for key in candidates:
        bm25 = F32(bm25_scores.get(key, 0.0)) / norm
        graph, hop = lanes.graph.get(key, (0.0, 0)) if w.graph > 0 else (0.0, 0)
        dense = F32(lanes.dense.get(key, 0.0))
        score = (F32(w.bm25) * bm25 + F32(w.graph) * F32(graph) + F32(w.dense) * dense + F32(w.sparse) * F32(0.0))
        hits.append(FusedHit(key[0], key[1], float(score),
                             {"bm25": float(bm25), "graph": float(F32(graph)), "dense": float(dense), "sparse": 0.0},
                             hop, lanes.doc_lengths.get(key, 0)))
    return hits


def _rrf(candidates: Mapping[ChunkKey, None], pool: Sequence[Bm25Hit], lanes: Lanes,
         graph_ranking: Sequence[ChunkKey]) -> list[FusedHit]:
    rankings = {
        "bm25": {(h.segment_index, h.doc_id): rank for rank, h in enumerate(pool, start=1)},
        "dense": {key: rank for rank, key in enumerate(lanes.dense_ranking, start=1)},
        "graph": {key: rank for rank, key in enumerate(graph_ranking, start=1)},
    }
    hits = []
    for key in candidates:
        parts = {lane: (1.0 / (RRF_K + ranks[key]) if key in ranks else 0.0) for lane, ranks in rankings.items()}
        hop = lanes.graph.get(key, (0.0, 0))[1]
        hits.append(FusedHit(key[0], key[1], sum(parts.values()), {**parts, "sparse": 0.0}, hop,
                             lanes.doc_lengths.get(key, 0)))
    return hits


def fused_payload(result: FusedResult, profile_meta: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The `search --fused` answer: ranked hits with score breakdowns, the weights used and the stats."""
    rrf = result.mode == "rrf"
    return {
        "results": [
            {"result_id": h.result_id, "rank": rank, "score": h.score,
             "score_space": SCORE_SPACE_RRF if rrf else SCORE_SPACE_FUSED, "score_breakdown": h.breakdown,
             "hop_distance": h.hop_distance, "segment_index": h.segment_index, "doc_id": h.doc_id,
             "doc_length_tokens": h.doc_length_tokens}
            for rank, h in enumerate(result.hits, start=1)
        ],
        "fusion": {"mode": result.mode, "rrf_k": RRF_K if rrf else None,
                   "weights": None if rrf else vars(result.weights)},
        "stats": result.stats,
        "meta": {"score_space": SCORE_SPACE_RRF if rrf else SCORE_SPACE_FUSED,
                 "score_merge_rule": "reciprocal_rank_fusion" if rrf else "weighted_linear",
                 **(profile_meta or {})},
    }
