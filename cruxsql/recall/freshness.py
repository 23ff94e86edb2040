"""Freshness, decay and salience (Crux's crates/corecrux-projections/src/decay.rs).

A fact's freshness is judged from its anchor (`reverified_at`, else `stored_at`, in whole
milliseconds) against a threshold set by its horizon class and stretched by salience (how often it
was recalled). A stale fact's effective confidence is halved; `unknown` is not demoted.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional

from ..facts.codec import HORIZON_CLASSES, default_horizon_for_entity, parse_horizon
from .scope import RUST_WHITESPACE

DEFAULT_VOLATILE_HOURS = 24
DEFAULT_MEDIUM_DAYS = 35
DEFAULT_STABLE_DAYS = 365
SALIENCE_SLOPE = 0.25
SALIENCE_MAX_FACTOR = 4.0
STALE_DEMOTION_FACTOR = 0.5
HOUR_MS = 3_600_000
HOUR_NS = 3_600_000_000_000
DAY_MS = 86_400_000
_I64_MAX = 2**63 - 1

FRESH, STALE, UNKNOWN = "fresh", "stale", "unknown"
SALIENCE_ENV = "CORECRUXD_MEMORY_SALIENCE"
VOLATILE_ENV = "CORECRUXD_DECAY_VOLATILE_HOURS"
MEDIUM_ENV = "CORECRUXD_DECAY_MEDIUM_DAYS"
STABLE_ENV = "CORECRUXD_DECAY_STABLE_DAYS"

__all__ = [
    "DecayPolicy", "HORIZON_CLASSES", "default_horizon_for_entity", "parse_horizon", "parse_freshness_horizon",
    "salience_factor", "freshness_at", "effective_confidence", "age_hours", "age_days", "ns_to_ms",
    "salience_enabled",
]


_RUST_I64 = re.compile(r"[+-]?[0-9]+")


def parse_rust_i64(text: str) -> Optional[int]:
    """`text.trim().parse::<i64>()`: Unicode White_Space trimmed, an optional sign, ASCII digits only
    (no `_`, no other digits, no inner spaces), within i64; None where Rust returns an error."""
    trimmed = text.strip(RUST_WHITESPACE)
    if not _RUST_I64.fullmatch(trimmed):
        return None
    value = int(trimmed)
    return value if -_I64_MAX - 1 <= value <= _I64_MAX else None


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    value = None if raw is None else parse_rust_i64(raw)
    return value if value is not None and value > 0 else default


@dataclass(frozen=True)
class DecayPolicy:
    """`DecayPolicy`: the stale thresholds per horizon class."""

    volatile_hours: int = DEFAULT_VOLATILE_HOURS
    medium_days: int = DEFAULT_MEDIUM_DAYS
    stable_days: int = DEFAULT_STABLE_DAYS

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "DecayPolicy":
        """Env overrides: trimmed, parsed as i64, must be > 0, else the default."""
        env = os.environ if env is None else env
        return cls(_positive_int(env, VOLATILE_ENV, DEFAULT_VOLATILE_HOURS),
                   _positive_int(env, MEDIUM_ENV, DEFAULT_MEDIUM_DAYS),
                   _positive_int(env, STABLE_ENV, DEFAULT_STABLE_DAYS))

    def base_ms(self, horizon_class: str) -> Optional[int]:
        """The un-stretched stale threshold in ms (saturating), None for class `none`."""
        if horizon_class == "volatile":
            value = self.volatile_hours * HOUR_MS
        elif horizon_class == "medium":
            value = self.medium_days * DAY_MS
        elif horizon_class == "stable":
            value = self.stable_days * DAY_MS
        else:
            return None
        return min(value, _I64_MAX)

    def to_dict(self) -> dict:
        return {"volatile_stale_hours": self.volatile_hours, "medium_stale_days": self.medium_days,
                "stable_stale_days": self.stable_days}


def salience_factor(access_count: int) -> float:
    """clamp(1 + 0.25 * ln(n + 1), 1.0, 4.0)."""
    return min(max(1.0 + SALIENCE_SLOPE * math.log(access_count + 1), 1.0), SALIENCE_MAX_FACTOR)


def ns_to_ms(ns: int) -> int:
    """chrono's `timestamp_millis`: floor division of epoch nanoseconds."""
    return ns // 1_000_000


def threshold_ms(horizon_class: str, access_count: int, policy: DecayPolicy) -> Optional[int]:
    base = policy.base_ms(horizon_class)
    if base is None:
        return None
    return min(int(base * salience_factor(access_count)), _I64_MAX)


def freshness_at(horizon_class: str, anchor_ms: int, now_ms: int, access_count: int = 0,
                 policy: Optional[DecayPolicy] = None) -> str:
    """`apply_at_salient`: fresh / stale / unknown."""
    if horizon_class == "none":
        return FRESH
    if anchor_ms <= 0 or now_ms <= 0 or anchor_ms > now_ms:
        return UNKNOWN
    threshold = threshold_ms(horizon_class, access_count, policy or DecayPolicy())
    if threshold is None:  # not a class with a horizon (the codec admits only the four): as `none`
        return FRESH
    return STALE if now_ms - anchor_ms > threshold else FRESH


def effective_confidence(confidence: float, freshness: str) -> float:
    """Stored confidence (as f64), halved when stale."""
    return float(confidence) * STALE_DEMOTION_FACTOR if freshness == STALE else float(confidence)


def age_hours(anchor_ns: int, now_ns: int) -> int:
    """`(now - anchor).num_hours().max(0)`: whole hours of the nanosecond difference, floored at 0."""
    return max(0, (now_ns - anchor_ns) // HOUR_NS)


def age_days(written_ms: int, now_ms: int) -> Optional[int]:
    if written_ms <= 0 or now_ms <= 0 or written_ms > now_ms:
        return None
    return (now_ms - written_ms) // DAY_MS


_DIGITS = re.compile(r"[0-9]+")


def parse_freshness_horizon(text: str) -> str:
    """Crux's `parse_freshness_horizon`: map a free-text freshness horizon ("3 days", "stable", "hourly") to a class."""
    t = "".join(c.lower() if c.isascii() else c for c in text)
    if "hour" in t:
        return "volatile"
    if any(w in t for w in ("stable", "frozen", "immutable", "historical", "architect", "year")):
        return "stable"
    if "month" in t or "week" in t:
        return "medium"
    if "day" in t:
        for run in _DIGITS.finditer(t):
            value = int(run.group())
            if value <= 2**64 - 1:
                return "volatile" if value <= 2 else "medium"
        return "medium"
    return "none"


def salience_enabled(env: Optional[Mapping[str, str]] = None) -> bool:
    """`CORECRUXD_MEMORY_SALIENCE` truthy (1/true/yes/on, trimmed, case-insensitive)."""
    env = os.environ if env is None else env
    return env.get(SALIENCE_ENV, "").strip().lower() in ("1", "true", "yes", "on")
