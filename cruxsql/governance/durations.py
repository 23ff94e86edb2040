"""Cutoffs for retention, erasure and exports: `90d`, `12h`, `30m`, `2w`, `45s`, or an RFC 3339 instant.

A duration means "that long before now"; an RFC 3339 timestamp is taken as is. Everything is UTC epoch
nanoseconds, like the rest of cruxsql.
"""

from __future__ import annotations

import re
from typing import Optional

from ..errors import InvalidInput
from ..facts import timestamps

_UNITS_NS = {
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
    "d": 86_400 * 1_000_000_000,
    "w": 7 * 86_400 * 1_000_000_000,
}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$", re.IGNORECASE)


def parse_duration_ns(text: str) -> int:
    """`90d` -> nanoseconds. Units: s, m, h, d, w. InvalidInput names the text otherwise."""
    m = _DURATION.match(text) if isinstance(text, str) else None
    if m is None:
        raise InvalidInput(f"invalid duration {text!r} (expected e.g. 90d, 12h, 30m, 2w, 45s)")
    return int(m.group(1)) * _UNITS_NS[m.group(2).lower()]


def parse_cutoff(text: str, now_ns: Optional[int] = None) -> int:
    """A cutoff instant: now minus a duration (`90d`), or an RFC 3339 timestamp."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("a cutoff is required: a duration such as 90d or 12h, or an RFC 3339 timestamp")
    if _DURATION.match(text):
        now = timestamps.now_ns() if now_ns is None else now_ns
        return timestamps.check_range(now - parse_duration_ns(text), text)
    try:
        return timestamps.column_ns(timestamps.parse_ns(text.strip()))  # compared with stored_at_ns
    except InvalidInput:
        raise InvalidInput(
            f"invalid cutoff {text!r}: expected a duration such as 90d, 12h, 30m, 2w, 45s or an RFC 3339 timestamp"
        ) from None
