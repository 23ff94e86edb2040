"""Crux's boolean polarity classifier (`polarity_class_v1`, fact_store.rs).

The whole value, trimmed of whitespace and then of leading/trailing characters that are neither
alphanumeric nor `_`, ASCII-lowercased, must equal one of 27 words.
"""

from __future__ import annotations

import re
from typing import Optional

POSITIVE = ("true", "yes", "y", "on", "enabled", "enable", "active", "complete", "completed", "passed", "pass",
            "approved", "approve", "present")
NEGATIVE = ("false", "no", "n", "off", "disabled", "disable", "inactive", "blocked", "failed", "fail", "rejected",
            "reject", "absent")
_CLASS = {**{w: "positive" for w in POSITIVE}, **{w: "negative" for w in NEGATIVE}}
_LONGEST = max(len(w) for w in _CLASS)

# Rust `char::is_alphanumeric() || c == '_'` is Python's Unicode `\w`; strip everything else at the ends.
_EDGES = re.compile(r"^\W+|\W+\Z")


def polarity_class_v1(value: str) -> Optional[str]:
    """"positive", "negative" or None (Crux `polarity_class_v1`)."""
    core = _EDGES.sub("", value.strip())
    if len(core) > _LONGEST or not core.isascii():
        return None
    return _CLASS.get(core.lower())
