"""A `token_budget` held on the wire: what an answer costs an agent, and the longest answer that fits.

An answer costs what the server's own accounting charges for it (`server.py`): chars/4 of the whole MCP
result, text, structured content and the frame around them. A tool that cuts a list to a budget keeps
the longest prefix whose whole answer fits, and always its first item (Crux's rule for every budgeted
list: the first row is always added), so one item is the answer's floor.
"""

from __future__ import annotations

from typing import Callable

import mcp_types as types

from ..recall.tokens import estimate_tokens
from .registry import ToolResult


def wire_tokens(result: ToolResult) -> int:
    """chars/4 of `result` as the agent receives it (without session notes, which the call adds)."""
    wire = types.CallToolResult(content=[types.TextContent(type="text", text=result.text)],
                                structured_content=result.structured, is_error=result.is_error)
    return estimate_tokens(wire.model_dump(mode="json", by_alias=True, exclude_none=True))


def longest_within(count: int, answer: Callable[[int], ToolResult], budget: int) -> int:
    """The most leading items (of `count`, at least one when there is one) whose `answer(n)` fits
    `budget` tokens on the wire; answers grow with n, so a binary search."""
    if count == 0 or wire_tokens(answer(count)) <= budget:
        return count
    lo, hi = 1, count - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if wire_tokens(answer(mid)) <= budget else (lo, mid - 1)
    return lo


def shaped_within(budget: int, answer: Callable[[int], ToolResult], tries: int = 6) -> ToolResult:
    """`answer(b)` for the largest b ≤ `budget` (found in a few proportional steps) whose whole answer fits
    `budget` on the wire: for a tool that shapes each channel to the budget it is given. Past `tries`, or
    at b = 1, the last answer: the tool's own floor."""
    shaped = budget
    result = answer(shaped)
    for _ in range(tries):
        cost = wire_tokens(result)
        if cost <= budget or shaped <= 1:
            break
        shaped = max(1, min(shaped - 1, shaped * budget // cost))
        result = answer(shaped)
    return result
