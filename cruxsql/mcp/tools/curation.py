"""Curation tools: contradictions, consolidation and its undo, the memory panel's edit / pin / history /
acknowledge, scoped forgetting, and `fact_history` (crux-mcp's tools/: memory, memory_use, forget, consolidation).

The logic and Crux's payloads are `cruxsql/curation/`'s; a tool here maps arguments, passes the
connection's agent and tenant, and catches the store up with other processes before it reads.
Crux's top-level result keys (`memory_forget`, `memory_acknowledge_use`) become the structured
content, as for the accounting tools. `memory_consolidate_undo` is cruxsql's: Crux has no MCP undo.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import WithJsonSchema

from ...curation import consolidation as cons
from ...curation.contradictions import memory_contradictions as contradictions_payload
from ...curation.contradictions import require_consolidation_feature
from ...curation.disagreements import REASONS as DISAGREEMENT_REASONS
from ...curation.disagreements import memory_disagreements as disagreements_payload
from ...curation.forget import SCOPE_TYPES
from ...curation.forget import memory_forget as forget_payload
from ...curation.forget import memory_forget_dry_run as forget_dry_run_payload
from ...curation.memory_panel import AckBuffer, chrono_display
from ...curation.memory_panel import memory_acknowledge_use as acknowledge_payload
from ...curation.memory_panel import memory_edit as edit_payload
from ...curation.memory_panel import memory_history as history_payload
from ...curation.memory_panel import memory_pin as pin_payload
from ...errors import CAPABILITY_DENIED, ToolError
from ...governance import legal_holds
from ...recall import scope as agent_scope
from ..answer_budget import longest_within
from ..call import Call
from ..registry import READ, WRITE, ToolResult, reads, shape, tool, writes
from .facts import MAX_NAME_BYTES, MAX_VALUE_BYTES, HorizonClass, _bounded

Intent = Literal["answer", "decision", "tool_call", "implicit"]
DisagreementReason = Literal[DISAGREEMENT_REASONS]  # type: ignore[valid-type]
# Validated by `ForgetScope.parse` (Crux's error texts); the schema tells the agent the five types.
ForgetScope = Annotated[dict[str, Any], WithJsonSchema({
    "type": "object", "required": ["type", "value"],
    "properties": {"type": {"type": "string", "enum": list(SCOPE_TYPES)}, "value": {"type": "string"}}})]

# Crux's pending-acknowledgement buffer is one per process keyed by turn; one per identity here, so one
# agent's turn ids never replace another's.
_ACKS: dict[tuple[str, str], AckBuffer] = {}


def _answer(payload: dict[str, Any]) -> ToolResult:
    """A curation payload as a tool result: its text, and its structured content or else its
    top-level keys."""
    extra = {k: v for k, v in payload.items() if k not in ("content", "isError")}
    return ToolResult(payload["content"][0]["text"], extra.get("structuredContent", extra or None))


@tool(kind=READ, hints=reads("Find contradicting facts"),
      output=shape(candidates="array", count="integer", limit="integer", dry_run="boolean"))
def memory_contradictions(call: Call, limit: int = 50, token_budget: int = 500) -> ToolResult:
    """Live facts sharing an entity and key with opposite polarity (yes/no, up/down); read-only."""
    call.store.refresh()
    budget = call.budget(token_budget)
    return _rows_within(contradictions_payload(call.store.db, call.tenant, limit, budget), "candidates", budget)


def _rows_within(payload: dict[str, Any], rows_key: str, budget: Optional[int]) -> ToolResult:
    """Crux's payload with its structured rows cut to the leading ones whose whole answer fits `budget`
    (the first always); its counts and text stay Crux's, about every row it selected."""
    if budget is None:
        return _answer(payload)
    structured = payload["structuredContent"]
    rows = structured[rows_key]

    def answer(n: int) -> ToolResult:
        return _answer({**payload, "structuredContent": {**structured, rows_key: rows[:n]}})
    return answer(longest_within(len(rows), answer, budget))


@tool(kind=READ, hints=reads("Find disagreeing facts"),
      output=shape(findings="array", pointers="array", count="integer", left_out="integer"))
def memory_disagreements(call: Call, reasons: Optional[list[DisagreementReason]] = None, limit: int = 50,
                         token_budget: int = 500) -> ToolResult:
    """Disagreements Crux's detector misses: numeric, phrase polarity, actor flip-flops, with evidence."""
    call.store.refresh()
    return _answer(disagreements_payload(call.store.db, call.tenant, call.budget(token_budget) or 0, limit,
                                         set(reasons) if reasons else None))


