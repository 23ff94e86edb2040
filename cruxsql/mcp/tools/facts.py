"""Fact tools: store_fact, query_facts, get_bootstrap, delete_fact, list_entities (crux-mcp/src/tools/facts.rs)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Literal, Optional

from ...accounting.holdout import pretty_json
from ...errors import Conflict
from ...facts.privacy import check_supersedes_target
from ...recall import crc_v1
from ...recall import explain as recall_explain
from ...recall.entities import entities_text, list_entities as visible_entities
from ...recall.freshness import parse_freshness_horizon
from ...recall.facade import QueryResult
from ...recall.tokens import compact_json
from ..arguments import Contract
from ..answer_budget import longest_within, wire_tokens
from ..call import Call
from ..registry import READ, WRITE, ToolError, ToolResult, reads, shape, tool, writes

HorizonClass = Literal["volatile", "medium", "stable", "none"]
MAX_VALUE_BYTES = 1024 * 1024
MAX_NAME_BYTES = 4096


def _bounded(name: str, text: str, limit: int) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ToolError(f"`{name}` is {size} bytes; the limit is {limit}")


@tool(kind=WRITE, hints=writes("Store a fact", destructive=False, idempotent=False), core=True,
      output=shape(fact_id="string", entity="string", key="string", version="integer",
                   superseded_fact_ids="array"))
def store_fact(call: Call, entity: str, key: str, value: str, source_receipt: Optional[str] = None,
               confidence: float = 1.0, private: bool = False, horizon_class: Optional[HorizonClass] = None,
               freshness_horizon: Optional[str] = None, supersedes: Optional[list[str]] = None,
               idempotency_key: Optional[str] = None) -> ToolResult:
    """Store a fact (entity, key, value); a new value for the same entity and key supersedes the old one.
    private=true keeps it visible to this agent only. idempotency_key: a retry with the same key returns
    the first call's result and stores nothing again."""
    _bounded("entity", entity, MAX_NAME_BYTES)
    _bounded("key", key, MAX_NAME_BYTES)
    _bounded("value", value, MAX_VALUE_BYTES)
    horizon = horizon_class if horizon_class is not None else (
        parse_freshness_horizon(freshness_horizon) if freshness_horizon is not None else None)
    if private and call.agent is None:
        raise ToolError("private facts require an authenticated agent identity")
    refs = list(dict.fromkeys(supersedes or []))
    invalid = []
    for ref in refs:
        target = call.visible_fact(ref)
        if target is None:
            invalid.append(ref)
        else:
            check_supersedes_target(ref, target.entity)     # the store's guard, checked before storing
    if invalid:
        raise ToolError(f"one or more supersedes fact_ids do not exist or are not visible to you: {', '.join(invalid)}")
    fact = call.store.store(entity, key, value, tenant=call.tenant, confidence=confidence,
                            source_receipt=source_receipt, private=private, horizon_class=horizon, actor=call.agent,
                            agent=call.agent, idempotency_key=idempotency_key)
    for ref in refs:
        if call.store.get(ref).superseded_by != fact.fact_id:  # (a keyed retry: done the first time)
            call.store.supersede(ref, fact.fact_id, tenant=call.tenant)
    text = f"stored fact {fact.fact_id} (entity={entity}, key={key}"
    if fact.supersedes:
        text += f", supersedes={fact.supersedes}"
    text += f", version={fact.version}"
    if refs:
        text += f", retired={','.join(refs)}"
    return ToolResult(text + ")", {"fact_id": fact.fact_id, "entity": entity, "key": key, "version": fact.version,
                                   "superseded_fact_ids": refs})


@tool(kind=READ, hints=reads("Query facts"), core=True, holdout=True,
      output=shape(rows="array", crc_v1="object", pointers="array",
                   left_out="integer", filtered_below_threshold="integer",
                   explain="object"))
