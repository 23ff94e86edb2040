"""Relations between entities (cruxsql's own tools): relate, related. Stored as facts: see
cruxsql/recall/relations.py for the encoding."""

from __future__ import annotations

from typing import Optional

from ...recall import relations
from ..call import Call
from ..registry import READ, WRITE, ToolResult, reads, shape, tool, writes
from .facts import MAX_NAME_BYTES, _bounded


@tool(kind=WRITE, hints=writes("Relate two entities", destructive=False, idempotent=True),
      output=shape(fact_id="string", version="integer"))
def relate(call: Call, from_: str, relation: str, to: str) -> ToolResult:
    """Record that entity `from` has `relation` to entity `to` (e.g. payments-api uses postgres)."""
    for name, text in (("from", from_), ("relation", relation), ("to", to)):
        _bounded(name, text, MAX_NAME_BYTES)
    fact = relations.relate(call.store, from_, relation, to, tenant=call.tenant, agent=call.agent)
    return ToolResult(f"{from_} -[{relation}]-> {to} · {fact.fact_id}",
                      {"fact_id": fact.fact_id, "version": fact.version})


@tool(kind=READ, hints=reads("Related entities"),
      output=shape(entity="string", depth="integer", edges="array", left_out="integer"))
def related(call: Call, entity: str, depth: int = 1, token_budget: Optional[int] = None) -> ToolResult:
    """An entity's relations both ways, up to depth hops (at most 3): one `from -[relation]-> to` per line."""
    found = relations.related(call.store, entity, depth=depth, tenant=call.tenant, agent=call.agent,
                              token_budget=call.budget(token_budget))
    return ToolResult(found.text(), found.to_json())
