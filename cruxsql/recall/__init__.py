"""Fact recall: what comes back into an agent's context (query_facts, get_bootstrap, memory_view).

Modules: `queries` (the `Recall` calls and Crux's pipeline), `fact_index` (trigram postings and the
known-at timeline kept in the view), `scope` (Rust lowercasing, agent and tenant visibility), `freshness`
(decay and salience), `tokens` (estimates and budgets), `crc_v1` (the tiered, reversible envelope).
"""

from .queries import Recall

__all__ = ["Recall"]
