"""A `recall` query's concepts: its words minus stopwords, consecutive words naming a unit the index holds
(`payments-api`, `Maria Okafor`: one concept, held only by facts holding the unit), quoted phrases (one
required concept whose words must be adjacent) and `-word` exclusions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from . import fact_analyzer
from .fact_analyzer import STOPWORDS, term_of, unit_term, words

QUOTED = re.compile(r'"([^"]*)"')


@dataclass
class Concept:
    """One thing the query asks for: a word (its term), a unit (`=payments-api`, or all its words), or
    a quoted phrase (all its words, adjacent)."""

    text: str
    parts: list[str]                    # the terms of its content words
    unit: Optional[str] = None          # a unit term the index holds
    phrase: Optional[list[str]] = None  # a phrase's lowercased words (adjacency is checked on the rows)


@dataclass
class ParsedQuery:
    concepts: list[Concept]
    excluded: list[str]                 # terms a fact must not hold


def _units(ws: list[str], known: set[str]) -> list[tuple[int, int, str]]:
    """Spans (start, end, unit term) of consecutive words naming a unit in `known`, longest first, left to
    right, without overlaps."""
    spans: list[tuple[int, int, str]] = []
    taken = [False] * len(ws)
    for size in range(min(fact_analyzer.MAX_UNIT_WORDS, len(ws)), 1, -1):
        for start in range(0, len(ws) - size + 1):
            if any(taken[start:start + size]):
                continue
            unit = unit_term(ws[start:start + size])
            if unit in known:
                spans.append((start, start + size, unit))
                taken[start:start + size] = [True] * size
    return sorted(spans)


def unit_candidates(text: str) -> list[str]:
    """Every unit term that consecutive words of `text` could name (2 to 4 words)."""
    ws = words(text)
    return [unit_term(ws[i:i + n]) for n in range(2, fact_analyzer.MAX_UNIT_WORDS + 1)
            for i in range(0, len(ws) - n + 1)]


def parse_query(text: str, known_units: set[str]) -> ParsedQuery:
    """Concepts and exclusions of a query (`known_units`: the unit terms the index holds)."""
    concepts: list[Concept] = []
    for phrase in QUOTED.findall(text):
        ws = words(phrase)
        if ws:
            unit = unit_term(ws) if len(ws) > 1 and unit_term(ws) in known_units else None
            concepts.append(Concept(phrase, [term_of(w) for w in ws if w not in STOPWORDS] or [term_of(ws[0])],
                                    unit, ws if len(ws) > 1 else None))
    rest = QUOTED.sub(" ", text)
    excluded: list[str] = []
    kept: list[str] = []
    for chunk in rest.split():
        if chunk.startswith("-") and len(chunk) > 1:
            ws = words(chunk[1:])
            # `-payments-api` leaves out the name, not every fact holding `api`
            excluded += [unit_term(ws)] if len(ws) > 1 else [term_of(w) for w in ws if w not in STOPWORDS]
        else:
            kept.append(chunk)
    ws = words(" ".join(kept))
    spans = _units(ws, known_units)
    covered = {i for s, e, _ in spans for i in range(s, e)}
    for start, end, unit in spans:
        concepts.append(Concept(" ".join(ws[start:end]), [term_of(w) for w in ws[start:end] if w not in STOPWORDS],
                                unit))
    seen = {c.text for c in concepts}
    for i, w in enumerate(ws):
        if i in covered or w in STOPWORDS or w in seen:
            continue
        seen.add(w)
        concepts.append(Concept(w, [term_of(w)]))
    return ParsedQuery(concepts, list(dict.fromkeys(excluded)))


def phrase_holds(phrase: list[str], texts: tuple[str, ...]) -> bool:
    """Whether one of `texts` holds the lowercased words of `phrase` adjacently."""
    for text in texts:
        ws = words(text)
        for i in range(len(ws) - len(phrase) + 1):
            if ws[i:i + len(phrase)] == phrase:
                return True
    return False
