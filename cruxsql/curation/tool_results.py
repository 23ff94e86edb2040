"""What the curation tools share with the MCP surface: JSON-RPC error codes, `ToolError`, and Crux's
feature-flag rule."""

from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from ..errors import CruxsqlError

INVALID_PARAMS, INTERNAL_ERROR, METHOD_NOT_FOUND, CAPABILITY_DENIED = -32602, -32603, -32601, -32030
_OFF = ("", "0", "false", "off", "no")


class ToolError(CruxsqlError):
    """A JSON-RPC tool error: `code`, Crux's message, `data`."""

    def __init__(self, code: int, message: str, data: Optional[dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


def flag_on(name: str, default: bool, env: Optional[Mapping[str, str]] = None) -> bool:
    """Crux's opt-out/opt-in flag rule: unset -> default; set -> off for ""/0/false/off/no."""
    env = os.environ if env is None else env
    if name not in env:
        return default
    return env[name].strip().lower() not in _OFF
