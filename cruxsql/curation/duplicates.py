"""Near-duplicate facts: advisory review candidates, never a mutation (Crux `CORECRUXD_SEMANTIC_DEDUP`).

Crux flags high-cosine pairs (threshold 0.95) when an embedder is configured. cruxsql also finds
lexical near-duplicates without any embedder: live, non-private facts of one (tenant, entity), across
its keys, whose normalised values have a character-4-gram Jaccard similarity at or above the
threshold. MinHash signatures (18 hashes) are banded (6 bands of 3) for locality-sensitive hashing
inside each entity; every candidate pair is then verified with the exact Jaccard, so a reported
similarity is exact (a pair exactly at 0.8 becomes a candidate with probability
1 - (1 - 0.8^3)^6 = 98.7%; more above it).

`semantic_duplicates` is the hook for an embedder (`Embedder`: texts -> vectors): the same pairs,
by cosine similarity inside each entity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence, cast

import apsw
import numpy as np

from ..errors import InvalidInput
from . import shingles

LEXICAL_THRESHOLD = 0.8
SEMANTIC_THRESHOLD = 0.95
BANDS, ROWS = 6, 3
_CHUNK = 200_000
_STAR_ABOVE = 64   # a bucket bigger than this is paired star-wise with its first member

Embedder = Callable[[Sequence[str]], np.ndarray]
Progress = Optional[Callable[[int, int], None]]

_LIVE_SQL = ("SELECT entity, fact_id, key, value FROM facts WHERE tenant_hash = ? AND deleted = 0 "
             "AND superseded_by IS NULL AND private = 0")


@dataclass(frozen=True)
class DuplicatePair:
    entity: str
    fact_ids: tuple[str, str]       # sorted
    keys: tuple[str, str]
    values: tuple[str, str]
    similarity: float
    reason: str                     # "exact_normalised_duplicate", "lexical_near_duplicate", "semantic_near_duplicate"

    def to_dict(self) -> dict[str, Any]:
        return {"entity": self.entity, "reason": self.reason, "similarity": round(self.similarity, 4),
                "confidence": _confidence(self.reason, self.similarity), "fact_ids": list(self.fact_ids),
                "keys": list(self.keys), "values": list(self.values)}


def _confidence(reason: str, similarity: float) -> float:
    """How sure the pair is a redundant copy: 1.0 for equal normalised text; else the similarity,
    scaled down for lexical matches (shared wording is not shared meaning)."""
    if reason == "exact_normalised_duplicate":
        return 1.0
    return round(similarity * (0.9 if reason == "lexical_near_duplicate" else 1.0), 4)


def _check_threshold(threshold: float) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 < threshold <= 1.0:
        raise InvalidInput(f"threshold must be a number in (0, 1], got {threshold!r}")
    return float(threshold)


def _live_rows(db: apsw.Connection, tenant: str, entity: Optional[str]) -> list[tuple[str, str, str, str]]:
    sql, params = _LIVE_SQL, [tenant]
    if entity is not None:
        sql += " AND entity = ?"
        params.append(entity)
    return cast(list[tuple[str, str, str, str]], db.execute(sql, params).fetchall())   # TEXT NOT NULL columns


def lexical_duplicates(db: apsw.Connection, tenant: str = "default", threshold: float = LEXICAL_THRESHOLD,
                       entity: Optional[str] = None, progress: Progress = None) -> list[DuplicatePair]:
    """Pairs of live facts of one entity with normalised-text Jaccard >= threshold, sorted by
    (entity, fact ids). `progress(done, total)` is called as signature chunks and bands finish."""
    threshold = _check_threshold(threshold)
    rows = _live_rows(db, tenant, entity)
    entity_ids: dict[str, int] = {}
    docs: list[tuple[int, tuple[str, str, str, str], str]] = []
    counts: dict[str, int] = {}
    for r in rows:
        counts[r[0]] = counts.get(r[0], 0) + 1
    for r in rows:
        if counts[r[0]] < 2:
            continue
        text = shingles.normalise(r[3])
        if text:
            docs.append((entity_ids.setdefault(r[0], len(entity_ids)), r, text))
    pairs = set(_candidate_pairs(docs, progress))
    out = []
    cache: dict[int, set[bytes]] = {}
    for i, j in pairs:
        a, b = docs[i], docs[j]
        if a[2] == b[2]:
            sim, reason = 1.0, "exact_normalised_duplicate"
        else:
            sa = cache.setdefault(i, shingles.shingle_set(a[2]))
            sb = cache.setdefault(j, shingles.shingle_set(b[2]))
            sim, reason = shingles.jaccard(sa, sb), "lexical_near_duplicate"
        if sim >= threshold:
            out.append(_pair(a[1], b[1], sim, reason))
    return sorted(out, key=lambda p: (p.entity, p.fact_ids))


def _pair(a: tuple, b: tuple, sim: float, reason: str) -> DuplicatePair:
    (ea, fa, ka, va), (_, fb, kb, vb) = sorted((a, b), key=lambda r: r[1])
    return DuplicatePair(ea, (fa, fb), (ka, kb), (va, vb), sim, reason)


def _candidate_pairs(docs: list[tuple[int, tuple, str]], progress: Progress = None) -> Iterator[tuple[int, int]]:
    """Index pairs sharing an (entity, band) bucket in some band."""
    if len(docs) < 2:
        return
    chunks = (len(docs) + _CHUNK - 1) // _CHUNK
    tick = progress or (lambda done, total: None)
    a, b = shingles.hash_params(BANDS * ROWS)
    group = np.fromiter((d[0] for d in docs), dtype=np.uint64, count=len(docs))
    keys = np.empty((len(docs), BANDS), dtype=np.uint64)
    for start in range(0, len(docs), _CHUNK):
        sig = shingles.minhash_signatures([d[2] for d in docs[start:start + _CHUNK]], a, b)
        for band in range(BANDS):
            k = group[start:start + _CHUNK] * np.uint64(0x9E3779B97F4A7C15)
            for r in range(ROWS):
                k = (k ^ sig[:, band * ROWS + r].astype(np.uint64)) * np.uint64(0xBF58476D1CE4E5B9)
            keys[start:start + len(sig), band] = k
        tick(start // _CHUNK + 1, chunks + BANDS)
    for band in range(BANDS):
        col = keys[:, band]
        order = np.argsort(col, kind="stable")
        sorted_keys = col[order]
        cuts = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
        bounds = np.concatenate(([0], cuts, [len(col)]))
        sizes = np.diff(bounds)
        for s, n in zip(bounds[:-1][sizes > 1], sizes[sizes > 1]):
            members = sorted(order[s:s + n].tolist())
            if n > _STAR_ABOVE:
                yield from ((members[0], m) for m in members[1:])
            else:
                yield from ((x, y) for k, x in enumerate(members) for y in members[k + 1:])
        tick(chunks + band + 1, chunks + BANDS)


def semantic_duplicates(db: apsw.Connection, embed: Embedder, tenant: str = "default",
                        threshold: float = SEMANTIC_THRESHOLD, entity: Optional[str] = None) -> list[DuplicatePair]:
    """Pairs of live facts of one entity whose embeddings have cosine >= threshold (Crux's rule,
    with an embedder from the caller)."""
    threshold = _check_threshold(threshold)
    groups: dict[str, list[tuple]] = {}
    for r in _live_rows(db, tenant, entity):
        groups.setdefault(r[0], []).append(r)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        vectors = np.asarray(embed([m[3] for m in members]), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = vectors / np.where(norms == 0, 1, norms)
        cos = unit @ unit.T
        for i, j in zip(*np.nonzero(np.triu(cos >= threshold, k=1))):
            out.append(_pair(members[i], members[j], float(cos[i, j]), "semantic_near_duplicate"))
    return sorted(out, key=lambda p: (p.entity, p.fact_ids))
