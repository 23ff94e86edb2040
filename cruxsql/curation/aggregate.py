"""Crux's `aggregate_v1` (crates/corecrux-memory/src/fact_store.rs): count, numeric sum, distinct values, temporal diff.

Candidates are the tenant's live (not deleted, not superseded), non-private facts of the exact
entity/key given, whose value contains `query` (case-insensitive), in `fact_id` order. A token
budget admits facts while the scanned tokens stay within it (the first always). No model is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, cast

import apsw

from ..errors import InvalidInput
from ..facts import timestamps
from ..recall.scope import rust_lower

OPS = ("count", "sum_numeric", "distinct", "temporal_diff")


@dataclass
class AggregateRequest:
    op: str
    entity: Optional[str] = None
    key: Optional[str] = None
    query: Optional[str] = None
    as_of: Optional[str] = None           # RFC 3339 (temporal_diff)
    token_budget: Optional[int] = None


def parse_leading_number(text: str) -> Optional[float]:
    """The first number in `text`: skip to the first ASCII digit (or a sign right before one), then
    digits with `,` ignored and at most one `.`. `"$450,000 approved"` -> 450000.0, `"-12.5C"` -> -12.5."""
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c.isascii() and c.isdigit():
            break
        if c in "+-" and i + 1 < n and text[i + 1].isascii() and text[i + 1].isdigit():
            break
        i += 1
    if i == n:
        return None
    out = []
    if text[i] in "+-":
        out.append(text[i])
        i += 1
    seen_dot = False
    while i < n:
        c = text[i]
        if c.isascii() and c.isdigit():
            out.append(c)
        elif c == ",":
            pass
        elif c == "." and not seen_dot:
            seen_dot = True
            out.append(c)
        else:
            break
        i += 1
    try:
        return float("".join(out))
    except ValueError:
        return None


def _candidates(db: apsw.Connection, tenant: str, req: AggregateRequest) -> list[tuple]:
    sql = ("SELECT fact_id, value, tokens FROM facts WHERE tenant_hash = ? AND deleted = 0 "
           "AND superseded_by IS NULL AND private = 0")
    params: list[Any] = [tenant]
    for column in ("entity", "key"):
        if getattr(req, column) is not None:
            sql += f" AND {column} = ?"
            params.append(getattr(req, column))
    rows = db.execute(sql + " ORDER BY fact_id", params).fetchall()
    if req.query is not None:
        needle = rust_lower(req.query)
        rows = [r for r in rows if needle in rust_lower(cast(str, r[1]))]  # value: TEXT NOT NULL
    return rows


def aggregate_v1(db: apsw.Connection, req: AggregateRequest, tenant: str = "default") -> dict[str, Any]:
    """`{op, matched, value, llm_calls: 0, tokens_scanned, budget_truncated}`."""
    if req.op not in OPS:
        raise InvalidInput(f"unknown aggregate op {req.op!r} (expected {', '.join(OPS)})")
    budget = req.token_budget
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise InvalidInput(f"token_budget must be a non-negative integer, got {budget!r}")
    as_of = timestamps.parse_ns(req.as_of) if req.as_of is not None else None
    if req.op == "temporal_diff":
        return _temporal_diff(db, tenant, req, as_of)
    picked: list[tuple] = []
    scanned, truncated = 0, False
    for row in _candidates(db, tenant, req):
        if budget is not None and picked and scanned + row[2] > budget:
            truncated = True
            break
        picked.append(row)
        scanned += row[2]
    if req.op == "count":
        value: Any = len(picked)
    elif req.op == "sum_numeric":
        value = float(sum(x for x in (parse_leading_number(r[1]) for r in picked) if x is not None))
    else:
        value = len({r[1] for r in picked})
    return _result(req.op, len(picked), value, scanned, truncated)


def _result(op: str, matched: int, value: Any, scanned: int, truncated: bool) -> dict[str, Any]:
    return {"op": op, "matched": matched, "value": value, "llm_calls": 0, "tokens_scanned": scanned,
            "budget_truncated": truncated}


def _temporal_diff(db: apsw.Connection, tenant: str, req: AggregateRequest, as_of: Optional[int]) -> dict[str, Any]:
    """V-C: current = the highest-version candidate; walk `supersedes` back through live, non-private
    versions of the same chain that `superseded_by` the child; old = the highest version stored at or
    before `as_of`, else the oldest; value = current - old when both parse."""
    if req.entity is None or req.key is None:
        return _result("temporal_diff", 0, None, 0, False)
    rows = _candidates(db, tenant, req)
    if not rows:
        return _result("temporal_diff", 0, None, 0, False)
    head = db.execute(
        "SELECT fact_id, value, version, stored_at_ns, supersedes, tokens FROM facts WHERE fact_id IN "
        f"({','.join('?' * len(rows))}) ORDER BY version DESC, fact_id LIMIT 1", [r[0] for r in rows]).fetchone()
    assert head is not None     # the candidates' own rows
    chain, seen = [head], {head[0]}
    while chain[-1][4] is not None and chain[-1][4] not in seen:
        prev = db.execute(
            "SELECT fact_id, value, version, stored_at_ns, supersedes, tokens FROM facts WHERE fact_id = ? "
            "AND tenant_hash = ? AND entity = ? AND key = ? AND deleted = 0 AND private = 0 AND superseded_by = ?",
            (chain[-1][4], tenant, req.entity, req.key, chain[-1][0])).fetchone()
        if prev is None:
            break
        chain.append(prev)
        seen.add(prev[0])
    if as_of is None:
        old = chain[-1]
    else:
        eligible = [c for c in chain if c[3] <= as_of]
        old = max(eligible, key=lambda c: c[2]) if eligible else None
    now_value = parse_leading_number(head[1])
    old_value = parse_leading_number(old[1]) if old is not None else None
    value = now_value - old_value if now_value is not None and old_value is not None else None
    return _result("temporal_diff", len(chain), value, sum(c[5] for c in chain), False)


def dedup_latest(facts: list) -> list:
    """Keep the highest version per (tenant, entity, key), the first seen winning ties; sorted by
    that triple (Crux `dedup_latest`)."""
    best: dict[tuple[str, str, str], Any] = {}
    for fact in facts:
        k = (fact.tenant_hash, fact.entity, fact.key)
        if k not in best or fact.version > best[k].version:
            best[k] = fact
    return [best[k] for k in sorted(best)]
