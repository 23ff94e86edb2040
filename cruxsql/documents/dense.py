"""The dense lane: vector sidecars of sealed segments, the in-memory dense index, Crux's dense re-rank (tools/query.rs).

Every sealed segment `seg-…-{id}.jsonl` can have two sidecars written at seal time, both listed with
their BLAKE3 checksums in MANIFEST.json: `seg-…-{id}.ccxv` (one vector per chunk, Crux's layout) and
`seg-…-{id}.ccxp` (the pretty-printed semantic profile of the embedder that wrote them). A query uses
only the segments whose profile hash equals the configured embedder's; the others are reported as
skipped, as Crux's provider leaves out segments with another fingerprint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import blake3
import numpy as np

from ..embeddings import SemanticProfile, read_ccxv
from ..embeddings.vectors import encode_ccxv
from .bm25 import Bm25Hit

F32 = np.float32
BM25_SHARE = F32(0.7)
DENSE_SHARE = F32(0.3)
SCORE_SPACE_LEXICAL = "bm25_lexical"
SCORE_SPACE_DENSE_FUSED = "bm25_dense_fused"
MERGE_SINGLE = "single_score_space"
MERGE_WEIGHTED_LINEAR = "weighted_linear"


@dataclass(frozen=True)
class VectorSidecar:
    """The manifest's record of a segment's vectors (`.ccxv`) and their profile (`.ccxp`)."""

    file_name: str
    blake3: str
    profile_file_name: str
    profile_blake3: str
    profile_hash: str
    model: str
    dimensions: int

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "VectorSidecar":
        return cls(**raw)


def sidecar_names(segment_file_name: str) -> tuple[str, str]:
    stem = segment_file_name.rsplit(".", 1)[0]
    return f"{stem}.ccxv", f"{stem}.ccxp"


def sidecar_bytes(doc_ids: np.ndarray, vectors: np.ndarray, profile: SemanticProfile) -> tuple[bytes, bytes]:
    """The `.ccxv` and `.ccxp` file contents for these vectors."""
    return encode_ccxv(doc_ids, vectors), (json.dumps(profile.to_json(), indent=2) + "\n").encode("utf-8")


def describe_sidecar(segment_file_name: str, ccxv: bytes, ccxp: bytes, profile: SemanticProfile) -> VectorSidecar:
    vectors_name, profile_name = sidecar_names(segment_file_name)
    return VectorSidecar(vectors_name, blake3.blake3(ccxv).hexdigest(), profile_name, blake3.blake3(ccxp).hexdigest(),
                         profile.hash, profile.model, profile.dimensions)


@dataclass(frozen=True)
class Ranking:
    """Which scoring produced a hit list: Crux's `score_space` / `score_merge_rule` labels and the profile."""

    score_space: str = SCORE_SPACE_LEXICAL
    score_merge_rule: str = MERGE_SINGLE
    profile: Optional[SemanticProfile] = None
    dense_lane_active: bool = False
    segments_skipped: tuple[str, ...] = field(default_factory=tuple)


class DenseIndex:
    """Unit vectors of the chunks of one corpus snapshot, by global doc number (segment base + doc id)."""

    def __init__(self, total_docs: int, dimensions: int) -> None:
        self.total_docs = total_docs
        self.dimensions = dimensions
        self._parts: list[tuple[int, np.ndarray]] = []       # (global base, count × dims unit vectors)
        self.has_vector = np.zeros(total_docs, dtype=bool)

    def add_segment(self, base: int, path: Path) -> None:
        records = read_ccxv(path, mmap=True)
        if len(records) == 0:
            return
        vectors = np.asarray(records["vector"], dtype=F32)
        norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=F32))
        unit = np.divide(vectors, norms[:, None], out=np.zeros_like(vectors), where=norms[:, None] > 1e-12)
        doc_ids = np.asarray(records["doc_id"], dtype=np.int64)
        if not np.array_equal(doc_ids, np.arange(len(doc_ids))):
            dense = np.zeros((int(doc_ids.max()) + 1, vectors.shape[1]), dtype=F32)
            dense[doc_ids] = unit
            unit = dense
        self._parts.append((base, unit))
        self.has_vector[base + doc_ids] = True

    @property
    def empty(self) -> bool:
        return not self._parts

    def _unit_query(self, query: np.ndarray) -> Optional[np.ndarray]:
        norm = np.sqrt(np.dot(query, query), dtype=F32)
        if norm <= F32(1e-12) or len(query) != self.dimensions:
            return None
        return (query / norm).astype(F32)

    def scores_of(self, query: np.ndarray, gids: Sequence[int]) -> np.ndarray:
        """`scores(query)[gids]` without scoring the other documents (what a re-rank of a few hits needs)."""
        out = np.full(len(gids), np.nan, dtype=F32)
        unit = self._unit_query(query)
        if unit is None:
            return out
        wanted = np.asarray(gids, dtype=np.int64)
        parts = np.searchsorted([base for base, _ in self._parts], wanted, side="right") - 1
        for part in np.unique(parts[parts >= 0]).tolist():
            base, vectors = self._parts[part]
            rows = np.flatnonzero(parts == part)
            local = wanted[rows] - base
            keep = (local < len(vectors)) & self.has_vector[wanted[rows]]
            rows, local = rows[keep], local[keep]
            out[rows] = np.clip(np.einsum("ij,j->i", vectors[local], unit), F32(0.0), F32(1.0))
        return out

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Crux's CosineDenseProvider for every doc: dot of unit vectors clamped to [0, 1]; NaN without a vector."""
        out = np.full(self.total_docs, np.nan, dtype=F32)
        unit = self._unit_query(query)
        if unit is None:
            return out
        for base, vectors in self._parts:
            # einsum, not `@`: numpy's own single-threaded loop. BLAS's threaded matrix-vector product waits for
            # its worker threads, which on a busy machine costs milliseconds per query (median 0.29 ms vs 27-36 ms
            # for 5,183 × 384 with other jobs running; on an idle machine BLAS takes 0.06 ms).
            out[base:base + len(vectors)] = np.clip(np.einsum("ij,j->i", vectors, unit), F32(0.0), F32(1.0))
        out[~self.has_vector] = np.nan
        return out


def dense_rerank(hits: Sequence[Bm25Hit], dense: np.ndarray) -> list[Bm25Hit]:
    """Crux's re-rank (query.rs): `0.7·score/max_bm25 + 0.3·dense` in f32 (dense 0 without a vector), stable re-sort.

    `dense[i]` is hit i's clamped cosine, NaN when it has no vector.
    """
    if not hits:
        return []
    top = max(F32(0.0), max(F32(hit.score) for hit in hits))
    top = max(top, F32(1e-9))
    fused = []
    for hit, value in zip(hits, dense):
        cosine = F32(0.0) if np.isnan(value) else F32(value)
        score = BM25_SHARE * (F32(hit.score) / top) + DENSE_SHARE * cosine
        fused.append(replace(hit, score=float(score)))
    return sorted(fused, key=lambda hit: -hit.score)
