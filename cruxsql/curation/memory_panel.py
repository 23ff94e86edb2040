"""The memory panel's write and history tools: `memory_edit`, `memory_pin`, `memory_history`,
`memory_acknowledge_use` (crux-mcp/src/tools/memory.rs, memory_use.rs), as plain functions returning Crux's payload.

The acting agent and the tenant are the caller's identity (from the connection), never a tool
argument. Where Crux reads every tenant or hard-codes `"default"` (`crates/crux-mcp/src/tools/memory.rs`),
cruxsql applies the caller's tenant: a fact of another tenant is "not found", and edits and pins are
written in the caller's tenant.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping, Optional, cast

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, CruxsqlError, NotFound, ToolError
from ..facts import timestamps
from ..facts.codec import Fact
from ..facts.privacy import NamespaceOwner, split_private_entity
from ..facts.store import Store
from ..recall import scope
from ..recall.facade import MEMORY_PIN_PREFIX, MEMORY_VIEW_RESERVED, pin_value_pinned
from .feature_flags import flag_on

PANEL_FLAG = "CORECRUXD_FEATURE_MEMORY_PANEL"
ACK_FLAG = "CORECRUXD_FEATURE_MEMORY_ACK"
ACK_RESERVED = ("__agent::", "__ops::", "__bootstrap__::", "__session_binding__::", "__reverify_receipts__::")
ACK_INTENTS = ("answer", "decision", "tool_call", "implicit")
ACK_BUFFER_TURNS = 1024
# The panel writes pin records into the daemon-owned `__memory_pin::` namespace on the agent's behalf.
PIN_OWNER = NamespaceOwner("memory panel pins", (MEMORY_PIN_PREFIX,))


def _payload(text: str, structured: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        out["structuredContent"] = structured
    return out


def panel_disabled(tool: str, env: Optional[Mapping[str, str]] = None) -> Optional[dict[str, Any]]:
    """Crux's feature-disabled response when `CORECRUXD_FEATURE_MEMORY_PANEL` turns the panel off,
    else None (crates/crux-mcp/src/tools/memory.rs: every panel handler checks it first)."""
    return None if flag_on(PANEL_FLAG, True, env) else _disabled(tool)


def _disabled(tool: str) -> dict[str, Any]:
    return {**_payload(f"{tool}: memory panel explicitly disabled (unset {PANEL_FLAG} to re-enable; "
                       "it is on by default)"), "isError": False}


def _require_agent(tool: str, agent: Optional[str]) -> str:
    if not agent:
        raise ToolError(f"{tool} requires an authenticated agent identity",
                        {"requires_agent_identity": True}, code=INVALID_PARAMS)
    return agent


def _lookup(store: Store, fact_id: str, tenant: str, agent: Optional[str]) -> Fact:
    """The fact, if it exists and the agent may see it: another agent's private fact answers exactly as a
    nonexistent one (Crux says "not editable" for it, which tells the caller that it exists)."""
    try:
        fact = store.get(fact_id, tenant)
    except NotFound:
        fact = None
    if fact is None or scope.visible_entity(fact.entity, fact.private, agent) is None:
        raise ToolError(f"fact not found: {fact_id}", {"fact_id": fact_id}, code=INVALID_PARAMS) from None
    return fact


def panel_entity(fact: Fact, agent: Optional[str]) -> Optional[str]:
    """The entity the agent sees the fact under in the panel, or None (deleted, invisible, reserved)."""
    if fact.deleted:
        return None
    visible = scope.visible_entity(fact.entity, fact.private, agent)
    if visible is None or visible.startswith(MEMORY_VIEW_RESERVED):
        return None
    return visible


def pinned_by(store: Store, agent: Optional[str], fact_id: str, tenant: str) -> bool:
    """The agent's latest `__memory_pin::<agent>::<id>` / `pinned` record says `1` or `true`
    (`pin_value_pinned`)."""
    if not agent:
        return False
    row = store.db.execute(
        "SELECT value FROM facts WHERE entity = ? AND key = 'pinned' AND deleted = 0 AND tenant_hash = ? "
        "ORDER BY stored_at_ns DESC, seq DESC LIMIT 1", (f"{MEMORY_PIN_PREFIX}{agent}::{fact_id}", tenant)).fetchone()
    return row is not None and pin_value_pinned(row[0])


def memory_fact(store: Store, fact: Fact, agent: Optional[str], tenant: str) -> dict[str, Any]:
    """A `MemoryFact` row as `memory_view` shows it."""
    return {"id": fact.fact_id, "entity": scope.visible_entity(fact.entity, fact.private, agent) or fact.entity,
            "key": fact.key, "value": fact.value, "version": fact.version,
            "stored_at": timestamps.format_event_time(fact.stored_at), "confidence": fact.confidence,
            "pinned": pinned_by(store, agent, fact.fact_id, tenant), "source_receipt": fact.source_receipt,
            "actor": fact.actor, "superseded_by": fact.superseded_by}


def memory_edit(store: Store, fact_id: str, new_value: str, reason: Optional[str] = None, *,
                agent: Optional[str], tenant: str = "default", actor: Optional[str] = None,
                env: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """Store `new_value` as the next version of the fact's chain (receipt `memory_edit:<reason>`),
    carrying the agent's pin over to the new version."""
    if not flag_on(PANEL_FLAG, True, env):
        return _disabled("memory_edit")
    agent = _require_agent("memory_edit", agent)
    old = _lookup(store, fact_id, tenant, agent)
    if panel_entity(old, agent) is None:
        raise ToolError("fact is not editable through the memory panel",
                        {"fact_id": fact_id, "reason": "reserved_or_invisible"}, code=INVALID_PARAMS)
    own = split_private_entity(old.entity)    # the agent's own private fact: stored again as its own
    entity, owner_agent = (own[1], agent) if own is not None else (old.entity, None)
    try:
        new = store.store(entity, old.key, new_value, tenant=tenant, confidence=old.confidence,
                          source_receipt=f"memory_edit:{reason}" if reason is not None else None,
                          private=old.private, horizon_class=old.horizon_class, actor=actor, agent=owner_agent)
    except CruxsqlError as exc:
        raise ToolError("memory_edit: fact journal append failed", {"error": str(exc)}, code=INTERNAL_ERROR) from exc
    if pinned_by(store, agent, fact_id, tenant):
        store.store(f"{MEMORY_PIN_PREFIX}{agent}::{new.fact_id}", "pinned", "1", tenant=tenant, owner=PIN_OWNER)
    return _payload(f"edited fact {fact_id} \u2192 {new.fact_id} (v{new.version} supersedes {fact_id})",
                    {"old_fact_id": fact_id, "new_fact": memory_fact(store, new, agent, tenant), "reason": reason})


