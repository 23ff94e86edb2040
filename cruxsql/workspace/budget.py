"""Token estimates for workspace payloads and the value-ordered packer of ctx_context.

The estimate is `max(words × 1.3, chars / 4)`: chars/4 alone undercounts prose and words alone
undercounts dense code. Counts are estimates and are printed as `~N tok`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def estimate_tokens(text: str) -> int:
    if not text:
        return 0
    return max(1, math.ceil(max(len(text.split()) * 1.3, len(text) / 4)))


@dataclass(frozen=True)
class Part:
    """One renderable section: `value` orders admission, `order` orders emission; `lean` is a cheaper form."""

    name: str
    value: int
    order: int
    rich: str
    lean: str = ""
    handle: str = ""


def pack(parts: list[Part], budget: int) -> tuple[str, list[str]]:
    """Admit parts by value while the budget allows (rich, else lean), emit them in document order.

    Every dropped or downgraded part leaves one marker line; markers are charged to the budget too, so
    the block never exceeds it (a marker that would not fit is left out).
    """
    admitted: list[tuple[int, str]] = []
    markers: list[tuple[int, str]] = []
    used = 0
    for part in sorted(parts, key=lambda p: p.value):
        rich_cost = estimate_tokens(part.rich) + 1
        if used + rich_cost <= budget:
            admitted.append((part.order, part.rich))
            used += rich_cost
            continue
        where = f" → ctx_expand {part.handle}" if part.handle else ""
        if part.lean and used + estimate_tokens(part.lean) <= budget:
            marker = f"[downgraded: {part.name} ~{rich_cost} tok{where}]"
            chosen = part.lean + "\n" + marker
            if used + estimate_tokens(chosen) <= budget:
                admitted.append((part.order, chosen))
                used += estimate_tokens(chosen)
                continue
        marker = f"[omitted: {part.name} ~{rich_cost} tok{where}]"
        if used + estimate_tokens(marker) <= budget:
            markers.append((part.order, marker))
            used += estimate_tokens(marker)
    blocks = sorted(admitted + markers)
    return "\n".join(text for _, text in blocks), [text for _, text in markers]
