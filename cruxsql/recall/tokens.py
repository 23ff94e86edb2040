"""Token estimators and budget tiers (Crux's crates/crux-mcp/src/budget.rs, token_estimate.rs).

Crux counts tokens with a ~4-bytes-per-token heuristic, not a model tokenizer, and uses several
estimators; each call site below names the one it mirrors. Budgets are comparable with each other,
not with a provider's usage report.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

CHARS_PER_TOKEN = 4
POINTER_TOKENS = 40
SUMMARY_TOKENS = 150
EPITOME_BYTES = 80
_MASK = (1 << 64) - 1


def compact_json(value: Any) -> str:
    """`serde_json::to_string`: no whitespace, raw UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def serialized_len(value: Any) -> int:
    """`token_estimate::serialized_len`: the compact JSON byte length."""
    return len(compact_json(value).encode("utf-8"))


def estimate_tokens(value: Any) -> int:
    """`token_estimate::estimate_tokens`: max(1, compact JSON bytes // 4)."""
    return max(1, serialized_len(value) // CHARS_PER_TOKEN)


def estimate_tokens_str(text: str) -> int:
    """`token_estimate::estimate_tokens_str`: max(1, UTF-8 bytes // 4)."""
    return max(1, len(text.encode("utf-8")) // CHARS_PER_TOKEN)


def crc_full_cost(value: str) -> int:
    """CRC-v1 `cost_estimate.full` contribution of one fact: floor(UTF-8 bytes / 4)."""
    return len(value.encode("utf-8")) // CHARS_PER_TOKEN


def pointers_within_budget(budget: int) -> int:
    """`budget::pointers_within_budget`: max(1, budget // 40)."""
    return max(1, budget // POINTER_TOKENS)


def legacy_fill(costs: Sequence[int], budget: int) -> int:
    """The legacy greedy drop (facts.rs / fact_store.rs): how many ranked facts fit.

    Stop before a fact that would exceed the budget unless nothing is selected yet (the first fact
    is always admitted); stop once the budget is used up.
    """
    used = taken = 0
    for cost in costs:
        if taken and used + cost > budget:
            break
        used += cost
        taken += 1
        if used >= budget:
            break
    return taken


def fact_full_within_budget(costs: Sequence[int], budget: int) -> int:
    """`budget::fact_full_within_budget`: leading facts hydrated in full (at least one)."""
    if not costs:
        return 0
    used = full = 0
    for cost in costs:
        if full > 0 and used + cost > budget:
            break
        used += cost
        full += 1
        if used >= budget:
            break
    return min(max(full, 1), len(costs))


def fact_emit_within_budget(costs: Sequence[int], budget: int) -> tuple[int, int]:
    """`budget::fact_emit_within_budget` -> (full_count, emit_count): full facts, then epitomes."""
    full = fact_full_within_budget(costs, budget)
    remaining = max(0, budget - sum(costs[:full]))
    emit = min(full + remaining // POINTER_TOKENS, len(costs))
    return full, max(emit, full)


def content_hash(value: str) -> str:
    """`budget::content_hash`: FNV-1a 64 then the splitmix64 finaliser, 16 lowercase hex digits."""
    h = 0xCBF29CE484222325
    for byte in value.encode("utf-8"):
        h = ((h ^ byte) * 0x00000100000001B3) & _MASK
    h = (h + 0x9E3779B97F4A7C15) & _MASK
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK
    h ^= h >> 31
    return format(h, "016x")


def cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of `text` whose UTF-8 encoding fits `max_bytes`, cut at a character
    boundary (Crux's `String::truncate(80)` panics when byte 80 falls inside a character)."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    end = max_bytes
    while end > 0 and (data[end] & 0xC0) == 0x80:  # step back over continuation bytes
        end -= 1
    return data[:end].decode("utf-8")


def epitome(entity: str, key: str, value: str) -> str:
    """The CRC-v1 epitome: `"{entity} {key} = {value}"`, at most 80 bytes."""
    return cut_utf8(f"{entity} {key} = {value}", EPITOME_BYTES)


def largest_within(n: int, cost: Callable[[int], int], budget: int, least: int = 0) -> int:
    """The largest k in least..n whose `cost(k)` (growing with k) is at most `budget`, else `least`: how
    many items of an answer fit once its envelope is counted too (binary search, log n costings)."""
    lo, hi = least, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo
