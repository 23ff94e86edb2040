"""The compact fact line: one fact as an agent acts on it, `entity · key: value`, then only the fields
asked for or useful (an age of a day or more, `stale`, the fact id), each after ` · `.

`recall` answers in these lines; so does `query_facts` when its token budget is below the least CRC-v1
envelope (facade.py). `fitted` keeps as many lines as a budget holds: the first always, its value cut
to fit (ending in `…`) when whole it does not. `shared` (recall) first cuts the longest values to a common
length, down to MIN_SHARED_CHARS, so that every line asked for fits, and only then leaves lines out.
"""

from __future__ import annotations

from typing import Callable, Optional

from .tokens import CHARS_PER_TOKEN, cut_utf8

SEPARATOR = " · "
CUT = "…"
MIN_SHARED_CHARS = 80      # `shared` cuts no value below this many bytes before it leaves lines out


def fact_line(entity: str, key: str, value: str, *fields: str) -> str:
    """`entity · key: value`, then each non-empty field after ` · `."""
    return SEPARATOR.join((f"{entity}{SEPARATOR}{key}: {value}", *(f for f in fields if f)))


def fitted(n: int, line: Callable[[int, Optional[str]], str], value: Callable[[int], str],
           cost: Callable[[list[str]], int], budget: int) -> list[str]:
    """The lines of the first k of `n` items whose answer (`cost(lines)`, whatever the caller wraps around
    them counted) fits `budget`; `line(i, None)` is item i whole, `line(i, v)` with its value replaced."""
    lines: list[str] = []
    for i in range(n):
        lines.append(line(i, None))
        if cost(lines) <= budget:
            continue
        if i > 0:
            lines.pop()
            return lines
        whole = value(0).encode("utf-8")
        keep = len(whole)
        while cost(lines) > budget and keep > 0:   # the first alone does not fit: cut its value
            keep = max(0, keep - (cost(lines) - budget) * CHARS_PER_TOKEN - 8)
            lines[0] = line(0, cut_utf8(value(0), keep) + CUT)
        return lines
    return lines


def shared(n: int, line: Callable[[int, Optional[str]], str], value: Callable[[int], str],
           cost: Callable[[list[str]], int], budget: int) -> list[str]:
    """`fitted`, but when the n whole lines do not fit, the values longer than a common cap are cut to it
    (ending in `…`), the largest cap from MIN_SHARED_CHARS up at which all n lines fit; when none does,
    the lines cut to MIN_SHARED_CHARS are `fitted`."""
    whole = [line(i, None) for i in range(n)]
    if n <= 1 or cost(whole) <= budget:
        return fitted(n, line, value, cost, budget)
    values = [value(i).encode("utf-8") for i in range(n)]

    def capped(i: int, cap: int) -> str:
        return whole[i] if len(values[i]) <= cap else line(i, cut_utf8(value(i), cap) + CUT)

    low, high = MIN_SHARED_CHARS, max(map(len, values))
    if cost([capped(i, low) for i in range(n)]) > budget:
        return fitted(n, lambda i, v: capped(i, low) if v is None else line(i, v), value, cost, budget)
    while low < high:                     # the largest cap at which every line fits
        mid = (low + high + 1) // 2
        if cost([capped(i, mid) for i in range(n)]) <= budget:
            low = mid
        else:
            high = mid - 1
    return [capped(i, low) for i in range(n)]