@tool(kind=WRITE, hints=writes("Consolidate facts", destructive=True, idempotent=False),
      output=shape(status="string", receipt="object"))
def memory_consolidate(call: Call, entity: str, key: str, canonical_value: str, target_fact_ids: list[str],
                       protected_fact_ids: Optional[list[str]] = None, confidence: float = 1.0,
                       protected_confidence_floor: float = 0.99, consolidation_id: Optional[str] = None,
                       horizon_class: Optional[HorizonClass] = None) -> ToolResult:
    """Replace the live versions of entity/key with one canonical fact (undo: memory_consolidate_undo)."""
    _bounded("entity", entity, MAX_NAME_BYTES)
    _bounded("key", key, MAX_NAME_BYTES)
    _bounded("canonical_value", canonical_value, MAX_VALUE_BYTES)
    arguments = {"entity": entity, "key": key, "canonical_value": canonical_value, "target_fact_ids": target_fact_ids,
                 "protected_fact_ids": protected_fact_ids, "confidence": confidence,
                 "protected_confidence_floor": protected_confidence_floor, "consolidation_id": consolidation_id,
                 "horizon_class": horizon_class}
    return _answer(cons.memory_consolidate(call.store, {k: v for k, v in arguments.items() if v is not None},
                                           agent=call.agent, tenant=call.tenant))


@tool(kind=WRITE, hints=writes("Undo a consolidation", destructive=True, idempotent=False),
      output=shape(status="string", canonical_fact_id="string", restored_fact_ids="array"))
def memory_consolidate_undo(call: Call, canonical_fact_id: str, source_fact_ids: list[str]) -> ToolResult:
    """Undo a consolidation: its source facts live again, its canonical deleted."""
    require_consolidation_feature()
    if not call.agent:
        raise ToolError("memory_consolidate_undo requires an authenticated passport (anonymous calls rejected)",
                        {"tool": "memory_consolidate_undo", "requires_passport": True}, code=CAPABILITY_DENIED)
    try:
        report = cons.consolidate_undo_v1(call.store, canonical_fact_id, source_fact_ids, call.tenant,
                                          cons.agent_viewer(call.agent))
    except cons.ConsolidationError as exc:
        raise ToolError(str(exc), exc.data(), code=exc.code) from exc
    if report["status"] == "already_undone":
        return ToolResult(f"consolidation {canonical_fact_id} was already undone; nothing written", report)
    return ToolResult(f"undid consolidation {canonical_fact_id}: canonical deleted, "
                      f"{len(report['restored_fact_ids'])} source fact(s) live again", report)


@tool(kind=WRITE, hints=writes("Edit a fact", destructive=False, idempotent=False),
      output=shape(old_fact_id="string", new_fact="object", reason="string?"))
def memory_edit(call: Call, fact_id: str, new_value: str, reason: Optional[str] = None) -> ToolResult:
    """Store new_value as the next version of a fact, keeping its pin."""
    _bounded("new_value", new_value, MAX_VALUE_BYTES)
    call.store.refresh()
    return _answer(edit_payload(call.store, fact_id, new_value, reason, agent=call.agent, tenant=call.tenant,
                                actor=call.agent))


@tool(kind=WRITE, hints=writes("Pin or unpin a fact", destructive=False, idempotent=True),
      output=shape(fact_id="string", pinned="boolean"))
def memory_pin(call: Call, fact_id: str, pinned: bool = True) -> ToolResult:
    """Pin or unpin a fact for this agent (forgets skip pinned facts)."""
    call.store.refresh()
    return _answer(pin_payload(call.store, fact_id, pinned, agent=call.agent, tenant=call.tenant))


@tool(kind=READ, hints=reads("Fact history"), output=shape(versions="array"))
def memory_history(call: Call, entity: Optional[str] = None, key: Optional[str] = None,
                   fact_id: Optional[str] = None) -> ToolResult:
    """All versions of entity+key, or of fact_id's chain, deleted ones included."""
    call.store.refresh()
    if fact_id is not None and (entity is None or key is None):
        # Crux names the stored entity of another agent's private fact in its refusal; that fact is not found here
        if call.visible_fact(fact_id, include_deleted=True) is None:
            raise ToolError(f"fact not found: {fact_id}", {"fact_id": fact_id})
    return _answer(history_payload(call.store, entity, key, fact_id, agent=call.agent, tenant=call.tenant))


