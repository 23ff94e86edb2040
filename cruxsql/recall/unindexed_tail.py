"""The word postings of a read that sees facts the index does not hold yet (its unindexed tail).

A write leaves its facts' postings to the write that finds `text_index.INDEX_EVERY` facts unindexed. A
read in between does not index them (rewriting the postings rows they join costs more than scanning
them): it reads the postings as the index would hold them once caught up: `TermsWithTail` analyses the tail's facts in memory, with the
index's own analysis (`FactTerms._analyse` of `FactTerms._batch`), and adds their postings and term
statistics to those read from the tables. The tail's seqs are above every indexed one, so its postings
come after the stored ones, in the order the index would keep them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

import apsw

from .fact_terms import BLOCK_BITS, FactTerms, TermPostings


@dataclass(frozen=True)
class _Analysed:
    """The tail's postings records (`fact_terms.POSTING`) and their seqs, grouped by key, with each key's
    (tenant, owner, term) slice bounds, and its statistics deltas by (tenant, owner)."""

    seqs: np.ndarray
    records: np.ndarray
    bounds: dict[tuple[str, str, str], tuple[int, int]]
    stats: dict[tuple[str, str], np.ndarray]

    def get(self, key: tuple[str, str, str]) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """The seqs and records of `key`'s postings, or None."""
        span = self.bounds.get(key)
        return None if span is None else (self.seqs[span[0]:span[1]], self.records[span[0]:span[1]])


class TermsWithTail(FactTerms):
    """`FactTerms` lookups over the index plus the facts with seqs in (`indexed`, `newest`]."""

    def __init__(self, db: apsw.Connection, indexed: int, newest: int) -> None:
        super().__init__(db)
        self.indexed, self.newest = indexed, newest
        self._analysed: Optional[_Analysed] = None

    def _tail(self) -> _Analysed:
        """The tail analysed, once (the first lookup that needs it)."""
        if self._analysed is None:
            stats, records, keys, blocks = self._analyse(self._batch(self.indexed, self.newest))
            seqs = records["off"].astype(np.int64) + (blocks << BLOCK_BITS)
            bounds: dict[tuple[str, str, str], tuple[int, int]] = {}
            if len(records):
                starts = np.flatnonzero(np.r_[True, keys.group[1:] != keys.group[:-1]])
                ends = np.r_[starts, len(records)].tolist()
                bounds = dict(zip(zip(*keys.columns(keys.group[starts])), zip(ends[:-1], ends[1:])))
            self._analysed = _Analysed(seqs, records, bounds, stats)
        return self._analysed

    def postings(self, tenant: str, agent: Optional[str], terms: Sequence[str]) -> dict[str, TermPostings]:
        out = super().postings(tenant, agent, terms)
        tail = self._tail()
        for term in dict.fromkeys(terms):
            parts = [p for p in (tail.get((tenant, owner, term)) for owner in self._owners(agent)) if p is not None]
            if not parts:
                continue
            stored = out.get(term)
            seqs = np.concatenate(([stored.seqs] if stored else []) + [p[0] for p in parts])
            records = np.concatenate([p[1] for p in parts])
            tf = np.concatenate(([stored.tf] if stored else []) + [records["tf"]])
            lengths = np.concatenate(([stored.lengths] if stored else []) + [records["len"]])
            if len(parts) > 1:  # two scopes' tails: in seq order, as the index merges its blocks
                order = np.argsort(seqs, kind="stable")
                seqs, tf, lengths = seqs[order], tf[order], lengths[order]
            out[term] = TermPostings(seqs, tf, lengths)
        return out

    def _sums(self, tenant: str, agent: Optional[str]) -> tuple[int, np.ndarray]:
        facts, sums = super()._sums(tenant, agent)
        for owner in self._owners(agent):
            delta = self._tail().stats.get((tenant, owner))
            if delta is not None:
                facts += int(delta[0])
                sums = sums + delta[1:].astype(np.float64)
        return facts, sums
