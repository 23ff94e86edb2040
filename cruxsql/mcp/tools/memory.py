"""Memory panel and freshness tools: memory_view, memory_freshness, memory_set_horizon, memory_reverify
(crux-mcp's tools/memory.rs, freshness.rs). Horizon changes and re-verifications are journaled (Crux loses them)."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal, Optional

from ...curation.memory_panel import panel_disabled
from ...recall import scope
from ...recall.freshness_report import is_reserved, memory_freshness as freshness_report
from ...recall.reverification import reverify_with_receipt
from ..answer_budget import longest_within
from ..call import Call
from ..registry import READ, WRITE, ToolError, ToolResult, reads, shape, tool, writes


@tool(kind=READ, hints=reads("View memory"), output=shape(facts="array", total_tokens="integer", returned="integer"))
def memory_view(call: Call, entity: Optional[str] = None, key: Optional[str] = None, top_k: int = 20,
                token_budget: int = 2000) -> ToolResult:
    """The memory panel: this agent's visible facts, newest first, with pins."""
    disabled = panel_disabled("memory_view")
    if disabled is not None:
        return ToolResult(disabled["content"][0]["text"])
    budget = call.budget(token_budget)
    result = call.recall.memory_view(entity, key, top_k, budget, tenant=call.tenant, agent=call.agent)

    def answer(n: int) -> ToolResult:
        payload = result.first(n).crux_payload()
        return ToolResult(payload["content"][0]["text"], payload["structuredContent"])
    # Crux counts each fact's `tokens` against the budget; the whole answer is cut further to fit it
    return answer(longest_within(len(result.facts), answer, budget))


@tool(kind=READ, hints=reads("Fact freshness"), output=shape(rows="array", policy="object", now="string"))
def memory_freshness(call: Call, entity: Optional[str] = None, key: Optional[str] = None, top_k: int = 20,
                     token_budget: int = 500) -> ToolResult:
    """Fresh or stale, oldest first: which facts need re-verifying (top_k at most 500)."""
    budget = call.budget(token_budget)
    report = freshness_report(call.store, tenant=call.tenant, agent=call.agent, entity=entity, key=key,
                              top_k=top_k, token_budget=budget)

    def answer(n: int) -> ToolResult:
        cut = replace(report, rows=report.rows[:n])
        return ToolResult(cut.text(), cut.structured())
    # Crux counts each row's JSON against the budget; the whole answer is cut further to fit it
    return answer(longest_within(len(report.rows), answer, budget))


def _target(call: Call, fact_id: str, action: str) -> Optional[str]:
    """The fact's visible entity, None when it is not found for this caller; reserved ones refused."""
    call.store.refresh()  # a fact another process (or a Crux daemon) just appended is found
    fact = call.visible_fact(fact_id)
    if fact is None:
        return None
    visible = scope.visible_entity(fact.entity, fact.private, call.agent)
    assert visible is not None  # visible_fact found it, so this caller sees it
    if is_reserved(visible):
        raise ToolError(f"cannot {action} reserved-prefix fact {fact_id}")
    return visible


@tool(kind=WRITE, hints=writes("Set a freshness horizon", destructive=False, idempotent=True),
      output=shape(fact_id="string", horizon_class="string", ok="boolean"))
def memory_set_horizon(call: Call, fact_id: str, horizon_class: Literal["volatile", "medium", "stable", "none"]
                       ) -> ToolResult:
    """Set a fact's freshness horizon (how fast it goes stale)."""
    call.require_agent("memory_set_horizon")
    if _target(call, fact_id, "set horizon on") is None:    # Crux: isError false
        raise ToolError(f"fact not found: {fact_id}")
    call.store.set_horizon(fact_id, horizon_class, tenant=call.tenant)
    return ToolResult(f"set horizon_class={horizon_class} on fact {fact_id}",
                      {"fact_id": fact_id, "horizon_class": horizon_class, "ok": True})


@tool(kind=WRITE, hints=writes("Re-verify a fact", destructive=False, idempotent=False),
      output=shape(fact_id="string", receipt_id="string", receipt_class="string", reverified_at="string"))
def memory_reverify(call: Call, fact_id: str) -> ToolResult:
    """Mark a fact re-verified now (resets its decay) and write a receipt."""
    agent = call.require_agent("memory_reverify")
    if _target(call, fact_id, "reverify") is None:          # Crux: isError false
        raise ToolError(f"fact not found: {fact_id}")
    done = reverify_with_receipt(call.store, fact_id, call.tenant, agent)
    return ToolResult(f"re-verified fact {fact_id} at {done.reverified_at} (receipt {done.receipt_id}, class=Reverify)",
                      {"fact_id": fact_id, "receipt_id": done.receipt_id, "receipt_class": "Reverify",
                       "reverified_at": done.reverified_at})
