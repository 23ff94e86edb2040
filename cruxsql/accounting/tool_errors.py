"""The last error of each MCP tool (`tool_errors` in the view), so `cruxsql doctor` can report it."""

from __future__ import annotations

from typing import Optional

import apsw

from ..facts import timestamps
from .usage import agent_key


def record_error(db: apsw.Connection, tool: str, agent: Optional[str], message: str, internal: bool,
                 at_ns: Optional[int] = None) -> None:
    """Keep `message` as the latest error of `tool` (internal failures and refusals kept apart)."""
    at_ns = timestamps.now_ns() if at_ns is None else at_ns
    with db:
        db.execute(
            "INSERT INTO tool_errors (tool, internal, agent, at, at_ns, message) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
            "ON CONFLICT (tool, internal) DO UPDATE SET agent = ?3, at = ?4, at_ns = ?5, message = ?6, "
            "errors = errors + 1",
            (tool, int(internal), agent_key(agent), timestamps.format_event_time(at_ns), at_ns, message[:1000]))
