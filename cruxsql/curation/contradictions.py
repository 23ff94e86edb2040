"""Crux's contradiction scan (`contradiction_candidates_v1`) and its `memory_contradictions` payload.

Crux's fact_store.rs: live (not deleted, not superseded), non-private facts of one tenant whose whole
value has a polarity (`polarity.py`), grouped by (entity, key) in byte order; a group holding both
polarities is one candidate, the negative bucket first. Crux orders ids inside a bucket by hash-map
iteration (non-deterministic, docs/curation.md); cruxsql sorts them by `fact_id`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import apsw

from ..errors import CAPABILITY_DENIED, InvalidInput, ToolError
from ..recall.tokens import estimate_tokens
from .polarity import polarity_class_v1
from .feature_flags import flag_on

REASON = "opposite_polarity_same_entity_key"
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
DEFAULT_TOKEN_BUDGET = 500
CONSOLIDATION_FLAG = "CORECRUXD_FEATURE_CONSOLIDATION"

# Only (entity, key) groups with two or more live, shared facts can hold a contradiction; a re-store
# supersedes its predecessor, so such groups are rare. They are found in the partial index
# `facts_live_chain` (migration 0009) without reading the table; only their rows are fetched.
SHARED_LIVE_SQL = """
SELECT f.entity, f.key, f.fact_id, f.value, f.actor
FROM (SELECT entity, key FROM facts WHERE tenant_hash = ?1 AND deleted = 0 AND superseded_by IS NULL AND private = 0
      GROUP BY entity, key HAVING count(*) >= 2) g
JOIN facts f ON f.tenant_hash = ?1 AND f.entity = g.entity AND f.key = g.key
     AND f.deleted = 0 AND f.superseded_by IS NULL AND f.private = 0
"""


@dataclass(frozen=True)
class ContradictionCandidate:
    entity: str
    key: str
    fact_ids: list[str]
    values: list[str]
    reason: str = REASON
    polarity_a: str = "negative"
    polarity_b: str = "positive"

    def to_dict(self) -> dict[str, Any]:
        """Crux's key order: entity, key, reason, polarity_a, polarity_b, fact_ids, values."""
        return {"entity": self.entity, "key": self.key, "reason": self.reason, "polarity_a": self.polarity_a,
                "polarity_b": self.polarity_b, "fact_ids": self.fact_ids, "values": self.values}


def contradiction_candidates_v1(db: apsw.Connection, tenant: str = "default",
                                limit: int = 0) -> list[ContradictionCandidate]:
    """Every opposite-polarity (entity, key) group of `tenant`, in (entity, key) byte order; `limit`
    0 means unlimited."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInput(f"limit must be a non-negative integer, got {limit!r}")
    groups: dict[tuple[str, str], dict[str, list[tuple[str, str]]]] = {}
    for entity, key, fact_id, value, _ in db.execute(SHARED_LIVE_SQL, (tenant,)):
        polarity = polarity_class_v1(value)
        if polarity is not None:
            groups.setdefault((entity, key), {}).setdefault(polarity, []).append((fact_id, value))
    out: list[ContradictionCandidate] = []
    for (entity, key) in sorted(groups):
        buckets = groups[(entity, key)]
        if len(buckets) < 2:
            continue
        members = sorted(buckets["negative"]) + sorted(buckets["positive"])
        out.append(ContradictionCandidate(entity, key, [m[0] for m in members], [m[1] for m in members]))
        if limit and len(out) >= limit:
            break
    return out


def within_budget(rows: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """Crux's row budget (freshness and contradictions): add rows while the running sum of each row's
    JSON token estimate stays within the budget; the first row always goes in."""
    kept: list[dict[str, Any]] = []
    used = 0
    for row in rows:
        cost = estimate_tokens(row)
        if kept and used + cost > budget:
            break
        kept.append(row)
        used += cost
    return kept


def require_consolidation_feature(env: Optional[Mapping[str, str]] = None) -> None:
    """`memory_contradictions` and `memory_consolidate` are refused when the flag is explicitly off."""
    if not flag_on(CONSOLIDATION_FLAG, True, env):
        raise ToolError(f"consolidation feature explicitly disabled (unset {CONSOLIDATION_FLAG} "
                        "to re-enable; it is on by default)", {"flag": CONSOLIDATION_FLAG}, code=CAPABILITY_DENIED)


def memory_contradictions(db: apsw.Connection, tenant: str = "default", limit: Optional[int] = None,
                          token_budget: Optional[int] = None,
                          env: Optional[Mapping[str, str]] = None) -> dict[str, Any]:
    """The `memory_contradictions` tool result: text plus `{candidates, count, limit, dry_run: true}`.
    `limit` defaults to 50 and is clamped to 500; `token_budget` defaults to 500. No identity needed."""
    require_consolidation_feature(env)
    limit = DEFAULT_LIMIT if limit is None else min(_count(limit, "limit"), MAX_LIMIT)
    budget = DEFAULT_TOKEN_BUDGET if token_budget is None else _count(token_budget, "token_budget")
    rows = within_budget([c.to_dict() for c in contradiction_candidates_v1(db, tenant, limit)], budget)
    if rows:
        text = (f"{len(rows)} contradiction candidate(s) detected; see structured `candidates` — read-only, "
                "nothing was mutated. Resolve explicitly via memory_consolidate (or the console review surface).")
    else:
        text = "no contradiction candidates (no active opposite-polarity facts sharing entity+key)"
    return {"content": [{"type": "text", "text": text}],
            "structuredContent": {"candidates": rows, "count": len(rows), "limit": limit, "dry_run": True}}


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}")
    return value
