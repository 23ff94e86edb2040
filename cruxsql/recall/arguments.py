"""Checks of recall's arguments: each a clear one-line `InvalidInput` naming the bad value."""

from __future__ import annotations

import math
from typing import Optional, Union, overload

from ..errors import InvalidInput
from ..facts import timestamps
from ..facts.codec import to_f32

# An instant: an RFC 3339 timestamp, epoch nanoseconds, or none.
TimeArg = Union[None, str, int]


def time_arg(value: TimeArg, name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be an RFC 3339 timestamp (e.g. 2026-01-15T00:00:00Z), got {value!r}")
    if isinstance(value, int):
        return value
    try:
        return timestamps.column_ns(timestamps.parse_ns(value))  # compared with the view's *_ns columns
    except InvalidInput:
        raise InvalidInput(
            f"{name} must be an RFC 3339 timestamp (e.g. 2026-01-15T00:00:00Z), got {value!r}") from None


@overload
def count_arg(value: int, name: str) -> int: ...
@overload
def count_arg(value: Optional[int], name: str) -> Optional[int]: ...
def count_arg(value: Optional[int], name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}")
    return value


def floor_arg(value: Optional[float]) -> Optional[float]:
    """Validated as f64 in 0.0..=1.0, then cast to f32 as `handle_query_facts` does (`f as f32`), and
    compared widened back to f64: a fact at 0.7 clears a 0.7 floor."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"min_effective_confidence must be a number in 0.0..=1.0, got {value!r}")
    return to_f32(value)
