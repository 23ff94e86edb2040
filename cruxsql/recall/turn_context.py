"""Conversation context in `recall`'s ranking: a turn scored with its best neighbouring turn, and time cues.

A conversation's turns are facts (entity `conversation:NAME`, key `turn:PPPPPP`, value `SPEAKER: TEXT`,
receipt `turn:{"session", "time", "id"}`). The words of a question are often in the turn before the one
that answers it (the other speaker's question: "what did you paint?" — "a sunrise over the lake"), so a
turn's score is its own BM25 plus NEIGHBOUR_WEIGHT times the BM25 of the turn before it, and the turns
after the best-scoring ones are candidates even when they hold no word of the question. Only the turn
before counts: a question's turn boosted by its answer as well ranked both halves of one exchange
together and pushed other sessions out of the top 10 (LoCoMo: sessions covered 0.866 with both
neighbours, 0.883 with the turn before only, evidence turns at 5 0.638 and 0.648).

Time cues: a question asking when something happened ("when did ...", "what year ...", "how long ago ...")
prefers the turns that say when (a date, a month, a weekday, `yesterday`, `last week`, `... ago`): their
score is multiplied by 1 + TIME_BOOST. Plain facts are scored the same way (a fact whose value says when).
"""

from __future__ import annotations

import re
from typing import Sequence

import apsw
import numpy as np

from . import turns

NEIGHBOUR_WEIGHT = 0.5     # share of the score of the turn before it a turn adds to its own
SEEDS = 100                # the best-scoring candidates whose turns before and after are looked up
TIME_BOOST = 0.3           # a "when" question: the turns that say when, score times 1 + TIME_BOOST

_WHEN_QUESTION = re.compile(
    r"\b(when|what (year|month|day|date|time)|which (year|month|day|date)|how long ago|since when)\b", re.IGNORECASE)
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend"
_SAYS_WHEN = re.compile(
    rf"\b((19|20)\d\d|({_MONTHS})\b|({_WEEKDAYS})s?|yesterday|today|tonight|tomorrow|"
    rf"(last|next|this|past|coming) (week|month|year|night|summer|winter|spring|fall|autumn|weekend|time|few)|"
    rf"ago|recently|lately|just now|earlier|soon)\b", re.IGNORECASE)


def with_neighbours(db: apsw.Connection, seqs: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(candidates, scores) once each turn adds NEIGHBOUR_WEIGHT times the score of the turn before it
    (`turns.adjacent_seqs`: (turn, the turn before it) pairs for the seeds and the turns after them):
    the candidates `seqs` (ascending) and the turns after the SEEDS best of them, ascending (a turn with
    no score of its own and none before it is no candidate)."""
    if not len(seqs) or NEIGHBOUR_WEIGHT == 0:
        return seqs, scores
    seeds = seqs[np.argsort(-scores, kind="stable")[:SEEDS]]
    pairs = np.array([(anchor, seq) if offset < 0 else (seq, anchor)
                      for anchor, offset, seq in turns.adjacent_seqs(db, np.sort(seeds).tolist())],
                     dtype=np.int64).reshape(-1, 2)
    if not len(pairs):
        return seqs, scores
    held = np.isin(pairs[:, 1], seqs)            # the turn before scored: it gives the turn context
    pairs = pairs[held]
    out = np.union1d(seqs, pairs[:, 0])
    own = np.zeros(len(out), dtype=scores.dtype)
    own[np.searchsorted(out, seqs)] = scores
    context = np.zeros(len(out), dtype=scores.dtype)
    context[np.searchsorted(out, pairs[:, 0])] = scores[np.searchsorted(seqs, pairs[:, 1])]
    return out, own + scores.dtype.type(NEIGHBOUR_WEIGHT) * context


def asks_when(question: str) -> bool:
    """Whether a question asks when something happened."""
    return _WHEN_QUESTION.search(question) is not None


def says_when(text: str) -> bool:
    """Whether a text says when something happened (a year, month, weekday, `yesterday`, `last week`, ...)."""
    return _SAYS_WHEN.search(text) is not None


def time_factors(values: Sequence[str]) -> np.ndarray:
    """Per value, the factor a "when" question multiplies its score by."""
    return np.array([1.0 + TIME_BOOST if says_when(v) else 1.0 for v in values], dtype=np.float32)