def query_facts(call: Call, query: Optional[str] = None, entity: Optional[str] = None, top_k: int = 10,
                token_budget: Optional[int] = None, include_superseded: bool = False, as_of: Optional[str] = None,
                min_effective_confidence: Optional[float] = None, contract: Contract = None,
                explain: bool = False) -> ToolResult:
    """Recall facts: any query word matching a value, key or entity; ranked by freshness-decayed confidence.
    A token_budget returns the best in full and the rest as pointers; explain says why."""
    budget = call.budget(token_budget)
    result = call.recall.query_facts(
        query, entity=entity, tenant=call.tenant, agent=call.agent, top_k=top_k,
        token_budget=budget, min_effective_confidence=min_effective_confidence, as_of=as_of,
        include_superseded=include_superseded, contract=contract, shaped=not call.control)
    why = recall_explain.explain(call.recall, result, query, tenant=call.tenant, agent=call.agent, entity=entity,
                                 as_of=result.as_of, include_superseded=include_superseded) if explain else None

    def answer(shaped: QueryResult) -> ToolResult:
        payload = shaped.crux_payload(budgeted=not call.control)
        text = payload["content"][0]["text"]
        if shaped.crc_v1 is not None:
            text = pretty_json(shaped.crc_v1) if call.control else compact_json(shaped.crc_v1)
        structured = payload["structuredContent"]
        if why is not None:
            shown = _explained(why, shaped.emitted_ids(), len(result.rows))
            structured = {**structured, "explain": shown}
            text = "\n".join([text, *recall_explain.explain_lines(shown), recall_explain.left_out_line(shown)])
        return ToolResult(text, structured, payload=shaped.crc_v1, sample=crc_v1.enabled(contract))

    if budget is None or call.control or (result.crc_v1 is None and result.compact is None):
        return answer(result)       # Crux's answer, the legacy contract's or the control arm's
    return answer(_whole_within(result, lambda b, needs=None: answer(result.reshaped(b, needs)), budget))


def _explained(why: dict, emitted: list[str], rows: int) -> dict:
    """The explanation of the rows an answer cut to its budget still carries; the others count as left out."""
    left_out = {**why["left_out"], "over_budget_or_top_k": why["left_out"].get("over_budget_or_top_k", 0)
                + rows - len(emitted)}
    return {**why, "rows": why["rows"][:len(emitted)], "left_out": {k: n for k, n in left_out.items() if n}}


def _whole_within(result: QueryResult, answer: Callable[..., ToolResult], budget: int) -> QueryResult:
    """`result` reshaped so its whole MCP answer (text, structured content, frame) fits `budget`: the
    envelope when its least answer fits, cut to the largest text budget that fits; else compact lines
    naming what the least envelope's whole answer takes, so asking again with that figure gives it.
    Floor: one fact line (its value cut) and the footer."""
    least = result.least_envelope_tokens()
    needs = wire_tokens(answer(least))
    if needs <= budget:
        b = least - 1 + longest_within(budget - least + 1, lambda n: answer(least - 1 + n), budget)
        return result.reshaped(b)
    b = longest_within(min(budget, needs - 1), lambda n: answer(n, needs), budget)
    return result.reshaped(b, needs)


@tool(kind=READ, hints=reads("Session bootstrap"), core=True)
def get_bootstrap(call: Call, topic: Optional[str] = None, query: Optional[str] = None,
                  token_budget: Optional[int] = None) -> ToolResult:
    """Bootstrap knowledge for a topic (docs, patterns, errors, tool-output) to read at session start."""
    budget = call.budget(token_budget)
    result = call.recall.get_bootstrap(topic, query, budget, tenant=call.tenant, agent=call.agent)
    if budget is None:
        return ToolResult(result.text())

    def answer(n: int) -> ToolResult:
        return ToolResult(replace(result, facts=result.facts[:n]).text())
    # Crux counts each fact's value tokens against the budget; the whole answer is cut further to fit it
    return answer(longest_within(len(result.facts), answer, budget))


@tool(kind=WRITE, hints=writes("Delete a fact", destructive=True, idempotent=True))
def delete_fact(call: Call, fact_id: str, idempotency_key: Optional[str] = None) -> ToolResult:
    """Soft-delete one fact by id. idempotency_key: a retry with the same key reports the first
    result and appends nothing."""
    call.store.refresh()  # a fact another process (or a Crux daemon) just appended is found
    if call.visible_fact(fact_id, include_deleted=idempotency_key is not None) is None:
        raise ToolError(f"fact not found: {fact_id}")   # Crux answers this with isError false: the agent believed it
    try:
        call.store.delete(fact_id, tenant=call.tenant, idempotency_key=idempotency_key, agent=call.agent)
    except Conflict as exc:
        raise ToolError(str(exc)) from None
    return ToolResult(f"deleted fact {fact_id}")


@tool(kind=READ, hints=reads("List entities"))
def list_entities(call: Call) -> ToolResult:
    """The entity names this agent can see."""
    return ToolResult(entities_text(visible_entities(call.store, call.tenant, call.agent)))
