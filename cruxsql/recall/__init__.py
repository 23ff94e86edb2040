"""Fact recall: what comes back into an agent's context (query_facts, get_bootstrap, memory_view).

Modules: `facade` (the `Recall` calls and Crux's pipeline), `text_index` (trigram postings kept in
the view), `timeline` (the known_at timeline), `derived_writes` (how those two write into the view), `scope` (Rust lowercasing, agent and tenant visibility), `freshness`
(decay and salience), `tokens` (estimates and budgets), `crc_v1` (the tiered, reversible envelope), `relevance`
(`recall`), `conversations` and `turns` (conversations as memory: turns stored as ordinary facts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy_exports import lazy_attributes

_EXPORTS = {"Recall": "facade"}   # name -> module, imported on first use
__all__ = ['Recall']

__getattr__ = lazy_attributes(__name__, _EXPORTS)


if TYPE_CHECKING:
    from .facade import Recall
