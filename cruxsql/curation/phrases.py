"""Pairwise value classifiers for the beyond-Crux detectors: numbers with units, phrase polarity.

Crux only compares whole values against 27 words; these look inside short phrases.

* Numbers: every number of a value (`1,200`, `-3.5`, `120ms`) with the unit word glued to or right
  after it, and the value's *template* (the normalised text with each number replaced by `#`).
  Two values disagree numerically when their numbers differ and either their templates are equal
  ("3 replicas" / "7 replicas") or both are a bare quantity with compatible units ("120 ms" /
  "95ms", "3" / "7").
* Polarity: cue words and phrases (deployed, rolled back, passing, down, ...) each count +1 or -1,
  flipped by a negation within the three words before it ("not deployed", "never passed",
  "isn't live"). A short value (at most 12 words) with a non-zero sum has that polarity.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .shingles import normalise

MAX_PHRASE_WORDS = 12
_NUMBER = re.compile(r"(?<![\d.])([-+]?\d[\d,]*(?:\.\d+)?)\s*([a-zA-Z%µ]+)?")
_WORD = re.compile(r"[a-z0-9']+")
NUMBER_MARK = "qnumq"

POSITIVE_CUES = {
    "deployed", "deploy", "live", "up", "running", "passed", "passing", "pass", "green", "healthy", "enabled",
    "approved", "merged", "shipped", "released", "succeeded", "success", "successful", "available", "active",
    "online", "done", "complete", "completed", "resolved", "fixed", "working", "works", "yes", "true", "on",
    "accepted", "confirmed", "open", "allowed", "present", "ok",
}
NEGATIVE_CUES = {
    "rolled back", "rollback", "reverted", "revert", "down", "failed", "failing", "fail", "failure", "red",
    "broken", "disabled", "blocked", "rejected", "offline", "stopped", "cancelled", "canceled", "paused",
    "unavailable", "inactive", "unhealthy", "outage", "crashed", "crashing", "pending", "unresolved", "no",
    "false", "off", "denied", "closed", "missing", "absent", "declined", "aborted", "abandoned", "withdrawn",
}
NEGATIONS = {"not", "no", "never", "without", "isn't", "wasn't", "aren't", "weren't", "didn't", "doesn't",
             "don't", "hasn't", "haven't", "hadn't", "won't", "cannot", "can't", "nor", "un"}
_UNITS = {"ms": "ms", "millisecond": "ms", "milliseconds": "ms", "s": "s", "sec": "s", "secs": "s",
          "second": "s", "seconds": "s", "m": "min", "min": "min", "mins": "min", "minute": "min",
          "minutes": "min", "h": "h", "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "%": "%",
          "percent": "%", "d": "d", "day": "d", "days": "d"}


@dataclass(frozen=True)
class Quantity:
    number: float
    unit: Optional[str]


def quantities(value: str) -> list[Quantity]:
    """The numbers in a value, each with its unit word (lowercased, common synonyms folded)."""
    out = []
    for m in _NUMBER.finditer(value):
        try:
            number = float(m.group(1).replace(",", ""))
        except ValueError:
            continue
        out.append(Quantity(number, _unit(m.group(2)) or None))
    return out


def _unit(word: Optional[str]) -> str:
    if not word:
        return ""
    return _UNITS.get(word.lower(), word.lower())


def template(value: str) -> str:
    """The normalised text with every number replaced by a mark and its unit folded."""
    return normalise(_NUMBER.sub(lambda m: f" {NUMBER_MARK} {_unit(m.group(2))} ", value))


def _bare_quantity(value: str) -> bool:
    words = template(value).split()
    return 1 <= len(words) <= 2 and words[0] == NUMBER_MARK


def numeric_disagreement(a: str, b: str) -> Optional[dict]:
    """Evidence `{a, b, template}` when two values state different numbers for the same thing."""
    qa, qb = quantities(a), quantities(b)
    if not qa or not qb:
        return None
    ta, tb = template(a), template(b)
    if ta == tb and len(qa) == len(qb):
        if all(x.number == y.number for x, y in zip(qa, qb)):
            return None
        return {"a": [q.number for q in qa], "b": [q.number for q in qb], "template": ta, "match": "template"}
    if _bare_quantity(a) and _bare_quantity(b) and len(qa) == len(qb) == 1:
        x, y = qa[0], qb[0]
        if x.unit is not None and y.unit is not None and x.unit != y.unit:
            return None
        if x.number == y.number:
            return None
        return {"a": [x.number], "b": [y.number], "unit": x.unit or y.unit, "match": "bare_quantity"}
    return None


def phrase_polarity(value: str) -> tuple[int, list[str]]:
    """(+1 / -1 / 0, cues found with their sign) of a short value; 0 for long or cue-less text."""
    words = _WORD.findall(value.lower().replace("’", "'"))
    if not words or len(words) > MAX_PHRASE_WORDS:
        return 0, []
    score, cues, i = 0, [], 0
    while i < len(words):
        two = " ".join(words[i:i + 2])
        if two in NEGATIVE_CUES:
            cue, sign, width = two, -1, 2
        elif words[i] in POSITIVE_CUES:
            cue, sign, width = words[i], 1, 1
        elif words[i] in NEGATIVE_CUES:
            cue, sign, width = words[i], -1, 1
        else:
            i += 1
            continue
        if cue in ("no", "not") and i + 1 < len(words):
            i += 1      # "no" before another word is a negation, handled by that word
            continue
        negated = any(w in NEGATIONS or w.endswith("n't") for w in words[max(0, i - 3):i])
        if negated:
            sign = -sign
        cues.append(("not " if negated else "") + cue)
        score += sign
        i += width
    return (score > 0) - (score < 0), cues


def polarity_disagreement(a: str, b: str) -> Optional[dict]:
    """Evidence `{a_cues, b_cues, shared}` when two short values have opposite phrase polarity."""
    pa, ca = phrase_polarity(a)
    pb, cb = phrase_polarity(b)
    if pa == 0 or pb == 0 or pa == pb:
        return None
    shared = sorted(set(_WORD.findall(a.lower())) & set(_WORD.findall(b.lower())) - NEGATIONS)
    return {"a_polarity": "positive" if pa > 0 else "negative", "a_cues": ca,
            "b_polarity": "positive" if pb > 0 else "negative", "b_cues": cb, "shared_words": shared}
