"""Conversation turns as ordinary facts: the encoding, its inverse, the neighbour look-up and the answer line.

A turn of conversation NAME at 0-based position P (its order within the conversation, across sessions) is
the fact

    entity          conversation:NAME
    key             turn:PPPPPP                       (P zero-padded to 6 digits)
    value           SPEAKER: TEXT                     (the text verbatim)
    source_receipt  turn:{"session":…,"time":…,"id":…} (compact JSON; each key only when given;
                                                       time in RFC 3339 UTC, the caller's own turn id)

so every part of cruxsql that handles facts (erasure, holds, retention, audit exports, backup and restore,
the cluster, a Crux daemon replaying the journal) handles turns unchanged. An agent's private turns are
stored under `__agent::<agent>::conversation:NAME`, as any private fact. Nothing here depends on the
view's derived tables: a turn is read back from the fact's own four fields.
"""

from __future__ import annotations

import json
import re
from array import array
from dataclasses import dataclass
from typing import Optional, Sequence

import apsw

from ..errors import InvalidInput
from ..facts import timestamps
from ..facts.privacy import split_private_entity

ENTITY_PREFIX = "conversation:"
KEY_PREFIX = "turn:"
RECEIPT_PREFIX = "turn:"
POSITION_DIGITS = 6
MAX_POSITION = 10 ** POSITION_DIGITS - 1
SPEAKER_SEPARATOR = ": "
KEY_GLOB = KEY_PREFIX + "[0-9]" * POSITION_DIGITS
_KEY = re.compile(re.escape(KEY_PREFIX) + rf"([0-9]{{{POSITION_DIGITS}}})")
_RECEIPT_KEYS = ("session", "time", "id")
# every boundary str.splitlines() splits at, so a turn stays one line for any client that splits lines
_LINE_BREAK = re.compile("\r\n|[\n\v\f\r\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation, as stored and as read back."""

    conversation: str
    position: int
    speaker: str
    text: str
    time: Optional[str] = None        # RFC 3339, UTC (`2023-05-08T13:56:00Z`)
    session: Optional[str] = None
    turn_id: Optional[str] = None     # the caller's own id of the turn


@dataclass(frozen=True)
class TurnFact:
    """The four fact fields a turn is stored as."""

    entity: str
    key: str
    value: str
    source_receipt: str


@dataclass(frozen=True)
class Neighbour:
    """A turn next to another one (the newest live version of its fact)."""

    seq: int
    fact_id: str
    turn: Turn
    offset: int         # its position minus the other's: -1 the turn before, 1 the turn after


def conversation_entity(conversation: str) -> str:
    return ENTITY_PREFIX + conversation


def turn_key(position: int) -> str:
    if not 0 <= position <= MAX_POSITION:
        raise InvalidInput(f"a conversation holds at most {MAX_POSITION + 1} turns (position {position})")
    return f"{KEY_PREFIX}{position:0{POSITION_DIGITS}d}"


def turn_fact(turn: Turn) -> TurnFact:
    """The fact a turn is stored as (the inverse of `parse_turn`)."""
    meta = {"session": turn.session, "time": turn.time, "id": turn.turn_id}
    receipt = {k: meta[k] for k in _RECEIPT_KEYS if meta[k] is not None}
    return TurnFact(conversation_entity(turn.conversation), turn_key(turn.position),
                    f"{turn.speaker}{SPEAKER_SEPARATOR}{turn.text}",
                    RECEIPT_PREFIX + json.dumps(receipt, ensure_ascii=False, separators=(",", ":")))


def parse_turn(entity: str, key: str, value: str, source_receipt: Optional[str]) -> Optional[Turn]:
    """The turn a fact encodes (its stored or visible entity), or None when the fact is not a turn. A turn
    fact without a receipt (stored by hand) is a turn without time, session or id."""
    logical = _logical(entity)
    conversation = logical[len(ENTITY_PREFIX):] if logical.startswith(ENTITY_PREFIX) else ""
    position = _KEY.fullmatch(key)
    speaker, sep, text = value.partition(SPEAKER_SEPARATOR)
    if not conversation or position is None or not sep or not speaker:
        return None
    meta = _receipt_fields(source_receipt)
    if meta is None:
        return None
    return Turn(conversation, int(position.group(1)), speaker, text, meta.get("time"), meta.get("session"),
                meta.get("id"))


def _logical(entity: str) -> str:
    """The entity its owner names: `<logical>` of an agent-private `__agent::<owner>::<logical>`."""
    split = split_private_entity(entity)
    return split[1] if split is not None else entity


def _receipt_fields(receipt: Optional[str]) -> Optional[dict[str, str]]:
    """The receipt's session, time and id ({} without a receipt); None when it is not a turn receipt."""
    if receipt is None:
        return {}
    if not receipt.startswith(RECEIPT_PREFIX):
        return None
    try:
        obj = json.loads(receipt[len(RECEIPT_PREFIX):])
    except ValueError:
        return None
    if not isinstance(obj, dict) or not all(isinstance(obj.get(k, ""), str) for k in _RECEIPT_KEYS):
        return None
    return {k: obj[k] for k in _RECEIPT_KEYS if k in obj}


# --- time: the forms agents send, normalised to RFC 3339 UTC -------------------------------------

_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
# a date and time without offset, as Python's datetime.isoformat() writes a naive one: taken as UTC
_NAIVE = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(\.[0-9]{1,9})?)?")
# LoCoMo's session times: "1:56 pm on 8 May, 2023"
_SPOKEN = re.compile(r"([0-9]{1,2}):([0-9]{2})\s*([ap])\.?m\.?\s+on\s+([0-9]{1,2})\s+([a-z]+)\.?,?\s+([0-9]{4})",
                     re.IGNORECASE)
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
TIME_FORMS = "RFC 3339, a date (2023-05-08), a UTC date and time (2023-05-08 13:56) or '1:56 pm on 8 May, 2023'"


