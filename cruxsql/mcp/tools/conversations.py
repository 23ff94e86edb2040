"""Conversations as memory: store_conversation (cruxsql's own tool; the turns are ordinary facts that
`recall` finds beside every other fact)."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict

from ...recall.conversations import TurnInput, store_conversation as store_turns
from ..call import Call
from ..registry import WRITE, ToolError, ToolResult, shape, tool, writes


class ConversationTurn(BaseModel):
    # (no docstring: pydantic would send it to the agent in every tools/list)
    model_config = ConfigDict(extra="forbid", strict=True)
    speaker: str
    text: str
    time: Optional[str] = None
    session: Optional[str] = None
    id: Optional[str] = None


@tool(kind=WRITE, hints=writes("Store a conversation", destructive=False, idempotent=False),
      output=shape(stored="integer", conversation="string", first_position="integer", last_position="integer",
                   fact_ids="array"))
def store_conversation(call: Call, conversation: str, turns: list[ConversationTurn], private: bool = False,
                       idempotency_key: Optional[str] = None) -> ToolResult:
    """Store a conversation's turns verbatim, in order, after those already stored; recall finds them.
    time: RFC 3339 or a date; id: your turn id (recall shows it with ids=true). At most 10000 turns a call."""
    if private and call.agent is None:
        raise ToolError("private turns require an authenticated agent identity")
    stored = store_turns(call.store, conversation, [
        TurnInput(t.speaker, t.text, t.time, t.session, t.id) for t in turns],
        tenant=call.tenant, agent=call.agent, actor=call.agent, private=private, idempotency_key=idempotency_key)
    return ToolResult(stored.text(), stored.structured())
