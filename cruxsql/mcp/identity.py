"""Who a call acts for: the agent and tenant of the connection, never a tool argument (crux-mcp's agent.rs).

stdio: the operator names them when launching the server (`--agent`, `--tenant`). HTTP: each request's
bearer token is looked up in the registry built from `CRUX_AGENT_TOKENS` (`name:token` pairs, comma
separated; cruxsql also accepts `name:token:tenant`) or `CRUX_AGENT_TOKEN` (one token, agent `default`).
Only BLAKE3 hashes of tokens are kept, compared in constant time. An empty registry is Crux's
single-user mode: requests run as the launch identity (anonymous unless `--agent` is given).
"""

from __future__ import annotations

import hmac
import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional

import blake3

from ..errors import InvalidInput

TOKENS_ENV = "CRUX_AGENT_TOKENS"
TOKEN_ENV = "CRUX_AGENT_TOKEN"
DEFAULT_TENANT = "default"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_TOKEN = re.compile(r"[A-Za-z0-9._~-]{32,256}")


@dataclass(frozen=True)
class Identity:
    """The agent (None = anonymous: sees no private facts) and the tenant a call acts for."""

    agent: Optional[str] = None
    tenant: str = DEFAULT_TENANT


def check_agent_name(name: str, where: str = "agent") -> str:
    if not _NAME.fullmatch(name):
        raise InvalidInput(f"{where}: agent name {name!r} must be 1-64 characters of A-Z a-z 0-9 . _ -")
    return name


def _digest(token: str) -> bytes:
    return blake3.blake3(token.encode("utf-8")).digest()


class AgentRegistry:
    """Bearer token -> Identity, holding only token hashes."""

    def __init__(self, entries: list[tuple[bytes, Identity]]) -> None:
        self._entries = entries

    def __bool__(self) -> bool:
        return bool(self._entries)

    @classmethod
    def from_pairs(cls, text: str, default_tenant: str = DEFAULT_TENANT) -> "AgentRegistry":
        """`name:token[:tenant]` segments, trimmed, empty ones skipped; any invalid one is an error."""
        entries = []
        for segment in (s.strip() for s in text.split(",")):
            if not segment:
                continue
            parts = segment.split(":")
            if len(parts) not in (2, 3):
                raise InvalidInput(f"{TOKENS_ENV}: {_redact(segment)} is not name:token or name:token:tenant")
            name, token = parts[0].strip(), parts[1].strip()
            check_agent_name(name, TOKENS_ENV)
            if not _TOKEN.fullmatch(token):
                raise InvalidInput(f"{TOKENS_ENV}: the token of agent {name!r} must be 32-256 characters of "
                                   "A-Z a-z 0-9 . _ ~ -")
            tenant = parts[2].strip() if len(parts) == 3 and parts[2].strip() else default_tenant
            entries.append((_digest(token), Identity(name, tenant)))
        if not entries:
            raise InvalidInput(f"{TOKENS_ENV} is set but contained no valid name:token pairs")
        return cls(entries)

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None, default_tenant: str = DEFAULT_TENANT) -> "AgentRegistry":
        env = os.environ if env is None else env
        if env.get(TOKENS_ENV) is not None:
            return cls.from_pairs(env[TOKENS_ENV], default_tenant)
        if env.get(TOKEN_ENV) is not None:
            token = env[TOKEN_ENV].strip()
            if not _TOKEN.fullmatch(token):
                raise InvalidInput(f"{TOKEN_ENV} must be 32-256 characters of A-Z a-z 0-9 . _ ~ -")
            return cls([(_digest(token), Identity("default", default_tenant))])
        return cls([])

    def lookup(self, token: str) -> Optional[Identity]:
        """The identity whose token hash matches (every entry compared, in constant time each)."""
        digest = _digest(token)
        found = None
        for stored, identity in self._entries:
            if hmac.compare_digest(stored, digest) and found is None:
                found = identity
        return found

    def authenticate(self, authorization: Optional[str]) -> Optional[Identity]:
        """The identity of an `Authorization: Bearer <token>` header, or None."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        return self.lookup(authorization[len("Bearer "):])


def _redact(segment: str) -> str:
    name = segment.split(":", 1)[0]
    return f"{name!r}:<token>"