def normalize_time(text: str) -> str:
    """`text` (RFC 3339, a date, a date and time without offset taken as UTC, or LoCoMo's
    "1:56 pm on 8 May, 2023") as RFC 3339 UTC with a `Z`; InvalidInput naming it otherwise."""
    text = text.strip()
    if _DATE.fullmatch(text):
        return _rfc3339(f"{text}T00:00:00Z", text)
    naive = _NAIVE.fullmatch(text)
    if naive is not None:
        day, hh, mi, ss, fraction = naive.groups()
        return _rfc3339(f"{day}T{hh}:{mi}:{ss or '00'}{fraction or ''}Z", text)
    spoken = _SPOKEN.fullmatch(text)
    if spoken is not None:
        return _rfc3339(_spoken_rfc3339(*spoken.groups()) or "", text)
    return _rfc3339(text, text)


def _spoken_rfc3339(hour: str, minute: str, half: str, day: str, month: str, year: str) -> Optional[str]:
    months = [m for m in _MONTHS if m.startswith(month.lower()) and len(month) >= 3]
    h = int(hour)
    if len(months) != 1 or not 1 <= h <= 12:
        return None
    h = h % 12 + (12 if half.lower() == "p" else 0)
    return f"{year}-{_MONTHS.index(months[0]) + 1:02d}-{int(day):02d}T{h:02d}:{minute}:00Z"


def _rfc3339(candidate: str, original: str) -> str:
    try:
        return timestamps.format_fact_time(timestamps.parse_ns(candidate))
    except InvalidInput:
        raise InvalidInput(f"time {original!r} is not a time cruxsql reads ({TIME_FORMS})") from None


# --- neighbours -----------------------------------------------------------------------------------

