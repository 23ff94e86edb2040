"""Fact recall: what comes back into an agent's context (query_facts, get_bootstrap, memory_view).

Modules: `queries` (the `Recall` calls and Crux's pipeline), `text_index` (trigram postings kept in
the view), `timeline` (the known_at timeline), `derived_writes` (how those two write into the view), `scope` (Rust lowercasing, agent and tenant visibility), `freshness`
(decay and salience), `tokens` (estimates and budgets), `crc_v1` (the tiered, reversible envelope), `relevance`
(`recall`), `conversations` and `turns` (conversations as memory: turns stored as ordinary facts).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {"Recall": "queries"}   # name -> module, imported on first use
__all__ = ['Recall']


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562): importing one module of the package
    never loads the others."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .queries import Recall
