"""Per-agent token usage (crates/crux-mcp/src/token_accounting.rs) and the enforced session budget (beyond Crux).

Every tool call is recorded under the connection's agent (`__anon__` without one): one call, the
chars/4 estimate of its arguments in and of its result (or error message) out, and the `token_budget`
it declared. Crux keeps these counters in memory only; here the session totals stay in memory (they
are what the budget is enforced on, and what `session_token_usage` reports) and every call is also
added to the `token_usage` view table, by agent and UTC day, for operators.

Budget: `CORECRUXD_SESSION_TOKEN_BUDGET` (a positive integer; 0, blank or unparseable = no limit) is
the limit for every agent, `CRUXSQL_SESSION_BUDGETS="alice:5000,bob:0"` sets one per agent (0 = none).
Crux only reports against the limit. cruxsql enforces it without overshooting: a read is shaped to what
is left (a requested token_budget always, an unbudgeted answer from `NEAR_SHARE` of the limit on), is
refused unrun when not even a pointer fits, and is refused after running when its answer, shaped, still
does not fit; a refused read costs the session nothing. Writes are never refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import apsw

from ..errors import InvalidInput
from ..facts import timestamps

ANON_AGENT = "__anon__"
SESSION_BUDGET_ENV = "CORECRUXD_SESSION_TOKEN_BUDGET"
AGENT_BUDGETS_ENV = "CRUXSQL_SESSION_BUDGETS"
NEAR_SHARE = 0.8
_U64_MAX = 2**64 - 1

OK, NEAR, OVER = "ok", "near", "over"


def parse_limit(text: Optional[str]) -> Optional[int]:
    """Crux's rule: a positive integer is a limit; 0, blank or unparseable means no limit."""
    try:
        value = int((text or "").strip())
    except ValueError:
        return None
    return value if value > 0 else None


def parse_agent_budgets(text: str) -> dict[str, Optional[int]]:
    """`name:limit` pairs, comma separated; a malformed pair is an error naming it."""
    out: dict[str, Optional[int]] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, limit = part.rpartition(":")
        if not sep or not name or not limit.strip().isdigit():
            raise InvalidInput(f"{AGENT_BUDGETS_ENV}: {part!r} is not name:tokens (a non-negative integer)")
        out[name] = parse_limit(limit)
    return out


@dataclass(frozen=True)
class BudgetPolicy:
    """The session token limit of each agent: a per-agent entry, else the default, else none."""

    default: Optional[int] = None
    per_agent: Mapping[str, Optional[int]] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None, default: Optional[int] = None) -> "BudgetPolicy":
        """`default` (the `--session-budget` option) overrides the environment's default limit."""
        env = os.environ if env is None else env
        base = default if default is not None else parse_limit(env.get(SESSION_BUDGET_ENV))
        return cls(base if base else None, parse_agent_budgets(env.get(AGENT_BUDGETS_ENV, "")))

    def limit_for(self, agent: str) -> Optional[int]:
        return self.per_agent[agent] if agent in self.per_agent else self.default


@dataclass
class Usage:
    """`PassportUsage`: saturating counters of one agent's calls this session."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    declared_budget_in: int = 0

    @property
    def total(self) -> int:
        return min(self.tokens_in + self.tokens_out, _U64_MAX)


@dataclass(frozen=True)
class Standing:
    """Where an agent stands against its limit: `ok`, `near` (shape answers down) or `over` (refuse)."""

    agent: str
    used: int
    limit: Optional[int]

    @property
    def state(self) -> str:
        if self.limit is None:
            return OK
        if self.used >= self.limit:
            return OVER
        return NEAR if self.used >= NEAR_SHARE * self.limit else OK

    @property
    def remaining(self) -> Optional[int]:
        return None if self.limit is None else max(0, self.limit - self.used)

    def refusal(self) -> str:
        """The one-line tool error of a refused call: usage and limit."""
        return (f"session token budget exhausted: agent {self.agent} used {self.used} of {self.limit} tokens; "
                "writes and session_token_usage still work")


def agent_key(agent: Optional[str]) -> str:
    """The passport key accounting uses: the agent name, `__anon__` without one."""
    return agent if agent else ANON_AGENT


class TokenLedger:
    """Session totals per agent (in memory) plus the `token_usage` table (by agent and UTC day)."""

    def __init__(self, db: apsw.Connection, policy: Optional[BudgetPolicy] = None) -> None:
        self.db = db
        self.policy = policy or BudgetPolicy()
        self.session: dict[str, Usage] = {}

    def record(self, agent: Optional[str], tokens_in: int, tokens_out: int, declared: Optional[int] = None,
               refused: bool = False, at_ns: Optional[int] = None) -> Usage:
        """Add one call (Crux records every call, failed ones too). A read refused for the session budget
        costs the session nothing (charging it would carry the session past its limit, and it returned no
        content); the day's row in `token_usage` records it in full, with `refused` counted."""
        key = agent_key(agent)
        declared = declared if declared is not None and declared > 0 else 0
        usage = self.session.setdefault(key, Usage())
        usage.calls = min(usage.calls + 1, _U64_MAX)
        if not refused:
            usage.tokens_in = min(usage.tokens_in + tokens_in, _U64_MAX)
            usage.tokens_out = min(usage.tokens_out + tokens_out, _U64_MAX)
        usage.declared_budget_in = min(usage.declared_budget_in + declared, _U64_MAX)
        day = timestamps.format_fact_time(at_ns if at_ns is not None else timestamps.now_ns())[:10]
        with self.db:
            self.db.execute(
                "INSERT INTO token_usage (agent, day, calls, tokens_in, tokens_out, declared_budget_in, refused) "
                "VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6) ON CONFLICT (agent, day) DO UPDATE SET calls = calls + 1, "
                "tokens_in = tokens_in + ?3, tokens_out = tokens_out + ?4, "
                "declared_budget_in = declared_budget_in + ?5, refused = refused + ?6",
                (key, day, tokens_in, tokens_out, declared, int(refused)))
        return usage

    def usage(self, agent: Optional[str]) -> Usage:
        return self.session.get(agent_key(agent), Usage())

    def standing(self, agent: Optional[str]) -> Standing:
        key = agent_key(agent)
        return Standing(key, self.usage(key).total, self.policy.limit_for(key))

    def session_payload(self, agent: Optional[str]) -> dict[str, Any]:
        """Crux's `session_token_usage` result: the text line and its fields."""
        key = agent_key(agent)
        usage = self.usage(key)
        limit = self.policy.limit_for(key)
        fields: dict[str, Any] = {"passport": key, "used": usage.total, "tokens_in": usage.tokens_in,
                                  "tokens_out": usage.tokens_out, "declared_budget_in": usage.declared_budget_in,
                                  "calls": usage.calls, "estimator": "chars/4"}
        if limit is not None:
            pct = min(usage.total * 100 // max(limit, 1), _U64_MAX)
            fields["limit"], fields["pct"] = limit, pct
            text = (f"session_token_usage: passport={key} used\u2248{usage.total} of {limit} tokens ({pct}%) "
                    f"across {usage.calls} calls")
        else:
            text = (f"session_token_usage: passport={key} used\u2248{usage.total} tokens (no limit set) "
                    f"across {usage.calls} calls")
        return {"text": text, "fields": fields}
