"""Fact embeddings in the view and Crux's dense store ranking (`0.6·cosine + 0.4·confidence`).

Crux embeds `"{entity} {key} {value}"` when a fact is stored and keeps the vectors in memory. cruxsql
keeps them in the view's `fact_embeddings` table per embedder profile: derived data, computed as facts
arrive by the background indexer (fact_indexer.py) where a server runs one, else the first time a dense
recall needs a fact (so a rebuilt view, or a journal another process appended, catches up on its own),
and removed by triggers when the fact is deleted, changed or erased. The entity embedded is the one its
reader sees: `<logical>` of an agent-private `__agent::<owner>::<logical>` fact.
"""

from __future__ import annotations

from typing import Sequence

import apsw
import numpy as np

from ..embeddings import Embedder
from ..facts.privacy import split_private_entity

F32 = np.float32
COSINE_SHARE = F32(0.6)
CONFIDENCE_SHARE = F32(0.4)


def fact_text(entity: str, key: str, value: str) -> str:
    return f"{entity} {key} {value}"


def vector_entity(entity: str) -> str:
    """The entity a fact's vector is made from: the logical one of an agent-private fact, else the stored one
    (recall_text's `coalesce(visible_entity, entity)`)."""
    split = split_private_entity(entity)
    return split[1] if split is not None else entity


def keep_vectors(db: apsw.Connection, profile: str, facts: Sequence[Sequence[str]], vectors: np.ndarray) -> None:
    """Store `vectors` (one per fact, `facts[i][0]` its id) in one short write transaction, for the facts
    still in the view and not deleted: one erased or deleted while it was being embedded gets none (its
    triggers ran before this transaction; no vector of erased text is left behind)."""
    with db:
        db.executemany(
            "INSERT OR REPLACE INTO fact_embeddings (fact_id, profile_hash, vector) SELECT ?, ?, ? "
            "WHERE EXISTS (SELECT 1 FROM facts WHERE fact_id = ? AND deleted = 0)",
            [(row[0], profile, vectors[i].astype("<f4").tobytes(), row[0]) for i, row in enumerate(facts)])


def fact_vectors(db: apsw.Connection, embedder: Embedder, facts: Sequence[tuple[str, str, str, str]]
                 ) -> dict[str, np.ndarray]:
    """Vectors of (fact_id, entity, key, value) rows; missing ones are embedded and kept in the view."""
    profile = embedder.semantic_profile().hash
    vectors: dict[str, np.ndarray] = {}
    ids = [row[0] for row in facts]
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        for fact_id, blob in db.execute(
                f"SELECT fact_id, vector FROM fact_embeddings WHERE profile_hash = ? AND fact_id IN "
                f"({','.join('?' * len(part))})", (profile, *part)):
            vectors[fact_id] = np.frombuffer(blob, dtype="<f4")
    missing = [row for row in facts if row[0] not in vectors]
    if missing:
        embedded = embedder.embed_batch([fact_text(vector_entity(row[1]), row[2], row[3]) for row in missing])
        keep_vectors(db, profile, missing, embedded)
        vectors.update({row[0]: embedded[i] for i, row in enumerate(missing)})
    return vectors


def dense_scores(query_vector: np.ndarray, vectors: Sequence[np.ndarray], confidences: Sequence[float]) -> list[float]:
    """Crux's store ranking score per fact: 0.6·cosine(query, fact) + 0.4·confidence, in f32."""
    q = np.asarray(query_vector, dtype=F32)
    q_norm = np.sqrt(np.dot(q, q), dtype=F32)
    out = []
    for vector, confidence in zip(vectors, confidences):
        denominator = q_norm * np.sqrt(np.dot(vector, vector), dtype=F32)
        cosine = F32(0.0) if len(vector) != len(q) or denominator < F32(1e-12) else F32(np.dot(q, vector)) / denominator
        out.append(float(COSINE_SHARE * cosine + CONFIDENCE_SHARE * F32(confidence)))
    return out
