"""Agent scope and tenancy (Crux's crates/crux-mcp/src/scope.rs), and the Rust text rules recall matching needs.

An entity `__agent::<owner>::<logical>` is visible only to `<owner>`, under `<logical>`; any other
private fact is hidden from everyone; everything else is visible under its stored entity. Tenancy is
always applied by recall (`default` unless the caller names one): Crux makes it opt-in (docs/recall.md).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from typing import Optional

from ..facts.privacy import agent_private_entity
from ..facts.privacy import split_private_entity as split_private_entity  # recall reads it from here

AGENT_SESSION_PREFIX = "__agent_session::"
DEFAULT_TENANT = "default"

# Rust `char::is_whitespace` (Unicode White_Space). Python's str.split() also splits on U+001C..U+001F.
RUST_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009" \
                  "\u200a\u2028\u2029\u202f\u205f\u3000"
_WS_SPLIT = re.compile("[" + re.escape(RUST_WHITESPACE) + "]+")

# Lowercase mappings Unicode 16 added (Rust >= 1.83 knows them; Python < 3.14 ships an older table).
_UNICODE16_LOWER = {0x1C89: 0x1C8A, 0xA7CB: 0x0264, 0xA7CC: 0xA7CD, 0xA7DA: 0xA7DB, 0xA7DC: 0x019B}
_UNICODE16_LOWER.update({cp: cp + 0x20 for cp in range(0x10D50, 0x10D66)})  # Garay
_NEEDS_PATCH = tuple(int(x) for x in unicodedata.unidata_version.split(".")[:1]) < (16,)
_PATCH_TABLE = {k: v for k, v in _UNICODE16_LOWER.items()} if _NEEDS_PATCH else {}
_PATCH_CHARS = re.compile("[" + "".join(chr(k) for k in _PATCH_TABLE) + "]") if _PATCH_TABLE else None


def rust_lower(text: str) -> str:
    """Rust `str::to_lowercase`: full Unicode lowercase mapping with the Final_Sigma rule.

    Python's `str.lower()` implements the same algorithm (full SpecialCasing mappings such as
    'İ' -> 'i̇', and Final_Sigma with the same Cased / Case_Ignorable look-around; Rust fixed its
    ASCII-prefix Final_Sigma bug in 1.80). The only difference left is the Unicode table version,
    patched here for the case pairs Unicode 16 added.
    """
    out = text.lower()
    if _PATCH_CHARS is not None and not out.isascii() and _PATCH_CHARS.search(out):
        out = out.translate(_PATCH_TABLE)
    return out


def split_terms(query: str) -> list[str]:
    """`query.to_lowercase().split_whitespace()`: lowercase the whole query, split on White_Space."""
    return [t for t in _WS_SPLIT.split(rust_lower(query)) if t]


def normalize_agent(agent: Optional[str]) -> Optional[str]:
    """An empty agent name means no authenticated agent."""
    return agent if agent else None


def normalize_tenant(tenant: Optional[str]) -> str:
    """The tenant recall filters on: the caller's, or `default` (blank counts as unset)."""
    return tenant if tenant is not None and tenant.strip() else DEFAULT_TENANT


def visible_entity(entity: str, private: bool, agent: Optional[str]) -> Optional[str]:
    """`visible_entity_for_agent`: the entity the caller sees the fact under, or None if hidden."""
    split = split_private_entity(entity)
    if split is not None:
        owner, logical = split
        return logical if agent is not None and agent == owner else None
    if private:
        return None
    return entity


def owner_entity(agent: str, logical: str) -> str:
    """The stored entity of an agent-private fact: `__agent::<agent>::<logical>`."""
    return agent_private_entity(agent, logical)


def prefix_upper_bound(prefix: str) -> Optional[str]:
    """The least string above every string that starts with `prefix` in code point (= UTF-8 BINARY)
    order, so `prefix <= s < bound` holds exactly for the strings starting with `prefix`; None when
    there is no such bound (empty prefix, or only U+10FFFF characters)."""
    chars = list(prefix)
    while chars:
        cp = ord(chars.pop()) + 1
        if cp == 0xD800:
            cp = 0xE000
        if cp <= sys.maxunicode:
            return "".join(chars) + chr(cp)
    return None