@tool(kind=WRITE, hints=writes("Acknowledge facts used", destructive=False, idempotent=False),
      output=shape(turn_id="string", feature_enabled="boolean", memories_used="array",
                   filtered_count="integer"))
def memory_acknowledge_use(call: Call, turn_id: str, fact_ids: Optional[list[str]] = None,
                           intent: Optional[Intent] = None, retrieved_chunk_ids: Optional[list[str]] = None,
                           confidence: Optional[float] = None, note: Optional[str] = None) -> ToolResult:
    """Record which facts a turn's answer used (needs CORECRUXD_FEATURE_MEMORY_ACK)."""
    # retrieved_chunk_ids, confidence and note are in Crux's schema and read by no handler code
    call.store.refresh()
    buffer = _ACKS.setdefault((call.tenant, call.agent or ""), AckBuffer())
    return _answer(acknowledge_payload(call.store, buffer, turn_id, fact_ids, intent, agent=call.agent,
                                       tenant=call.tenant))


@tool(kind=READ, hints=reads("Preview a forget"),
      output=shape(scope="object", count="integer", facts_that_would_be_affected="array",
                   dry_run="boolean"))
def memory_forget_dry_run(call: Call, scope: ForgetScope, token_budget: Optional[int] = None,
                          include_pinned: bool = False) -> ToolResult:
    """What memory_forget would delete for a scope; writes nothing."""
    call.store.refresh()
    budget = call.budget(token_budget)
    payload = forget_dry_run_payload(call.store, scope, budget, include_pinned, agent=call.agent, tenant=call.tenant)
    return _rows_within(payload, "facts_that_would_be_affected", budget)  # count: what memory_forget would delete


@tool(kind=WRITE, hints=writes("Forget a scope", destructive=True, idempotent=False),
      output=shape(forget_receipt_id="string", facts_affected="integer",
                   recovery_window_seconds="integer", recovery_window_ends_at="string",
                   receipt_body_cbor_hex="string", receipt_body_hash_hex="string", scope="object",
                   passport_id="string?"))
def memory_forget(call: Call, scope: ForgetScope, reason: str, tenant_id: Optional[str] = None,
                  token_budget: Optional[int] = None, include_pinned: bool = False) -> ToolResult:
    """Soft-delete a scope's unpinned facts and return a forget receipt (try the dry run first)."""
    if tenant_id is not None and tenant_id != call.tenant:
        raise ToolError(f"tenant_id {tenant_id!r} is not this connection's tenant")
    active: Optional[list[legal_holds.LegalHold]] = None

    def covering(tenant: str, entity: str) -> list[dict[str, Any]]:
        """Holds are read once, inside the forget's commit (under the writer lock): a hold placed
        meanwhile still refuses it."""
        nonlocal active
        if active is None:
            active = legal_holds.active_holds(call.store.db)
        return [{"hold_id": h.hold_id, "tenant_id": h.tenant_id, "entity_prefixes": list(h.entity_prefixes),
                 "reason": h.reason} for h in active if h.covers(tenant, entity)]

    return _answer(forget_payload(call.store, scope, reason, agent=call.agent, tenant=call.tenant,
                                  holds_covering=covering, token_budget=token_budget, include_pinned=include_pinned,
                                  receipt_tenant_id=call.tenant))


@tool(kind=READ, hints=reads("Versions of a fact"))
def fact_history(call: Call, entity: str, key: str) -> ToolResult:
    """All versions of entity+key this agent can see, deleted ones included."""
    call.store.refresh()
    stored = [entity] + ([agent_scope.owner_entity(call.agent, entity)] if call.agent else [])
    versions = sorted((f for name in stored for f in call.store.history(name, key, tenant=call.tenant)
                       if agent_scope.visible_entity(f.entity, f.private, call.agent) is not None),
                      key=lambda f: f.version)
    if not versions:
        return ToolResult(f"no history for entity={entity}, key={key}")
    return ToolResult("\n".join(
        f"v{f.version}: [{agent_scope.visible_entity(f.entity, f.private, call.agent)}] {f.fact_id} = {f.value} "
        f"(confidence={f.confidence:.2f}, stored_at={chrono_display(f.stored_at)}, supersedes={f.supersedes or '-'}, "
        f"actor={f.actor or '-'})" + (" [deleted]" if f.deleted else "") for f in versions))
