"""Accounting tools: session_token_usage and token_savings (crux-mcp's tools/token_savings.rs, tools/token_usage.rs).

Crux returns their fields as top-level keys beside `content`; the MCP SDK's result model has no room
for extra keys, so here they are the structured content.
"""

from __future__ import annotations

from typing import Optional

from ..call import Call
from ..registry import ACCOUNTING, ToolResult, reads, shape, tool


@tool(kind=ACCOUNTING, hints=reads("Session token usage"),
      output=shape(passport="string", used="integer", tokens_in="integer", tokens_out="integer",
                   declared_budget_in="integer", calls="integer", estimator="string",
                   limit="integer", pct="integer"))
def session_token_usage(call: Call, token_budget: Optional[int] = None) -> ToolResult:
    """Tokens this agent used this session, and its limit."""
    report = call.ledger.session_payload(call.agent)
    return ToolResult(report["text"], report["fields"])


@tool(kind=ACCOUNTING, hints=reads("Token savings"),
      output=shape(holdout_enabled="boolean", holdout_fraction="number", compaction="object",
                   net="object"))
def token_savings(call: Call) -> ToolResult:
    """What output shaping saved, measured against the holdout's unshaped control arm."""
    report = call.holdout.token_savings_payload()
    return ToolResult(report["text"], report["fields"])
