"""What every verb returns: one text payload (plain grouped lines) plus structured data for scripts.

`mcp_payload()` is the shape an MCP tool returns (text content + structuredContent), as the recall
and document lanes do for their Crux tools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LINE_CAP = 160


@dataclass
class Reply:
    text: str
    data: dict[str, Any]
    files: list[str] = field(default_factory=list)   # files whose full read the reply stands in for

    def mcp_payload(self) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": self.text}], "structuredContent": self.data}


def trim(line: str, focus: int = 0, cap: int = LINE_CAP) -> str:
    """A line stripped and capped at `cap` characters, windowed around column `focus` with `…` marks."""
    text = line.strip()
    if len(text) <= cap:
        return text
    offset = max(0, len(line) - len(line.lstrip()))
    focus = max(0, focus - offset)
    start = max(0, min(focus - cap // 3, len(text) - cap))
    window = text[start:start + cap - 2]
    return ("…" if start else "") + window + ("…" if start + cap - 2 < len(text) else "")


def thousands(n: int) -> str:
    return f"{n:,}"
