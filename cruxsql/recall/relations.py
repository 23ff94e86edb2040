"""Relations between entities, stored as ordinary facts: `from -relation-> to` is the fact
(`from`, `relation:<relation>:<to>`, `to`), the encoding `import mcp-memory` and `export facts --format
mcp-memory` already use. Being facts, relations are journaled, erased, held, retained, exported and
versioned like any other: relating the same triple again stores its next version (nothing duplicated),
`delete_fact` on its id removes it. The value repeats the target so incoming edges are found by the view's
partial index on it (migrations/0045_relation_targets.sql); outgoing ones by the entity index.

`related(entity, depth)` walks both directions, breadth first, up to three hops, in what the caller can
see: the tenant's live relation facts, shared or the caller's own private ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..errors import InvalidInput
from ..facts.codec import Fact
from ..facts.store import Store
from . import scope
from .tokens import estimate_tokens, estimate_tokens_str

PREFIX = "relation:"
# The relation facts, as the partial index facts_relation_target states it (a query names it verbatim for
# SQLite to use that index; ';' follows ':' in code-point order).
RELATION_KEYS = "key >= 'relation:' AND key < 'relation;'"
MAX_DEPTH = 3
MAX_EDGES = 500


@dataclass(frozen=True)
class Edge:
    source: str
    relation: str
    target: str
    fact_id: str
    hop: int

    def line(self) -> str:
        return f"{self.source} -[{self.relation}]-> {self.target} · {self.fact_id}"

    def to_json(self) -> dict[str, Any]:
        return {"from": self.source, "relation": self.relation, "to": self.target, "fact_id": self.fact_id,
                "hop": self.hop}


def relation_key(relation: str, target: str) -> str:
    if not relation.strip() or ":" in relation:
        raise InvalidInput(f"relation must be a non-empty name without ':', got {relation!r}")
    if not target.strip():
        raise InvalidInput("to must name an entity")
    return f"{PREFIX}{relation}:{target}"


def relate(store: Store, source: str, relation: str, target: str, *, tenant: str = "default",
           agent: Optional[str] = None) -> Fact:
    """Store `source -relation-> target` (its next version when it exists)."""
    return store.store(source, relation_key(relation, target), target, tenant=tenant, actor=agent, agent=agent)


@dataclass
class Neighbourhood:
    entity: str
    depth: int
    edges: list[Edge]
    left_out: int

    def text(self) -> str:
        if not self.edges:
            return f"no relations of {self.entity} (within {self.depth} hop(s))"
        more = [f"+{self.left_out} more (a smaller depth, or a larger token_budget)"] if self.left_out else []
        return "\n".join([e.line() for e in self.edges] + more)

    def to_json(self) -> dict[str, Any]:
        return {"entity": self.entity, "depth": self.depth, "edges": [e.to_json() for e in self.edges],
                "left_out": self.left_out}


def related(store: Store, entity: str, *, depth: int = 1, tenant: Optional[str] = None,
            agent: Optional[str] = None, token_budget: Optional[int] = None) -> Neighbourhood:
    """The typed neighbourhood of `entity`: every visible relation within `depth` hops, both directions,
    nearest first; past `token_budget` (of the text) the rest is counted in `left_out`."""
    if not 1 <= depth <= MAX_DEPTH:
        raise InvalidInput(f"depth must be 1 to {MAX_DEPTH}, got {depth}")
    store.refresh()
    found = _walk(store, entity, depth, scope.normalize_tenant(tenant), scope.normalize_agent(agent))
    kept = _within_budget(found, token_budget)
    return Neighbourhood(entity, depth, kept, len(found) - len(kept))


def _walk(store: Store, entity: str, depth: int, tenant: str, agent: Optional[str]) -> list[Edge]:
    seen_facts: set[str] = set()
    reached, frontier, edges = {entity}, [entity], list[Edge]()
    for hop in range(1, depth + 1):
        following: list[str] = []
        for edge in _edges_of(store, frontier, tenant, agent, hop):
            if edge.fact_id in seen_facts or len(edges) >= MAX_EDGES:
                continue
            seen_facts.add(edge.fact_id)
            edges.append(edge)
            for end in (edge.source, edge.target):
                if end not in reached:
                    reached.add(end)
                    following.append(end)
        frontier = following
    return edges


def _edges_of(store: Store, names: list[str], tenant: str, agent: Optional[str], hop: int) -> list[Edge]:
    """The visible live relation facts leaving or reaching any of `names`."""
    if not names:
        return []
    stored = names + ([scope.owner_entity(agent, n) for n in names] if agent else [])
    marks = ",".join("?" * len(stored))
    rows = store.db.execute(
        f"SELECT fact_id, entity, key, value, private FROM facts WHERE {RELATION_KEYS} AND tenant_hash = ? "
        f"AND deleted = 0 AND superseded_by IS NULL AND (entity IN ({marks}) OR value IN ({','.join('?' * len(names))})) "
        "ORDER BY seq", (tenant, *stored, *names))
    edges = []
    for fact_id, stored_entity, key, value, private in rows:
        source = scope.visible_entity(stored_entity, bool(private), agent)
        parts = key.split(":", 2)
        if source is not None and len(parts) == 3:
            edges.append(Edge(source, parts[1], value, fact_id, hop))
    return edges


def _within_budget(edges: list[Edge], token_budget: Optional[int]) -> list[Edge]:
    """The nearest edges whose text and structured form each fit `token_budget` (the first always comes)."""
    if token_budget is None:
        return edges
    kept: list[Edge] = []
    used = estimate_tokens({"entity": "", "depth": 0, "edges": [], "left_out": 0})
    for edge in edges:
        used += max(estimate_tokens_str(edge.line()), estimate_tokens(edge.to_json())) + 1
        if used > token_budget and kept:
            break
        kept.append(edge)
    return kept
