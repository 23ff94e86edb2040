"""`memory_freshness`: which facts are fresh or stale, oldest first (crates/crux-mcp/src/tools/freshness.rs).

Rows are the caller's visible, live facts outside the reserved namespaces, judged with the
non-salient rule (anchor = `reverified_at`, else `stored_at`). cruxsql applies the tenant (the
described Crux version reads every tenant).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..facts import timestamps, view
from ..facts.store import Store
from . import scope, tokens
from .freshness import DecayPolicy, age_hours, freshness_at, ns_to_ms

RESERVED_PREFIXES = ("__agent::", "__ops::", "__bootstrap__::", "__session_binding__::", "__reverify_receipts__::")
DEFAULT_TOP_K = 20
MAX_TOP_K = 500
DEFAULT_TOKEN_BUDGET = 500


def is_reserved(entity: str) -> bool:
    """Under a namespace the memory tools never list or change (the audit envelope's reserved list)."""
    return entity.startswith(RESERVED_PREFIXES)


@dataclass
class FreshnessReport:
    rows: list[dict[str, Any]]
    policy: DecayPolicy
    now: str

    def text(self) -> str:
        if not self.rows:
            return "no facts in freshness window"
        return "\n".join(f"{r['age_hours']:>5}h [{r['freshness']:<8}] {r['horizon_class']:<8} "
                         f"{r['entity']}::{r['key']} (id={r['fact_id']})" for r in self.rows)

    def structured(self) -> dict[str, Any]:
        return {"rows": self.rows, "policy": self.policy.to_dict(), "now": self.now}


def memory_freshness(store: Store, *, tenant: Optional[str] = None, agent: Optional[str] = None,
                     entity: Optional[str] = None, key: Optional[str] = None, top_k: Optional[int] = None,
                     token_budget: Optional[int] = None, now_ns: Optional[int] = None,
                     policy: Optional[DecayPolicy] = None) -> FreshnessReport:
    """Oldest first, `top_k` (default 20, at most 500) rows, then a token budget (default 500; a row is
    added while the running sum of its JSON estimate stays within it; the first row always)."""
    store.refresh()
    top_k = min(DEFAULT_TOP_K if top_k is None else top_k, MAX_TOP_K)
    budget = DEFAULT_TOKEN_BUDGET if token_budget is None else token_budget
    policy = policy or DecayPolicy.from_env()
    now = timestamps.now_ns() if now_ns is None else now_ns
    agent = scope.normalize_agent(agent)
    where = "WHERE tenant_hash = ? AND deleted = 0"
    params: list[Any] = [scope.normalize_tenant(tenant)]
    if key is not None:
        where += " AND key = ?"
        params.append(key)
    rows: list[dict[str, Any]] = []
    used = 0
    for fact in view.iter_facts(store.db, where + " ORDER BY stored_at_ns, seq", params):
        if len(rows) >= top_k:
            break
        visible = scope.visible_entity(fact.entity, fact.private, agent)
        if visible is None or is_reserved(visible):
            continue
        if entity is not None and entity not in (fact.entity, visible):
            continue
        anchor = fact.reverified_at if fact.reverified_at is not None else fact.stored_at
        row = {"fact_id": fact.fact_id, "entity": visible, "key": fact.key, "horizon_class": fact.horizon_class,
               "freshness": freshness_at(fact.horizon_class, ns_to_ms(anchor), ns_to_ms(now), 0, policy),
               "age_hours": age_hours(ns_to_ms(anchor), ns_to_ms(now)),
               "stored_at": timestamps.format_event_time(fact.stored_at),
               "reverified_at": None if fact.reverified_at is None else timestamps.format_event_time(fact.reverified_at)}
        cost = tokens.estimate_tokens(row)
        if rows and used + cost > budget:
            break
        rows.append(row)
        used += cost
    return FreshnessReport(rows, policy, timestamps.format_event_time(now))