def memory_pin(store: Store, fact_id: str, pinned: bool = True, *, agent: Optional[str], tenant: str = "default",
               env: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """Write the agent's pin record for a panel-visible fact (`1` pinned, `0` unpinned)."""
    if not flag_on(PANEL_FLAG, True, env):
        return _disabled("memory_pin")
    agent = _require_agent("memory_pin", agent)
    fact = _lookup(store, fact_id, tenant, agent)
    if panel_entity(fact, agent) is None:
        raise ToolError("fact is not pinnable through the memory panel",
                        {"fact_id": fact_id, "reason": "reserved_or_invisible"}, code=INVALID_PARAMS)
    try:
        store.store(f"{MEMORY_PIN_PREFIX}{agent}::{fact_id}", "pinned", "1" if pinned else "0", tenant=tenant,
                    owner=PIN_OWNER)
    except CruxsqlError as exc:
        raise ToolError("memory_pin: fact journal append failed", {"error": str(exc)}, code=INTERNAL_ERROR) from exc
    return _payload(f"{'pinned' if pinned else 'unpinned'} fact {fact_id}", {"fact_id": fact_id, "pinned": pinned})


def chrono_display(ns: int) -> str:
    """chrono's `DateTime<Utc>` Display: `YYYY-MM-DD HH:MM:SS[.fff|.ffffff|.fffffffff] UTC`."""
    return timestamps.format_fact_time(ns).replace("T", " ").removesuffix("Z") + " UTC"


def memory_history(store: Store, entity: Optional[str] = None, key: Optional[str] = None,
                   fact_id: Optional[str] = None, *, agent: Optional[str], tenant: str = "default",
                   env: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """Every version (deleted ones too) of an (entity, key) the agent can see, by version."""
    if not flag_on(PANEL_FLAG, True, env):
        return _disabled("memory_history")
    if entity is None or key is None:
        if fact_id is None:
            raise ToolError("memory_history requires either {entity,key} or {fact_id}",
                            {"required_alternatives": ["entity+key", "fact_id"]}, code=INVALID_PARAMS)
        fact = _lookup(store, fact_id, tenant, agent)
        entity, key = scope.visible_entity(fact.entity, fact.private, agent) or fact.entity, fact.key
    if entity.startswith(MEMORY_VIEW_RESERVED):
        raise ToolError("memory_history: entity is reserved (not visible through memory panel)",
                        {"entity": entity}, code=INVALID_PARAMS)
    stored = [entity] + ([scope.owner_entity(agent, entity)] if agent else [])
    rows = store.db.execute(
        f"SELECT fact_id FROM facts WHERE tenant_hash = ? AND key = ? AND entity IN ({','.join('?' * len(stored))}) "
        "ORDER BY version, seq", (tenant, key, *stored)).fetchall()
    versions = []
    for (fid,) in rows:
        f = store.get(cast(str, fid))      # fact_id: TEXT NOT NULL
        if scope.visible_entity(f.entity, f.private, agent) is None:
            continue
        versions.append(f)
    if not versions:
        return _payload(f"no history for entity={entity}, key={key}", {"versions": []})
    text = "\n".join(f"v{f.version}: {f.key} = {f.value} (id={f.fact_id}, stored_at={chrono_display(f.stored_at)}, "
                     f"receipt={f.source_receipt or ''})" + (" [deleted]" if f.deleted else "") for f in versions)
    return _payload(text, {"versions": [
        {"id": f.fact_id, "value": f.value, "version": f.version,
         "stored_at": timestamps.format_event_time(f.stored_at), "supersedes": f.supersedes, "deleted": f.deleted, "source_receipt": f.source_receipt} for f in versions]})


class AckBuffer:
    """The pending-acknowledgement buffer (in process): one entry per turn, FIFO-capped at 1024 turns,
    a re-acknowledged turn replacing its entry."""

    def __init__(self, capacity: int = ACK_BUFFER_TURNS) -> None:
        self.capacity = capacity
        self.turns: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def put(self, turn_id: str, entry: dict[str, Any]) -> None:
        self.turns.pop(turn_id, None)
        self.turns[turn_id] = entry
        while len(self.turns) > self.capacity:
            self.turns.popitem(last=False)


def memory_acknowledge_use(store: Store, buffer: AckBuffer, turn_id: Any, fact_ids: Any = None,
                           intent: Optional[str] = None, *, agent: Optional[str], tenant: str = "default",
                           env: Optional[Mapping[str, str]] = None, now_ns: Optional[int] = None) -> dict[str, Any]:
    """Record which facts an answer used. The identity and arguments are checked before the flag
    (default off); unknown, deleted, invisible and reserved facts are counted, not acknowledged.
    Crux's result keys are top-level (no `structuredContent`)."""
    if not agent:
        raise ToolError("memory_acknowledge_use requires an authenticated agent identity (passport). "
                        "Set CRUX_AGENT_TOKEN or CRUX_AGENT_TOKENS and pass a Bearer header.",
                        {"requires_agent_identity": True}, code=INVALID_PARAMS)
    if not isinstance(turn_id, str):
        raise ToolError("turn_id is required (opaque per-host turn identifier)", code=INVALID_PARAMS)
    raw_intent = intent if intent is not None else "answer"
    if raw_intent not in ACK_INTENTS:
        raise ToolError(f"intent must be one of {', '.join(ACK_INTENTS)}", code=INVALID_PARAMS)
    if fact_ids is not None and not isinstance(fact_ids, list):
        raise ToolError("fact_ids must be an array of strings", code=INVALID_PARAMS)
    ids = [f for f in (fact_ids or []) if isinstance(f, str)]
    if not flag_on(ACK_FLAG, False, env):
        return {**_payload(f"memory_acknowledge_use: feature disabled ({ACK_FLAG} off). Turn {turn_id} not "
                           "recorded. Set the flag at deploy time to enable."),
                "turn_id": turn_id, "feature_enabled": False, "memories_used": [], "filtered_count": 0}
    now = timestamps.now_ns() if now_ns is None else now_ns
    used, not_found, redacted = [], 0, 0
    for fid in ids:
        try:
            fact = store.get(fid, tenant)
        except NotFound:
            fact = None
        visible = None if fact is None else scope.visible_entity(fact.entity, fact.private, agent)
        # Crux counts another agent's private fact as not_visible, which tells the caller it exists: here
        # it is not found, as every id-taking tool answers it; not_visible stays in the result, always 0.
        if fact is None or fact.deleted or visible is None:
            not_found += 1
        elif fact.entity.startswith(ACK_RESERVED) or visible.startswith(ACK_RESERVED):
            redacted += 1
        else:
            age = (now - fact.stored_at) // (86_400 * 10**9)
            used.append({"fact_id": fid, "topic": visible, "age_days": age if age >= 0 else None})
    receipt_ref = f"mu_{agent}_{turn_id}"
    buffer.put(turn_id, {"receipt_ref": receipt_ref, "intent": raw_intent, "memories_used": used})
    text = (f"acknowledged {len(used)} memories for turn {turn_id} (intent={raw_intent}, actor={agent}, "
            f"receipt_ref={receipt_ref}, redacted={redacted}, not_found={not_found}, not_visible=0)")
    return {**_payload(text), "turn_id": turn_id, "intent": raw_intent, "feature_enabled": True,
            "receipt_ref": receipt_ref, "memories_used": used, "filtered_count": redacted + not_found,
            "redacted_count": redacted, "not_found_count": not_found, "not_visible_count": 0}
