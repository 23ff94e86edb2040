"""Scoped forgetting: `memory_forget_dry_run` and `memory_forget` (crates/crux-mcp/src/tools/forget.rs).

A scope (`{"type": T, "value": V}`) selects the caller-visible, non-deleted facts of the caller's
tenant outside the forget-reserved prefixes; the agent's pinned facts are left out unless
`include_pinned`; oldest first, optionally cut by a token budget. The dry run only lists them.
`memory_forget` soft-deletes them and returns a forget receipt (CBOR body + BLAKE3 hash).

Differences from Crux (`crates/crux-mcp/src/tools/forget.rs`), deliberate: the caller's tenant is applied
(Crux reads every tenant); the legal-hold check, the resolution and every delete happen in one `Store.commit`
under the writer lock, as one journal append (Crux appends one line per fact, so a crash could
leave half a forget); active consolidation members are skipped (the store's delete refuses them) and
the receipt counts only what was deleted. Daemon-owned facts are always private, so never selected.
The legal-hold check is the caller's (`holds_covering`), since legal holds live in `governance`,
above this package.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import blake3
import cbor2

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, CruxsqlError, ToolError
from ..facts import codec, timestamps, view
from ..facts.codec import Fact
from ..facts.store import Store
from ..recall import scope as agent_scope
from .memory_panel import pinned_by

FORGET_RESERVED = ("__agent::", "__ops::", "__bootstrap__::", "__agent_session::", "__memory_pin::")
SCOPE_TYPES = ("entity_prefix", "key_glob", "passport_id", "before_timestamp", "tenant_id")
FLAG = "CORECRUXD_FEATURE_SCOPED_FORGET"
WINDOW_ENV = "CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS"
LEGAL_HOLD_ACTIVE_ERROR = -32044
SCHEMA_FORGET_BODY_V1 = "cruxsql.forget_receipt_body.v1"   # Crux's schema string was not readable

HoldCheck = Callable[[str, str], list[dict[str, Any]]]   # (tenant, entity) -> covering holds


@dataclass(frozen=True)
class ForgetScope:
    type: str
    value: str

    @classmethod
    def parse(cls, obj: Any) -> "ForgetScope":
        if obj is None:
            raise ToolError("missing required param: scope", {"param": "scope", "required": True}, code=INVALID_PARAMS)
        problem = None
        if not isinstance(obj, dict) or set(obj) != {"type", "value"}:
            problem = "expected an object with exactly `type` and `value`"
        elif obj["type"] not in SCOPE_TYPES:
            problem = f"unknown variant `{obj['type']}`"
        elif not isinstance(obj["value"], str):
            problem = "`value` must be a string"
        if problem:
            raise ToolError(f"invalid scope: {problem}",
                            {"param": "scope", "accepted_types": list(SCOPE_TYPES), "error": problem}, code=INVALID_PARAMS)
        return cls(obj["type"], obj["value"])

    def render(self) -> str:
        return f"{self.type}={self.value}"

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "value": self.value}

    def matches(self, fact: Fact) -> bool:
        v = self.value
        if self.type == "entity_prefix":
            return fact.entity.startswith(v)
        if self.type == "key_glob":
            return re.fullmatch(".*".join(re.escape(p) for p in v.split("*")), fact.key, re.DOTALL) is not None
        if self.type == "passport_id":
            return fact.entity.startswith(f"__agent::{v}::")
        if self.type == "before_timestamp":
            try:
                return fact.stored_at < timestamps.parse_ns(v)
            except CruxsqlError:
                return False          # an unparseable cutoff matches nothing
        return fact.entity.startswith((f"tenant:{v}::", f"personal::{v}::", f"business::{v}::"))


def resolve(store: Store, scope: ForgetScope, *, agent: Optional[str], tenant: str,
            include_pinned: bool = False, token_budget: Optional[int] = None) -> list[Fact]:
    """The facts a forget of `scope` would delete, oldest first."""
    picked = []
    for fact in view.iter_facts(store.db, "WHERE tenant_hash = ? AND deleted = 0 ORDER BY stored_at_ns, fact_id",
                                (tenant,)):
        if fact.entity.startswith(FORGET_RESERVED):
            continue
        if agent_scope.visible_entity(fact.entity, fact.private, agent) is None or not scope.matches(fact):
            continue
        if not include_pinned and pinned_by(store, agent, fact.fact_id, tenant):
            continue
        picked.append(fact)
    if token_budget is None:
        return picked
    out, used = [], 0
    for fact in picked:
        out.append(fact)
        used += fact.tokens
        if used >= token_budget:
            break
    return out


def _row(fact: Fact, agent: Optional[str]) -> dict[str, Any]:
    return {"fact_id": fact.fact_id, "entity": agent_scope.visible_entity(fact.entity, fact.private, agent),
            "key": fact.key, "stored_at": timestamps.format_event_time(fact.stored_at), "tokens": fact.tokens}


def memory_forget_dry_run(store: Store, scope: Any, token_budget: Optional[int] = None, include_pinned: bool = False,
                          *, agent: Optional[str], tenant: str = "default") -> dict[str, Any]:
    """What `memory_forget` would delete; nothing is written. Anonymous callers see public facts only."""
    parsed = ForgetScope.parse(scope)
    facts = resolve(store, parsed, agent=agent, tenant=tenant, include_pinned=include_pinned, token_budget=token_budget)
    if facts:
        text = (f"dry-run: {len(facts)} facts would be forgotten ({parsed.render()}); see structured "
                "`facts_that_would_be_affected`")
    else:
        text = f"dry-run: no facts match scope ({parsed.render()})"
    return {"content": [{"type": "text", "text": text}],
            "structuredContent": {"scope": parsed.to_dict(), "count": len(facts),
                                  "facts_that_would_be_affected": [_row(f, agent) for f in facts], "dry_run": True}}


def _flag_on(env: Mapping[str, str]) -> bool:
    """Unset: on. Set: on only for `1` or case-insensitive `true` (no trimming; `yes`/`on` are off)."""
    return FLAG not in env or env[FLAG] == "1" or env[FLAG].lower() == "true"


def _window_days(env: Mapping[str, str]) -> int:
    try:
        return max(1, int(env.get(WINDOW_ENV, "7")))
    except ValueError:
        return 7


def _is_consolidation_member(store: Store, fact_id: str) -> bool:
    return store.db.execute(
        "SELECT 1 FROM consolidation_sources cs JOIN facts s ON s.fact_id = cs.source_fact_id "
        "WHERE (cs.source_fact_id = ?1 AND s.superseded_by = cs.canonical_fact_id) OR cs.canonical_fact_id = ?1 "
        "LIMIT 1", (fact_id,)).fetchone() is not None


def memory_forget(store: Store, scope: Any, reason: Any, *, agent: Optional[str], tenant: str = "default",
                  holds_covering: HoldCheck, token_budget: Optional[int] = None, include_pinned: bool = False,
                  receipt_tenant_id: str = "default", env: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """Soft-delete the scope's facts in one append and return the forget receipt (top-level keys)."""
    env = os.environ if env is None else env
    if not _flag_on(env):
        raise ToolError("memory_forget is disabled (set CORECRUXD_FEATURE_SCOPED_FORGET=1 to enable)",
                        {"feature_flag": FLAG, "enabled": False}, code=METHOD_NOT_FOUND)
    if not agent:
        raise ToolError("memory_forget requires an authenticated agent identity (passport)",
                        {"param": "passport", "requires_agent_identity": True}, code=INVALID_PARAMS)
    parsed = ForgetScope.parse(scope)
    if not isinstance(reason, str) or not reason.strip():
        raise ToolError("memory_forget requires a non-empty `reason`",
                        {"param": "reason", "required": True}, code=INVALID_PARAMS)
    now = timestamps.now_ns()
    outcome: dict[str, Any] = {}

    def build() -> list[codec.Event]:
        facts = resolve(store, parsed, agent=agent, tenant=tenant, include_pinned=include_pinned,
                        token_budget=token_budget)
        holds: dict[str, dict[str, Any]] = {}
        blocked = 0
        for fact in facts:
            covering = holds_covering(fact.tenant_hash, fact.entity)
            blocked += bool(covering)
            holds.update((h["hold_id"], h) for h in covering)
        if holds:
            raise ToolError(f"memory_forget refused: {len(holds)} active legal hold(s) cover the requested facts",
                            {"error": "LEGAL_HOLD_ACTIVE", "hold_ids": sorted(holds),
                             "holds": [holds[k] for k in sorted(holds)], "facts_blocked": blocked}, code=LEGAL_HOLD_ACTIVE_ERROR)
        # active consolidation members are skipped: the store's own delete refuses them
        deleted = [f for f in facts if not _is_consolidation_member(store, f.fact_id)]
        outcome["resolved"], outcome["deleted"] = facts, deleted
        at = timestamps.format_event_time(now)
        return [codec.DeleteEvent(f.fact_id, at) for f in deleted]

    try:
        store.commit(build)
    except ToolError:
        raise
    except CruxsqlError as exc:
        raise ToolError("fact journal append failed", {"error": str(exc)}, code=INTERNAL_ERROR) from exc
    deleted: list[Fact] = outcome["deleted"]
    window_s = _window_days(env) * 86_400
    now_text = timestamps.format_event_time(now)
    ends = timestamps.format_event_time(now + window_s * 10**9)
    receipt_id = "r_forget_" + blake3.blake3(
        f"{agent}|{receipt_tenant_id}|{parsed.render()}|{len(deleted)}|{now_text}".encode()).hexdigest()[:16]
    body = {"schema": SCHEMA_FORGET_BODY_V1, "receipt_id": receipt_id, "tenant_id": receipt_tenant_id,
            "passport_id": agent, "reason": reason, "scope": parsed.to_dict(),
            "facts_affected": [{"fact_id": f.fact_id, "pre_forget_value_hash_hex": blake3.blake3(
                f.value.encode("utf-8")).hexdigest(), "entity": f.entity, "key": f.key} for f in deleted],
            "initiated_at": now_text, "recovery_window_ends_at": ends}
    encoded = cbor2.dumps(body, canonical=True)
    text = (f"forget receipt {receipt_id} emitted: {len(deleted)} facts soft-deleted (scope={parsed.render()}); "
            f"recovery window ends {ends}")
    return {"content": [{"type": "text", "text": text}], "forget_receipt_id": receipt_id,
            "facts_affected": len(deleted), "recovery_window_seconds": window_s, "recovery_window_ends_at": ends,
            "receipt_body_cbor_hex": encoded.hex(), "receipt_body_hash_hex": blake3.blake3(encoded).hexdigest(),
            "scope": parsed.to_dict(), "passport_id": agent}