def _adjacent(db: apsw.Connection, seqs: Sequence[int], reach: int, columns: str) -> list[tuple]:
    """(anchor seq, offset, `columns` of `n`) for each live fact within `reach` positions of a turn-keyed
    fact of `seqs` in the same stored entity and tenant (so the same owner), nearest first, earlier before
    later: one query over the `facts_chain` index (tenant, entity, key)."""
    if not seqs or reach < 1:
        return []
    offsets = [d for n in range(1, reach + 1) for d in (-n, n)]
    return db.execute(
        f"SELECT a.seq, o.value, {columns} FROM facts a JOIN carray(?1) o "
        "JOIN facts n ON n.seq = (SELECT seq FROM facts WHERE tenant_hash = a.tenant_hash AND entity = a.entity "
        "  AND key = printf(?4, CAST(substr(a.key, ?5) AS INTEGER) + o.value) "
        "  AND deleted = 0 AND superseded_by IS NULL ORDER BY seq DESC LIMIT 1) "
        "WHERE a.seq IN carray(?2) AND a.key GLOB ?3 "
        "ORDER BY a.seq, abs(o.value), o.value",
        (apsw.carray(array("q", offsets)), apsw.carray(array("q", seqs)), KEY_GLOB,
         f"{KEY_PREFIX}%0{POSITION_DIGITS}d", len(KEY_PREFIX) + 1)).fetchall()


def neighbours(db: apsw.Connection, seqs: Sequence[int], reach: int = 1) -> dict[int, list[Neighbour]]:
    """For each turn fact `seqs` names, the live turns within `reach` positions of it in the same stored
    conversation entity and tenant (so the same owner), nearest first, earlier before later (`_adjacent`).
    Facts that are not turns have none."""
    found: dict[int, list[Neighbour]] = {}
    for anchor, offset, seq, fact_id, entity, key, value, receipt in _adjacent(
            db, seqs, reach, "n.seq, n.fact_id, n.entity, n.key, n.value, n.source_receipt"):
        turn = parse_turn(entity, key, value, receipt)
        if turn is not None:
            found.setdefault(anchor, []).append(Neighbour(seq, fact_id, turn, offset))
    return found


def adjacent_seqs(db: apsw.Connection, seqs: Sequence[int], reach: int = 1) -> list[tuple[int, int, int]]:
    """`neighbours` as (anchor seq, offset, seq), without reading the turns: for ranking, which needs only
    which facts sit next to which (a fact of a conversation entity with a turn key is taken as a turn)."""
    return [(anchor, offset, seq) for anchor, offset, seq, entity in _adjacent(db, seqs, reach, "n.seq, n.entity")
            if _logical(entity).startswith(ENTITY_PREFIX)]


def last_position(db: apsw.Connection, tenant_hash: str, entity: str) -> Optional[int]:
    """The highest position any fact of the stored conversation entity holds (deleted ones too, so a
    position is never given twice), or None for a conversation with no turns."""
    row = db.execute("SELECT key FROM facts WHERE tenant_hash = ? AND entity = ? AND key GLOB ? "
                     "ORDER BY key DESC LIMIT 1", (tenant_hash, entity, KEY_GLOB)).fetchone()
    return None if row is None else int(row[0][len(KEY_PREFIX):])


# --- the answer line ------------------------------------------------------------------------------

def turn_line(turn: Turn, value: Optional[str] = None, *fields: str) -> str:
    """A turn as `recall` shows it: `[NAME #P, 2023-05-08 13:56] SPEAKER: TEXT`, then each non-empty field
    after ` · `, one line (its line breaks as ⏎, a turn fact stored by hand too); `value` replaces
    `SPEAKER: TEXT` (a value cut to a budget)."""
    said = f"{turn.speaker}{SPEAKER_SEPARATOR}{turn.text}" if value is None else value
    when = f", {_short_time(turn.time)}" if turn.time else ""
    head = f"[{turn.conversation} #{turn.position}{when}] {said}"
    return _LINE_BREAK.sub(" ⏎ ", " · ".join((head, *(f for f in fields if f))))


def _short_time(time: str) -> str:
    """`2023-05-08 13:56` (UTC), or the date alone at midnight."""
    return time[:10] if time[11:19] == "00:00:00" else f"{time[:10]} {time[11:16]}"
