"""Relevance-ranked recall and batch writes for agents: recall, store_facts (cruxsql's own tools, beside
Crux's query_facts and store_fact)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict

from ...facts import time_phrases
from ...facts.store import StoreRequest
from ...recall.freshness import parse_freshness_horizon
from ...recall import relations
from ...recall.relevance import DEFAULT_BUDGET, shared_embedder
from ...recall.tokens import estimate_tokens_str
from ..call import Call
from ..registry import READ, WRITE, ToolError, ToolResult, frame_tokens, reads, tool, writes
from .facts import MAX_NAME_BYTES, MAX_VALUE_BYTES, HorizonClass, _bounded

MAX_BATCH = 1000

STORE_FACTS_OUTPUT = {"type": "object", "properties": {
    "stored": {"type": "integer"}, "fact_ids": {"type": "array", "items": {"type": "string"}}},
    "required": ["stored", "fact_ids"]}


class FactInput(BaseModel):
    """One fact of a `store_facts` batch."""

    model_config = ConfigDict(extra="forbid", strict=True)
    entity: str
    key: str
    value: str
    confidence: float = 1.0
    private: bool = False
    horizon_class: Optional[HorizonClass] = None
    freshness_horizon: Optional[str] = None
    source_receipt: Optional[str] = None


@tool(kind=READ, hints=reads("Recall facts"), core=True)
def recall(call: Call, query: str, entity: Optional[str] = None, entity_prefix: Optional[str] = None,
           key: Optional[str] = None, actor: Optional[str] = None, stored_after: Optional[str] = None,
           stored_before: Optional[str] = None, as_of: Optional[str] = None, known_at: Optional[str] = None,
           top_k: int = 10, offset: int = 0, token_budget: Optional[int] = None,
           fusion: Literal["auto", "bm25", "rrf", "weighted"] = "auto", explain: bool = False,
           ids: bool = False, time_zone: Optional[str] = None, follow_relations: bool = False) -> ToolResult:
    """Answer a question from memory: the most relevant facts, best first, one `entity · key: value` line
    each; prefer it to query_facts for questions. "phrase", -word; `+N more (offset=K)` pages; ids=true
    ends each line with its age and fact id (for delete_fact, memory_edit, memory_pin). Times: RFC 3339,
    2026-11-03, or yesterday, last week, 3 days ago, since monday (in time_zone, else the server's).
    follow_relations=true adds the found entities' relations (one hop)."""
    # text only, budgeted as a whole (the MCP result around it counted): structured content would repeat it
    times = time_phrases.resolve_all({"stored_after": stored_after, "stored_before": stored_before,
                                      "as_of": as_of, "known_at": known_at}, zone=time_zone)
    footer = time_phrases.echo_line(times)       # what a phrase was read as, said back under the answer
    budget = call.budget(token_budget)
    hop = (budget if budget is not None else DEFAULT_BUDGET) // 4 if follow_relations else 0
    result = call.recall.search(
        query, entity=entity, entity_prefix=entity_prefix, key=key, actor=actor, tenant=call.tenant,
        agent=call.agent, **{name: r.ns for name, r in times.items()},
        top_k=top_k, offset=offset, token_budget=budget, fusion=fusion,
        embedder=None if fusion == "bm25" else shared_embedder(call.recall), explain=explain, ids=ids,
        reserve=frame_tokens() + (estimate_tokens_str(footer) + 1 if footer else 0) + hop)
    lines = [result.answer()] + (_one_hop(call, [h.entity for h in result.hits], hop) if hop else [])
    return ToolResult("\n".join(lines + ([footer] if footer else [])))


def _one_hop(call: Call, entities: list[str], budget: int) -> list[str]:
    """The relations of the answer's entities (one hop, nearest first), within `budget` tokens."""
    lines: list[str] = []
    seen: set[str] = set()
    for entity in dict.fromkeys(entities):
        for edge in relations.related(call.store, entity, tenant=call.tenant, agent=call.agent).edges:
            if edge.fact_id in seen:
                continue
            line = f"related: {edge.line()}"
            budget -= estimate_tokens_str(line) + 1
            if budget < 0:
                return lines
            seen.add(edge.fact_id)
            lines.append(line)
    return lines


@tool(kind=WRITE, hints=writes("Store many facts", destructive=False, idempotent=False), core=True,
      output=STORE_FACTS_OUTPUT)
def store_facts(call: Call, facts: list[FactInput], idempotency_key: Optional[str] = None) -> ToolResult:
    """Store many facts in one write (at most 1000); each new value for an entity and key supersedes the old
    (repeats of one entity and key chain in order). idempotency_key: a retry with the same key returns the
    first result and stores nothing again."""
    if not facts:
        raise ToolError("store_facts needs at least one fact")
    if len(facts) > MAX_BATCH:
        raise ToolError(f"store_facts takes at most {MAX_BATCH} facts per call, got {len(facts)}")
    requests: list[StoreRequest] = []
    for i, fact in enumerate(facts):
        for name, limit in (("entity", MAX_NAME_BYTES), ("key", MAX_NAME_BYTES), ("value", MAX_VALUE_BYTES)):
            _bounded(f"facts[{i}].{name}", getattr(fact, name), limit)
        if fact.private and call.agent is None:
            raise ToolError("private facts require an authenticated agent identity")
        horizon = fact.horizon_class if fact.horizon_class is not None else (
            parse_freshness_horizon(fact.freshness_horizon) if fact.freshness_horizon is not None else None)
        requests.append(StoreRequest(fact.entity, fact.key, fact.value, call.tenant, fact.source_receipt,
                                     fact.confidence, fact.private, horizon, call.agent, call.agent))
    stored = call.store.store_batch(requests, idempotency_key=idempotency_key)
    ids = [f.fact_id for f in stored]
    text = f"stored {len(ids)} fact(s) in one batch" + (f": {ids[0]} … {ids[-1]}" if len(ids) > 1 else f": {ids[0]}")
    return ToolResult(text, {"stored": len(ids), "fact_ids": ids})
