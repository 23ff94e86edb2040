"""The CRC-v1 fact envelope (Crux's crates/crux-mcp/src/crc_v1.rs): `wrap_facts` / `wrap_facts_tiered`.

The leading `full_count` rows are hydrated in full; the rest of the emitted rows become epitome
pointers carrying a `content_hash`; whatever was not emitted is disclosed in `meta.total_candidates`
and `meta.capped`. Nothing is silently lost.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

from .tokens import POINTER_TOKENS, SUMMARY_TOKENS, content_hash, crc_full_cost, epitome

CONTRACT = "crc-v1"
SCHEMA_URL = "https://cuecrux.com/contracts/crc-v1.schema.json"
LEGACY_CONTRACTS = ("legacy", "v0", "none", "off")


def enabled(contract: Optional[str]) -> bool:
    """`crc_v1::enabled`: CRC-v1 unless the contract (trimmed, lowercased) is legacy|v0|none|off."""
    if contract is None:
        return True
    return contract.strip().lower() not in LEGACY_CONTRACTS


def _val(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def wrap_facts_tiered(rows: Sequence[Mapping[str, Any]], entity: Optional[str], query: Optional[str],
                      full_count: int, total_candidates: int) -> dict[str, Any]:
    """The fact envelope over the emitted `rows` (already cut to the emit count)."""
    pointers: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    memories: list[dict[str, Any]] = []
    full_cost = 0
    emitted = demoted = 0
    for row in rows:
        fact_id = row.get("fact_id")
        if not isinstance(fact_id, str) or not fact_id:
            continue
        val = _val(row.get("value"))
        ent, key = row.get("entity", ""), row.get("key", "")
        full_cost += crc_full_cost(val)
        score = row.get("effective_confidence")
        pointer: dict[str, Any] = {"id": fact_id, "score": score, "epitome": epitome(str(ent), str(key), val)}
        if emitted < full_count:
            pointer["reason"] = "Exact"
            content.append({"id": fact_id, "text": val})
        else:
            pointer["reason"] = "Demoted"
            pointer["content_hash"] = content_hash(val)
            demoted += 1
        pointers.append(pointer)
        memories.append({"fact_id": fact_id, "topic": ent, "freshness": row.get("freshness")})
        emitted += 1
    n = len(pointers)
    first = rows[0] if rows else {}
    meta: dict[str, Any] = {"resolved_by": "entity+key" if entity else "query", "ranked": bool(query) and not entity}
    capped = total_candidates - n
    if demoted > 0 or capped > 0:
        meta["demoted"] = demoted
        meta["total_candidates"] = total_candidates
        meta["emitted_full"] = n - demoted
        if capped > 0:
            meta["capped"] = capped
    return {
        "contract": CONTRACT,
        "kind": "fact",
        "hydrate_tier": "full" if demoted == 0 else "mixed",
        "pointers": pointers,
        "content": content,
        "cost_estimate": {"pointer": POINTER_TOKENS * n, "summary": SUMMARY_TOKENS * n, "full": full_cost},
        "agent_decision": None,
        "envelope": {
            "freshness": {
                "effective_confidence": first.get("effective_confidence"),
                "age_hours": first.get("age_hours"),
                "horizon_class": first.get("horizon_class"),
                "superseded_by": first.get("superseded_by"),
            },
            "receipts_used": [],
            "memories_used": memories,
            "autonomy_consumed": {"capability": "facts:read", "cost_credits": 0, "scope": "agent"},
            "links": {},     # Crux links its own hosted console here; cruxsql has no such page to point at
        },
        "next": {"canonical_slug": entity or (first.get("entity") if rows else None), "resolution_pointer": None,
                 "expand": None},
        "meta": meta,
    }


# `tool_output_kind`: the CRC-v1 kind each tool emits, in the catalogue's order.
TOOL_OUTPUT_KINDS = (("query", "search"), ("query_scan", "search"), ("query_expand", "addressed"),
                     ("query_facts", "fact"))


def tool_output_catalogue() -> list[tuple[str, str, str]]:
    """`crc_v1::tool_output_catalogue`: the synthesized `__bootstrap__::tool-output:*` entries that
    `get_bootstrap("tool-output")` appends, as (entity, key, value rendered as compact JSON in the
    daemon's insertion order, as `format!("{value}")` prints a serde_json Value)."""
    def render(value: dict[str, Any]) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    out = [("__bootstrap__::tool-output:_contract", CONTRACT, render({
        "schema": SCHEMA_URL,
        "negotiate": 'contract:"v1" arg (MCP) | Accept-Contract: crc-v1 (HTTP)',
        "envelope": "pointers + cost_estimate + agent_decision + envelope{freshness,receipts,links} + next",
        "default_when_negotiated": "hydrate=pointer (cheap); expand via next.expand",
    }))]
    for tool, kind in TOOL_OUTPUT_KINDS:
        out.append((f"__bootstrap__::tool-output:{tool}", tool,
                    render({"contract": CONTRACT, "kind": kind, "schema": SCHEMA_URL})))
    return out


def wrap_facts(rows: Sequence[Mapping[str, Any]], entity: Optional[str], query: Optional[str]) -> dict[str, Any]:
    """Every row in full."""
    return wrap_facts_tiered(rows, entity, query, len(rows), len(rows))
