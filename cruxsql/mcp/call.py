"""`Call`: what a tool function receives besides its arguments: who it acts for and the store's features."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, overload

from ..accounting.holdout import Holdout
from ..accounting.usage import NEAR, Standing, TokenLedger
from ..errors import NotFound
from ..facts.codec import Fact
from ..facts.store import Store
from ..recall import scope
from ..recall.tokens import POINTER_TOKENS
from .identity import Identity
from .registry import ToolError

if TYPE_CHECKING:     # imported when a tool uses them, not at every server start
    from ..documents.lane import DocumentLane
    from ..recall import Recall

NOTE_TOKENS = 40     # room kept for the note that says an answer was shaped


@dataclass
class Call:
    """One tool call: the connection's identity, the store, its features, and the accounting state."""

    identity: Identity
    store: Store
    recall: Recall
    ledger: TokenLedger
    holdout: Holdout
    standing: Standing
    control: bool = False                    # the savings holdout put this request in the control arm
    lane_factory: Optional[Callable[[], DocumentLane]] = None
    notes: list[str] = field(default_factory=list)
    allowance: Optional[int] = None          # tokens this answer may take before the session limit (None: no limit)

    @property
    def agent(self) -> Optional[str]:
        return self.identity.agent

    @property
    def tenant(self) -> str:
        return self.identity.tenant

    @property
    def lane(self) -> DocumentLane:
        assert self.lane_factory is not None
        return self.lane_factory()

    def visible_fact(self, fact_id: str, include_deleted: bool = False) -> Optional[Fact]:
        """The fact in this connection's tenant if this caller may see it (another agent's private fact is
        not found), else None; deleted facts only with `include_deleted`."""
        try:
            fact = self.store.get(fact_id, tenant=self.tenant)
        except NotFound:
            return None
        if (fact.deleted and not include_deleted) or scope.visible_entity(fact.entity, fact.private,
                                                                           self.agent) is None:
            return None
        return fact

    def require_agent(self, tool: str) -> str:
        """Crux's passport check for memory writes: anonymous connections are refused."""
        if self.agent is None:
            raise ToolError(f"{tool} requires an authenticated passport (anonymous calls rejected)")
        return self.agent

    @overload
    def budget(self, requested: int) -> int: ...
    @overload
    def budget(self, requested: Optional[int]) -> Optional[int]: ...

    def budget(self, requested: Optional[int]) -> Optional[int]:
        """The token budget to shape an answer to: the requested one, cut down to what is left of the
        session (half of it: the text and the structured content each get the budget; a note says so).
        An answer without a requested budget is shaped once the agent nears its limit."""
        if self.allowance is None or (requested is None and self.standing.state != NEAR):
            return requested
        cap = max(POINTER_TOKENS, (self.allowance - NOTE_TOKENS) // 2)
        if requested is not None and requested <= cap:
            return requested
        self.notes.append(f"session budget: {self.standing.used} of {self.standing.limit} tokens used; "
                          f"answer shaped to token_budget={cap}")
        return cap
