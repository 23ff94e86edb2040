"""Fact recall: what comes back into an agent's context (query_facts, get_bootstrap, memory_view).

Modules: `queries` (the `Recall` calls and Crux's pipeline), `text_index` (trigram postings kept in
the view), `timeline` (the known_at timeline), `derived_writes` (how those two write into the view), `scope` (Rust lowercasing, agent and tenant visibility), `freshness`
(decay and salience), `tokens` (estimates and budgets), `crc_v1` (the tiered, reversible envelope), `relevance`
(`recall`), `conversations` and `turns` (conversations as memory: turns stored as ordinary facts).
"""

from .queries import Recall

__all__ = ["Recall"]
