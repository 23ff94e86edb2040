"""Recall that explains itself: why each row matched and ranked, and why other candidates were left out.

`explain(recall, result, ...)` is called after `query_facts` with the same arguments (`as_of` as the
result reports it). Per row it gives
which term matched which field, and the effective confidence as confidence × decay, with the horizon
(× salience, when access counting lengthened it) that decided fresh or stale. For the whole answer it
counts the facts of the caller's tenant that matched the terms but were dropped, by the first pipeline
step that dropped them (Crux's order: deleted, valid time, superseded), plus the answer's own floor and
budget/top-k counts. Only facts the caller may see are counted: other tenants and other agents' private
facts never are (a count of them would let a caller test words against memory it may not read).
"""

from __future__ import annotations

from typing import Any, Optional

from ..errors import InvalidInput
from ..facts import timestamps
from . import scope
from .freshness import STALE_DEMOTION_FACTOR, salience_factor
from .visibility import VisibilityPlan

FIELDS = (("value", "value"), ("key", "key"), ("entity", "entity"))


def _matched_terms(row: dict[str, Any], terms: list[str]) -> dict[str, list[str]]:
    fields = {name: scope.rust_lower(str(row[col])) for name, col in FIELDS}
    return {t: [name for name, text in fields.items() if t in text] for t in terms
            if any(t in text for text in fields.values())}


def _row_explanation(row: dict[str, Any], terms: Optional[list[str]], access_count: int,
                     policy) -> dict[str, Any]:
    stale = row["freshness"] == "stale"
    out: dict[str, Any] = {
        "matched_terms": _matched_terms(row, terms) if terms else {},
        "confidence": row["confidence"],
        "decay": STALE_DEMOTION_FACTOR if stale else 1.0,
        "effective_confidence": row["effective_confidence"],
        "freshness": row["freshness"],
        "horizon_class": row["horizon_class"],
    }
    base = policy.base_ms(row["horizon_class"])
    if base is not None:
        factor = salience_factor(access_count)
        out["horizon_hours"] = round(base * factor / 3_600_000, 2)
        if factor > 1.0:
            out["salience"] = round(factor, 4)
            out["access_count"] = access_count
    return out


def _exclusions(recall, terms: Optional[list[str]], tenant: str, agent: Optional[str], entity: Optional[str],
                entity_prefix: Optional[str], as_of_ns: Optional[int], include_superseded: bool) -> dict[str, int]:
    plan = VisibilityPlan(params={"tenant": tenant, "agent": agent})
    plan.where.append("+f.tenant_hash = :tenant")
    plan.where.append("((t.owner IS NULL AND f.private = 0) OR t.owner = :agent)")
    recall.entity_filters(plan, agent, entity, entity_prefix)
    if terms:
        recall._match_filter(plan, terms)
    not_valid = "0"
    if as_of_ns is not None:
        plan.params["as_of"] = as_of_ns
        not_valid = ("NOT ((f.valid_from_ns IS NULL OR f.valid_from_ns <= :as_of) "
                     "AND (f.valid_to_ns IS NULL OR :as_of < f.valid_to_ns))")
    superseded = "0" if include_superseded else "f.superseded_by IS NOT NULL"
    reason = (f"CASE WHEN f.deleted THEN 'deleted' WHEN {not_valid} THEN 'not_valid_at_as_of' "
              f"WHEN {superseded} THEN 'superseded' END")
    sql = (f"SELECT reason, count(*) FROM (SELECT {reason} AS reason FROM facts f JOIN recall_text t "
           f"ON t.seq = f.seq WHERE {' AND '.join(plan.where)}) WHERE reason IS NOT NULL GROUP BY reason")
    return {r: n for r, n in recall.db.execute(sql, plan.params)}


def explain(recall, result, query: Optional[str], *, tenant: Optional[str] = None, agent: Optional[str] = None,
            entity: Optional[str] = None, entity_prefix: Optional[str] = None, as_of: Optional[str] = None,
            known_at: Optional[str] = None, include_superseded: bool = False) -> dict[str, Any]:
    """The explanation of one `query_facts` result (called right after it, with the same arguments)."""
    if known_at is not None:
        raise InvalidInput("explain works on the current state: it does not combine with known_at")
    terms = scope.split_terms(query) if query is not None else None
    as_of_ns = timestamps.column_ns(timestamps.parse_ns(as_of)) if as_of is not None else None
    agent = scope.normalize_agent(agent)
    tenant_name = scope.normalize_tenant(tenant)
    ids = [r["fact_id"] for r in result.rows]
    counts: dict[str, int] = {}
    if ids:
        marks = ",".join("?" * len(ids))
        counts = {fid: n for fid, n in recall.db.execute(
            f"SELECT f.fact_id, f.access_count + coalesce(s.access_count, 0) FROM facts f LEFT JOIN recall_salience s "
            f"ON s.fact_id = f.fact_id WHERE f.fact_id IN ({marks})", ids)}
    policy = recall.decay()
    left_out = _exclusions(recall, terms, tenant_name, agent, entity, entity_prefix, as_of_ns,
                           include_superseded) if terms != [] else {}
    left_out["below_floor"] = result.filtered_below_threshold
    left_out["over_budget_or_top_k"] = result.left_out
    return {"rows": [_row_explanation(r, terms, counts.get(r["fact_id"], 0), policy) for r in result.rows],
            "terms": terms or [], "left_out": {k: v for k, v in left_out.items() if v}}


def explain_lines(explanation: dict[str, Any]) -> list[str]:
    """A few tokens per row: `  why: "deploy" in value,key; 0.95 x 1.0 (fresh, stable 8760h)`."""
    lines = []
    for row in explanation["rows"]:
        matched = "; ".join(f'"{t}" in {",".join(fields)}' for t, fields in row["matched_terms"].items())
        horizon = row["horizon_class"] + (f" {row['horizon_hours']:g}h" if "horizon_hours" in row else "")
        salience = f" x salience {row['salience']:g} ({row['access_count']} recalls)" if "salience" in row else ""
        lines.append(f"  why: {matched or 'no term filter'}; {row['confidence']:.2f} x {row['decay']:g} = "
                     f"{row['effective_confidence']:.2f} ({row['freshness']}, {horizon}{salience})")
    return lines


def left_out_line(explanation: dict[str, Any]) -> str:
    parts = [f"{n} {reason.replace('_', ' ')}" for reason, n in explanation["left_out"].items()]
    return "-- left out: " + (", ".join(parts) if parts else "nothing")
