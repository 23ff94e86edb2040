"""The graph lane's graph, built from what cruxsql holds, and Crux's `apply_graph_boost` (its graph.rs).

Two kinds of evidence connect chunks:
- relation edges: a markdown link `[text](other.md)` in a chunk of one ingested document points at every
  chunk of the linked document (confidence 1.0);
- entity matches: a fact entity whose analyzed words all occur in the query is matched; a chunk that
  mentions matched entities (all of an entity's words occur in it) gets `overlap_count` = how many, with
  the highest confidence among those entities' facts.

Crux keys boosts by `frame_offset`, which in cruxsql is a byte offset inside one segment file and would
conflate chunks of different segments; here a chunk is keyed by (segment_index, doc_id).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional, Sequence
from urllib.parse import unquote

import apsw
import numpy as np

from .analyzer import analyze
from .bm25 import Bm25Corpus
from .postings import QueryPostings

ChunkKey = tuple[int, int]          # (segment_index, doc_id)

_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class GraphParams:
    entity_weight: float = 0.3
    relation_weight: float = 0.2


@dataclass(frozen=True)
class EntityMatch:
    chunk: ChunkKey
    overlap_count: int
    confidence: float


@dataclass(frozen=True)
class RelationEdge:
    src: ChunkKey
    dst: ChunkKey
    confidence: float


def document_links(document_id: str, text: str) -> list[str]:
    """Ingested-document ids a chunk's markdown links point at, resolved against its own document id."""
    targets: list[str] = []
    base = posixpath.dirname(document_id)
    for match in _LINK.finditer(text):
        target = unquote(match.group(1).split("#", 1)[0])
        if not target or _SCHEME.match(target) or target.startswith("/"):
            continue
        resolved = posixpath.normpath(posixpath.join(base, target))
        if resolved != document_id and not resolved.startswith("..") and resolved not in targets:
            targets.append(resolved)
    return targets


def graph_boosts(seeds: Iterable[ChunkKey], entity_matches: Sequence[EntityMatch],
                 relation_edges: Sequence[RelationEdge], params: GraphParams = GraphParams()
                 ) -> dict[ChunkKey, tuple[float, int]]:
    """Per chunk: (entity boost + relation boost, hop distance); hop 1 when only an edge from a seed reached it.

    Entity boost = entity_weight · overlap_count / max_overlap · confidence (the last match of a chunk
    wins); relation boost of an edge's destination = max over edges from a seed of relation_weight ·
    edge confidence.
    """
    if not entity_matches and not relation_edges:
        return {}
    max_overlap = max([m.overlap_count for m in entity_matches] + [1])
    entity: dict[ChunkKey, float] = {}
    for m in entity_matches:
        entity[m.chunk] = params.entity_weight * (m.overlap_count / max_overlap) * m.confidence
    seed_set = set(seeds)
    relation: dict[ChunkKey, float] = {}
    for edge in relation_edges:
        if edge.src in seed_set:
            relation[edge.dst] = max(relation.get(edge.dst, 0.0), params.relation_weight * edge.confidence)
    return {key: (entity.get(key, 0.0) + relation.get(key, 0.0), 0 if key in entity or key in seed_set else 1)
            for key in entity.keys() | relation.keys()}


def apply_graph_boost(hits: Sequence[tuple[ChunkKey, float]], entity_matches: Sequence[EntityMatch],
                      relation_edges: Sequence[RelationEdge], params: GraphParams = GraphParams()
                      ) -> list[tuple[ChunkKey, float]]:
    """Crux's `apply_graph_boost`: add each hit's boosts to its score (seeds = the first 10 hits), stable re-sort."""
    boosts = graph_boosts([key for key, _ in hits[:10]], entity_matches, relation_edges, params)
    if not boosts:
        return list(hits)
    boosted = [(key, score + boosts.get(key, (0.0, 0))[0]) for key, score in hits]
    return sorted(boosted, key=lambda item: -item[1])


