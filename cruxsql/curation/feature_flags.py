"""Crux's feature-flag rule, shared by the curation features (their refusals are `errors.ToolError`s)."""

from __future__ import annotations

import os
from typing import Mapping, Optional

_OFF = ("", "0", "false", "off", "no")


def flag_on(name: str, default: bool, env: Optional[Mapping[str, str]] = None) -> bool:
    """Crux's opt-out/opt-in flag rule: unset -> default; set -> off for ""/0/false/off/no."""
    env = os.environ if env is None else env
    if name not in env:
        return default
    return env[name].strip().lower() not in _OFF
