"""The time window a question names, for `recall`'s ranking of conversation turns: "in May 2023", "on
May 3, 2023", "yesterday", "last week", "last month", "last year".

A named month or day is that period, and the SPILL days after it (the next session tells of it: "what
did Maria do in December 2023?" is answered in a session of early January as often as in December's).
A relative phrase is read as the conversation would (`facts.time_phrases`, in UTC) at its latest turn's
time, and ends there. The turns whose time (their receipt's) falls in the window have their score
multiplied by 1 + WINDOW_BOOST: a cue prefers, never filters.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Optional

from ..facts import time_phrases

WINDOW_BOOST = 0.3
SPILL = timedelta(days=7)
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_NAMED = re.compile(rf"\b({'|'.join(MONTHS)})(?:\s+(\d{{1,2}})(?:st|nd|rd|th)?)?,?\s+((?:19|20)\d\d)\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\b(yesterday|last (?:week|month|year))\b", re.IGNORECASE)
_PERIOD_END = {"yesterday": "today", "last week": "this week", "last month": "this month", "last year": "this year"}


def _ns(when: datetime) -> int:
    return int(when.timestamp()) * 1_000_000_000


def named_window(question: str) -> Optional[tuple[int, int]]:
    """[start, end) in ns of the month or day the question names with its year, SPILL days added."""
    match = _NAMED.search(question)
    if match is None:
        return None
    month, day, year = MONTHS.index(match.group(1).lower()) + 1, match.group(2), int(match.group(3))
    if day is not None:
        try:
            start = datetime(year, month, int(day), tzinfo=timezone.utc)
        except ValueError:
            return None
        end = start + timedelta(days=1)
    else:
        start = datetime(year, month, 1, tzinfo=timezone.utc)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
    return _ns(start), _ns(end + SPILL)


def relative_phrase(question: str) -> Optional[str]:
    """The relative phrase a question holds (`last week`), lowercased, or None."""
    match = _RELATIVE.search(question)
    return " ".join(match.group(1).lower().split()) if match else None


def relative_window(phrase: str, anchor_ns: int) -> tuple[int, int]:
    """[start, end) in ns of `phrase` read at `anchor_ns` (the conversation's latest time), UTC."""
    start = time_phrases.resolve(phrase, "question", zone="UTC", now_ns=anchor_ns).ns
    end = time_phrases.resolve(_PERIOD_END[phrase], "question", zone="UTC", now_ns=anchor_ns).ns
    return start, end