class DocumentGraph:
    """One tenant's graph over the current corpus snapshot: fact entities and linked documents are its nodes."""

    def __init__(self, db: apsw.Connection, tenant: str, seq_to_index: Mapping[int, int],
                 lookup: Callable[[Sequence[str]], QueryPostings], corpus: Bm25Corpus) -> None:
        self._db, self._tenant, self._seq_to_index = db, tenant, seq_to_index
        self._lookup, self._corpus = lookup, corpus
        self._entity_rows: Optional[list[tuple[str, float]]] = None
        self._has_links = db.execute("SELECT 1 FROM document_links LIMIT 1").fetchone() is not None

    def _entities(self) -> list[tuple[str, float]]:
        """The tenant's live, non-private, non-reserved fact entities with their best confidence."""
        if self._entity_rows is None:
            self._entity_rows = list(self._db.execute(
                "SELECT entity, MAX(confidence) FROM live_facts WHERE tenant_hash = ? AND private = 0 "
                "AND substr(entity, 1, 2) != '__' GROUP BY entity", (self._tenant,)))
        return self._entity_rows

    def node_count(self) -> int:
        """Entities plus documents that link or are linked (the cold-start rule compares it with 100)."""
        if not self._has_links:
            return len(self._entities())
        linked = self._db.execute(
            "SELECT COUNT(*) FROM (SELECT c.document_id FROM document_links l CROSS JOIN document_chunks c "
            "USING (segment_seq, doc_id) WHERE c.tenant_id = ?1 UNION SELECT l.target_document_id "
            "FROM document_links l CROSS JOIN document_chunks c USING (segment_seq, doc_id) WHERE c.tenant_id = ?1)",
            (self._tenant,)).get
        return len(self._entities()) + linked

    def entity_matches(self, query: str) -> list[EntityMatch]:
        """Chunks of the tenant mentioning entities the query names, with how many and the best confidence."""
        words = set(analyze(query))
        matched = [(terms, confidence) for terms, confidence in
                   ((set(analyze(entity)), confidence) for entity, confidence in self._entities())
                   if terms and terms <= words]
        if not matched:
            return []
        postings = self._lookup(sorted(set().union(*(terms for terms, _ in matched))))
        gids_of: dict[str, set[int]] = {}
        bounds = postings.term_bounds.tolist()
        bases = self._corpus.bases
        gids = postings.doc_ids.astype(np.int64) + np.repeat(bases[postings.row_segments], postings.row_counts)
        for i, term in enumerate(postings.terms):
            gids_of[term] = set(gids[bounds[i]:bounds[i + 1]].tolist())
        mine = self._corpus.tenant_mask(self._tenant)
        overlap: dict[int, tuple[int, float]] = {}
        for terms, confidence in matched:
            chunks = set.intersection(*(gids_of.get(term, set()) for term in terms))
            for gid in chunks:
                if mine[gid]:
                    count, best = overlap.get(gid, (0, 0.0))
                    overlap[gid] = (count + 1, max(best, float(confidence)))
        out = []
        for gid in sorted(overlap):
            segment_index = int(np.searchsorted(bases, gid, side="right")) - 1
            out.append(EntityMatch((segment_index, gid - int(bases[segment_index])), *overlap[gid]))
        return out

    def relation_edges(self, seeds: Sequence[ChunkKey]) -> list[RelationEdge]:
        """Edges from each seed chunk to every chunk of the tenant's documents it links to."""
        if not self._has_links:
            return []
        index_to_seq = {index: seq for seq, index in self._seq_to_index.items()}
        edges = []
        for seed in seeds:
            rows = self._db.execute(
                # CROSS JOIN fixes the order: the seed's few links first, then their chunks by index (left
                # to itself, SQLite walks every chunk of the tenant: 2.5 ms per seed on SciFact).
                "SELECT c.segment_seq, c.doc_id FROM document_links l CROSS JOIN document_chunks c "
                "ON c.document_id = l.target_document_id AND c.tenant_id = ? "
                "WHERE l.segment_seq = ? AND l.doc_id = ? ORDER BY c.segment_seq, c.doc_id",
                (self._tenant, index_to_seq[seed[0]], seed[1]))
            edges += [RelationEdge(seed, (self._seq_to_index[seq], doc_id), 1.0) for seq, doc_id in rows
                      if seq in self._seq_to_index]
        return edges

    def boosts(self, query: str, seeds: Sequence[ChunkKey],
               params: GraphParams = GraphParams()) -> dict[ChunkKey, tuple[float, int]]:
        return graph_boosts(seeds, self.entity_matches(query), self.relation_edges(seeds), params)
